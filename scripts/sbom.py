#!/usr/bin/env python3
"""A CycloneDX 1.5 SBOM (JSON) of Switchyard's release build, from
`cargo metadata` and Cargo.lock. Standard library only (Python 3.9+).

Every package Cargo.lock pins is a component, with its version, its
crates.io SHA-256 checksum (a `hashes` entry), a purl and, where cargo
metadata knows it, its license. Its `scope` and the `cargo:role` property
say what it is to the release binary for the target platform:

  runtime          linked into the `switchyard` binary     scope: required
  build            build scripts, proc macros, their deps  scope: excluded
  dev              tests and benches only                  scope: excluded
  other-platform   pinned for another target's build       scope: excluded

`dependencies` holds the build's graph (normal and build edges) from the
binary's package down. The serial number is derived from Cargo.lock, so
the same lock gives the same document (the timestamp is SOURCE_DATE_EPOCH
when set).

    scripts/sbom.sh [OUT]          # runs cargo metadata, then this
    scripts/sbom.py --metadata meta.json --lock Cargo.lock --target x86_64-unknown-linux-gnu
"""

import argparse
import datetime
import hashlib
import json
import os
import sys
import uuid

ROOT = "switchyard"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def read_lock(path):
    """The [[package]] tables of a Cargo.lock (v3 or v4), as dicts of
    name, version, source and checksum (the format is flat enough for a
    line reader; no TOML library needed)."""
    packages, current, in_list = [], None, False
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if in_list:
                in_list = not line.startswith("]")
                continue
            if line == "[[package]]":
                current = {}
                packages.append(current)
                continue
            if line.startswith("["):
                current = None
                continue
            if current is None or "=" not in line:
                continue
            key, value = (part.strip() for part in line.split("=", 1))
            if value.startswith("[") and not value.endswith("]"):
                in_list = True
                continue
            if value.startswith('"') and value.endswith('"'):
                current[key] = value[1:-1]
    for package in packages:
        if "name" not in package or "version" not in package:
            sys.exit("sbom: %s has a package without name or version" % path)
    return packages


def lock_key(name, version, source):
    return (name, version, source or "")


def metadata_source(package):
    """A metadata package's source as Cargo.lock writes it (git sources
    carry their commit after `#` in both)."""
    return package.get("source") or ""


def purl(name, version, source):
    text = "pkg:cargo/%s@%s" % (name, version)
    if source.startswith("git+"):
        text += "?vcs_url=" + source.split("#", 1)[0]
    return text


def roles(metadata, root_id):
    """Each package id reached by the build of `root_id` for the filtered
    platform: `runtime` when linked into it, `build` when only run while
    building it (build scripts, proc macros and what they use)."""
    nodes = {node["id"]: node for node in metadata["resolve"]["nodes"]}
    packages = {package["id"]: package for package in metadata["packages"]}

    def proc_macro(package_id):
        return any("proc-macro" in target["kind"] for target in packages[package_id]["targets"])

    role = {}
    # Runtime first: normal edges from the root, never into a proc macro.
    stack = [root_id]
    while stack:
        package_id = stack.pop()
        if role.get(package_id) == "runtime":
            continue
        role[package_id] = "runtime"
        for dep in nodes[package_id]["deps"]:
            normal = any(kind["kind"] is None for kind in dep["dep_kinds"])
            if normal and not proc_macro(dep["pkg"]):
                stack.append(dep["pkg"])
    # Then what building needs: build edges and proc macros of runtime
    # crates, and everything those reach by normal or build edges.
    stack = []
    for package_id in [p for p, r in role.items() if r == "runtime"]:
        for dep in nodes[package_id]["deps"]:
            build = any(kind["kind"] == "build" for kind in dep["dep_kinds"])
            normal = any(kind["kind"] is None for kind in dep["dep_kinds"])
            if build or (normal and proc_macro(dep["pkg"])):
                stack.append(dep["pkg"])
    while stack:
        package_id = stack.pop()
        if package_id in role:
            continue
        role[package_id] = "build"
        for dep in nodes[package_id]["deps"]:
            if any(kind["kind"] in (None, "build") for kind in dep["dep_kinds"]):
                stack.append(dep["pkg"])
    return role


def graph(metadata, reached, ref_of):
    """The build's edges (normal and build) between reached packages."""
    edges = []
    for node in metadata["resolve"]["nodes"]:
        if node["id"] not in reached:
            continue
        depends = sorted(
            {
                ref_of[dep["pkg"]]
                for dep in node["deps"]
                if dep["pkg"] in reached and any(kind["kind"] in (None, "build") for kind in dep["dep_kinds"])
            }
        )
        edges.append({"ref": ref_of[node["id"]], "dependsOn": depends})
    edges.sort(key=lambda edge: edge["ref"])
    return edges


def build_bom(metadata, lock_packages, lock_bytes, target):
    by_key = {}
    for package in metadata["packages"]:
        by_key[lock_key(package["name"], package["version"], metadata_source(package))] = package
    roots = [p for p in metadata["packages"] if p["name"] == ROOT and p["source"] is None]
    if len(roots) != 1:
        sys.exit("sbom: cargo metadata has no workspace package `%s`" % ROOT)
    root = roots[0]
    role = roles(metadata, root["id"])

    # One bom-ref per locked package: name@version, with the source when
    # two sources pin the same name and version.
    counts = {}
    for package in lock_packages:
        counts[(package["name"], package["version"])] = counts.get((package["name"], package["version"]), 0) + 1
    components, ref_of, root_ref = [], {}, None
    for package in lock_packages:
        name, version, source = package["name"], package["version"], package.get("source", "")
        ref = "%s@%s" % (name, version)
        if counts[(name, version)] > 1:
            ref += "#" + (source or "workspace")
        meta = by_key.get(lock_key(name, version, source))
        if meta is not None:
            ref_of[meta["id"]] = ref
        if meta is not None and meta["id"] == root["id"]:
            root_ref = ref
        if meta is None:
            kind = "other-platform"
        else:
            kind = role.get(meta["id"], "dev")
        component = {
            "type": "application" if meta is not None and meta["id"] == root["id"] else "library",
            "bom-ref": ref,
            "name": name,
            "version": version,
            "scope": "required" if kind == "runtime" else "excluded",
            "purl": purl(name, version, source),
        }
        if "checksum" in package:
            component["hashes"] = [{"alg": "SHA-256", "content": package["checksum"]}]
        if meta is not None and meta.get("license"):
            component["licenses"] = [{"expression": meta["license"]}]
        if meta is not None and meta.get("description"):
            component["description"] = " ".join(meta["description"].split())
        if source == CRATES_IO:
            component["externalReferences"] = [
                {"type": "distribution", "url": "https://crates.io/api/v1/crates/%s/%s/download" % (name, version)}
            ]
        elif source.startswith("git+"):
            component["externalReferences"] = [{"type": "vcs", "url": source[4:]}]
        properties = [{"name": "cargo:role", "value": kind}]
        properties.append({"name": "cargo:source", "value": source or "workspace"})
        component["properties"] = properties
        components.append(component)
    if root_ref is None:
        sys.exit("sbom: Cargo.lock does not pin `%s` (is it the workspace's lock?)" % ROOT)

    reached = {package_id for package_id in role if package_id in ref_of}
    serial = uuid.uuid5(uuid.NAMESPACE_URL, "switchyard-sbom:" + hashlib.sha256(lock_bytes).hexdigest())
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else datetime.datetime.now(
        datetime.timezone.utc
    )
    root_component = next(c for c in components if c["bom-ref"] == root_ref)
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": "urn:uuid:%s" % serial,
        "version": 1,
        "metadata": {
            "timestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "switchyard scripts/sbom.py", "version": "1"}]},
            "component": {k: v for k, v in root_component.items() if k not in ("scope", "properties")},
            "properties": [
                {"name": "cargo:target", "value": target},
                {"name": "cargo:profile", "value": "release"},
                {"name": "cargo:lock-sha256", "value": hashlib.sha256(lock_bytes).hexdigest()},
            ],
        },
        "components": [c for c in components if c["bom-ref"] != root_ref],
        "dependencies": graph(metadata, reached, ref_of),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metadata", required=True, help="cargo metadata --format-version 1 --filter-platform TARGET")
    ap.add_argument("--lock", required=True, help="the workspace's Cargo.lock")
    ap.add_argument("--target", required=True, help="the platform the metadata was filtered for")
    ap.add_argument("--out", help="where to write (default: stdout)")
    opts = ap.parse_args()
    with open(opts.metadata, encoding="utf-8") as f:
        metadata = json.load(f)
    with open(opts.lock, "rb") as f:
        lock_bytes = f.read()
    bom = build_bom(metadata, read_lock(opts.lock), lock_bytes, opts.target)
    text = json.dumps(bom, indent=2, sort_keys=False) + "\n"
    if opts.out:
        with open(opts.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
