//! The deployment as far as a machine without a cluster can check it
//! (no helm, no API server): every plain manifest in `deploy/k8s/` is
//! YAML of Kubernetes objects; the gateway config in each manifest's
//! ConfigMap and in each of the Helm chart's value sets passes `switchyard
//! check` with the variables it names set to dummies (the mechanism the
//! book's YAML blocks use), and each variable is one the pod's environment
//! sets; the manifests are the chart's value sets written out (same config,
//! same Secrets, same drain); every probe names a route the data listener
//! answers (asked of the real binary); the chart's templates read only
//! values `values.yaml` defines. And the SBOM script lists every crate
//! Cargo.lock pins, with its version and checksum.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{check, free_port, http, root, sample_value, variables};
use serde_yaml_ng::Value;

const MODES: [&str; 2] = ["single", "fleet"];

fn chart() -> PathBuf {
    root().join("deploy/helm/switchyard")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every object of a mode's plain manifests, by file.
fn manifests(mode: &str) -> Vec<(String, Value)> {
    let mut objects = Vec::new();
    for path in yaml_files(&root().join("deploy/k8s").join(mode)) {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = format!("deploy/k8s/{mode}/{}", path.file_name().unwrap().to_string_lossy());
        // Documents apart at their `---` lines.
        let mut documents = vec![String::new()];
        for line in text.lines() {
            if line.trim_end() == "---" {
                documents.push(String::new());
            } else if let Some(document) = documents.last_mut() {
                document.push_str(line);
                document.push('\n');
            }
        }
        for document in documents {
            let value: Value =
                serde_yaml_ng::from_str(&document).unwrap_or_else(|err| panic!("{name} is not YAML: {err}"));
            if !value.is_null() {
                objects.push((name.clone(), value));
            }
        }
    }
    objects
}

fn object<'a>(objects: &'a [(String, Value)], kind: &str) -> &'a Value {
    let found: Vec<_> = objects.iter().filter(|(_, o)| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in the manifests");
    &found[0].1
}

/// A value set of the chart: `values.yaml` with `values-<mode>.yaml` over
/// it (top-level keys replaced, maps merged one level down: enough for the
/// keys the value sets set), as helm merges them.
fn values(mode: Option<&str>) -> Value {
    let read = |name: &str| -> Value {
        serde_yaml_ng::from_str(&std::fs::read_to_string(chart().join(name)).unwrap())
            .unwrap_or_else(|err| panic!("{name} is not YAML: {err}"))
    };
    let mut merged = read("values.yaml");
    if let Some(mode) = mode {
        let over = read(&format!("values-{mode}.yaml"));
        for (key, value) in over.as_mapping().unwrap() {
            match (merged.get_mut(key), value) {
                (Some(Value::Mapping(base)), Value::Mapping(more)) => {
                    for (k, v) in more {
                        base.insert(k.clone(), v.clone());
                    }
                }
                _ => {
                    merged.as_mapping_mut().unwrap().insert(key.clone(), value.clone());
                }
            }
        }
    }
    merged
}

/// Seconds of a config duration as the book writes them (`30s`, `2m`).
fn seconds(text: &str) -> u64 {
    if let Some(n) = text.strip_suffix("ms") {
        return n.parse::<u64>().unwrap() / 1000;
    }
    let (n, unit) = text.split_at(text.len() - 1);
    n.parse::<u64>().unwrap() * if unit == "m" { 60 } else { 1 }
}

/// What a deployment gives the gateway: its config's text, the
/// environment the pod sets (name → a value: the literal one, or a dummy
/// for a Secret's), the data port and the drain's numbers.
struct Deployed {
    name: String,
    config: String,
    env: BTreeMap<String, String>,
    secrets: BTreeSet<(String, String, String)>,
    port: u64,
    pre_stop: u64,
    grace: u64,
    probes: Vec<(String, String)>,
}

fn from_manifests(mode: &str) -> Deployed {
    let objects = manifests(mode);
    let config = object(&objects, "ConfigMap")["data"]["switchyard.yaml"].as_str().unwrap().to_owned();
    let pod = &object(&objects, "Deployment")["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let (mut env, mut secrets) = (BTreeMap::new(), BTreeSet::new());
    for var in container["env"].as_sequence().unwrap() {
        let name = var["name"].as_str().unwrap().to_owned();
        if let Some(secret) = var["valueFrom"]["secretKeyRef"].as_mapping() {
            let (secret_name, key) = (secret["name"].as_str().unwrap(), secret["key"].as_str().unwrap());
            secrets.insert((name.clone(), secret_name.to_owned(), key.to_owned()));
            env.insert(name.clone(), sample_value(&name));
        } else if let Some(value) = var["value"].as_str() {
            env.insert(name, value.to_owned());
        } else {
            env.insert(name.clone(), format!("{}-from-the-downward-api", name.to_lowercase()));
        }
    }
    let http = container["ports"].as_sequence().unwrap().iter().find(|p| p["name"] == "http").unwrap();
    let pre_stop = container["lifecycle"]["preStop"]["exec"]["command"].as_sequence().unwrap();
    assert_eq!(pre_stop[0], "sleep", "preStop waits for endpoints to forget the pod");
    let probes = ["startupProbe", "livenessProbe", "readinessProbe"]
        .iter()
        .map(|probe| {
            let get = &container[*probe]["httpGet"];
            assert_eq!(get["port"], "http", "{mode}: {probe} reads the data listener");
            (probe.to_string(), get["path"].as_str().unwrap().to_owned())
        })
        .collect();
    Deployed {
        name: format!("deploy/k8s/{mode}"),
        config,
        env,
        secrets,
        port: http["containerPort"].as_u64().unwrap(),
        pre_stop: pre_stop[1].as_str().unwrap().parse().unwrap(),
        grace: pod["terminationGracePeriodSeconds"].as_u64().unwrap(),
        probes,
    }
}

fn from_values(mode: Option<&str>) -> Deployed {
    let values = values(mode);
    let (mut env, mut secrets) = (BTreeMap::new(), BTreeSet::new());
    for var in values["secretEnv"].as_sequence().unwrap() {
        let name = var["name"].as_str().unwrap().to_owned();
        let (secret, key) = (var["secret"].as_str().unwrap(), var["key"].as_str().unwrap());
        secrets.insert((name.clone(), secret.to_owned(), key.to_owned()));
        env.insert(name.clone(), sample_value(&name));
    }
    for var in values["env"].as_sequence().unwrap() {
        let name = var["name"].as_str().unwrap().to_owned();
        let value = var["value"]
            .as_str()
            .map_or_else(|| format!("{}-from-the-downward-api", name.to_lowercase()), str::to_owned);
        env.insert(name, value);
    }
    let drain = &values["drain"];
    let number = |v: &Value| v.as_u64().unwrap();
    // The template's probes: read from its text (paths are not values).
    let template = std::fs::read_to_string(chart().join("templates/deployment.yaml")).unwrap();
    let probes = ["startupProbe", "livenessProbe", "readinessProbe"]
        .iter()
        .map(|probe| {
            let at = template.find(&format!("{probe}:")).unwrap_or_else(|| panic!("the chart has no {probe}"));
            let block = &template[at..];
            let path = block.split("path: ").nth(1).unwrap().lines().next().unwrap().trim().to_owned();
            let port = block.split("port: ").nth(1).unwrap().lines().next().unwrap().trim().to_owned();
            assert_eq!(port, "http", "the chart's {probe} reads the data listener");
            (probe.to_string(), path)
        })
        .collect();
    Deployed {
        name: format!(
            "deploy/helm/switchyard with {}",
            mode.map_or("values.yaml".into(), |m| format!("values-{m}.yaml"))
        ),
        config: values["config"].as_str().unwrap().to_owned(),
        env,
        secrets,
        port: number(&values["containerPort"]),
        pre_stop: number(&drain["preStopSeconds"]),
        grace: number(&drain["preStopSeconds"]) + number(&drain["timeoutSeconds"]) + number(&drain["flushSeconds"]),
        probes,
    }
}

fn deployments() -> Vec<Deployed> {
    let mut all = vec![from_values(None)];
    for mode in MODES {
        all.push(from_values(Some(mode)));
        all.push(from_manifests(mode));
    }
    all
}

#[test]
fn every_plain_manifest_is_yaml_of_kubernetes_objects_and_the_chart_parses() {
    let mut kinds = BTreeSet::new();
    for mode in MODES {
        let objects = manifests(mode);
        assert!(objects.len() >= 4, "{mode}: {} objects", objects.len());
        for (file, object) in &objects {
            for field in ["apiVersion", "kind"] {
                assert!(object[field].is_string(), "{file}: no {field}");
            }
            assert!(object["metadata"]["name"].is_string(), "{file}: no metadata.name");
            kinds.insert(format!("{mode}/{}", object["kind"].as_str().unwrap()));
        }
    }
    for needed in ["single/PersistentVolumeClaim", "fleet/PodDisruptionBudget", "single/Service", "fleet/Service"] {
        assert!(kinds.contains(needed), "{needed} missing: {kinds:?}");
    }
    let chart_yaml: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap()).unwrap();
    assert_eq!(chart_yaml["apiVersion"], "v2");
    assert_eq!(chart_yaml["appVersion"], env!("CARGO_PKG_VERSION"), "the chart deploys this version");
    for mode in [None, Some("single"), Some("fleet")] {
        values(mode);
    }
}

#[test]
fn every_deployed_config_passes_check_with_the_environment_its_pod_sets() {
    let all = deployments();
    assert_eq!(all.len(), 5);
    for deployed in &all {
        let name = &deployed.name;
        // Plain YAML to editors and linters, and every `${VAR}` one the pod sets.
        let config: Value =
            serde_yaml_ng::from_str(&deployed.config).unwrap_or_else(|err| panic!("{name}: config is not YAML: {err}"));
        for var in variables(&deployed.config) {
            assert!(deployed.env.contains_key(&var), "{name}: the config reads ${{{var}}}, which the pod does not set");
        }
        let env: Vec<(&str, &str)> = deployed.env.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let (ok, output) = check(&deployed.config, &env);
        assert!(ok, "{name}: its config fails `switchyard check`:\n{output}\n{}", deployed.config);
        // The data listener on the pod IP at the container's port; the
        // admin listener on loopback (the contract).
        let listen = config["listen"].as_str().unwrap();
        assert_eq!(listen, format!("0.0.0.0:{}", deployed.port), "{name}: listen");
        assert!(
            config["admin_listen"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{name}: admin_listen off loopback"
        );
        // The drain: preStop, then the gateway's own drain, then its flushes, within the grace period.
        let drain = config["server"]["drain_timeout"].as_str().map_or(30, seconds);
        assert!(
            deployed.pre_stop >= 3 && deployed.grace >= deployed.pre_stop + drain + 10,
            "{name}: grace {}s does not cover preStop {}s + drain_timeout {drain}s + 10s of flushes",
            deployed.grace,
            deployed.pre_stop
        );
        // A store on disk is on the writable volume.
        if let Some(path) = config["storage"]["sqlite_path"].as_str() {
            assert!(path.starts_with("/var/lib/switchyard/"), "{name}: sqlite_path {path} is not on the data volume");
        }
        if let Some(path) = config["storage"]["ledger_spool"].as_str() {
            assert!(path.starts_with("/var/lib/switchyard/"), "{name}: ledger_spool {path} is not on the data volume");
        }
    }
    // The drain the chart's values name is the config's.
    for mode in [None, Some("single"), Some("fleet")] {
        let values = values(mode);
        let config: Value = serde_yaml_ng::from_str(values["config"].as_str().unwrap()).unwrap();
        let drain = config["server"]["drain_timeout"].as_str().map_or(30, seconds);
        assert_eq!(values["drain"]["timeoutSeconds"].as_u64(), Some(drain), "{mode:?}: drain.timeoutSeconds");
    }
}

#[test]
fn the_plain_manifests_are_the_charts_value_sets_written_out() {
    for mode in MODES {
        let (plain, chart) = (from_manifests(mode), from_values(Some(mode)));
        let parse = |text: &str| serde_yaml_ng::from_str::<Value>(text).unwrap();
        assert_eq!(parse(&plain.config), parse(&chart.config), "{mode}: the manifests' config is the value set's");
        assert_eq!(plain.secrets, chart.secrets, "{mode}: the same Secrets");
        assert_eq!(plain.env.keys().collect::<Vec<_>>(), chart.env.keys().collect::<Vec<_>>(), "{mode}: the same env");
        assert_eq!(
            (plain.pre_stop, plain.grace, plain.port),
            (chart.pre_stop, chart.grace, chart.port),
            "{mode}: drain and port"
        );
        assert_eq!(plain.probes, chart.probes, "{mode}: the same probes");
        let values = values(Some(mode));
        let objects = manifests(mode);
        let deployment = object(&objects, "Deployment");
        assert_eq!(deployment["spec"]["replicas"], values["replicaCount"], "{mode}: replicas");
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"], values["podSecurityContext"], "{mode}: the pod's security context");
        assert_eq!(pod["containers"][0]["securityContext"], values["securityContext"], "{mode}: the container's");
        assert_eq!(pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"], true);
        let pvc = objects.iter().any(|(_, o)| o["kind"] == "PersistentVolumeClaim");
        assert_eq!(Some(pvc), values["persistence"]["enabled"].as_bool(), "{mode}: a volume claim");
        let pdb = objects.iter().any(|(_, o)| o["kind"] == "PodDisruptionBudget");
        assert_eq!(Some(pdb), values["podDisruptionBudget"]["enabled"].as_bool(), "{mode}: a disruption budget");
        // The Service carries the data port alone.
        let ports = object(&objects, "Service")["spec"]["ports"].as_sequence().unwrap().clone();
        assert_eq!(ports.len(), 1, "{mode}: the admin listener is not on the Service");
        assert_eq!(ports[0]["targetPort"], "http");
    }
}

/// Every `.Values.a.b` a template reads.
fn values_read(text: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(".Values.") {
        let after = &rest[at + ".Values.".len()..];
        let end = after.find(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_')).unwrap_or(after.len());
        paths.insert(after[..end].trim_end_matches('.').to_owned());
        rest = &after[end..];
    }
    paths
}

#[test]
fn the_charts_templates_read_only_values_that_values_yaml_defines() {
    let defaults = values(None);
    let mut read = BTreeSet::new();
    for entry in std::fs::read_dir(chart().join("templates")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // Balanced actions: every `{{` closes.
        assert_eq!(text.matches("{{").count(), text.matches("}}").count(), "{}: unbalanced actions", path.display());
        read.extend(values_read(&text));
    }
    assert!(read.len() >= 30, "{read:?}");
    for path in &read {
        let mut at = &defaults;
        for part in path.split('.') {
            at = at
                .get(part)
                .unwrap_or_else(|| panic!("templates read .Values.{path}, which values.yaml does not define"));
        }
    }
    for mode in MODES {
        let over: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(chart().join(format!("values-{mode}.yaml"))).unwrap())
                .unwrap();
        for key in over.as_mapping().unwrap().keys() {
            assert!(defaults.get(key).is_some(), "values-{mode}.yaml sets {key:?}, which values.yaml does not have");
        }
    }
}

#[test]
fn every_probe_names_a_route_the_data_listener_answers() {
    let mut paths = BTreeSet::new();
    for deployed in deployments() {
        for (probe, path) in &deployed.probes {
            let expected = if probe == "readinessProbe" { "/readyz" } else { "/healthz" };
            assert_eq!(path, expected, "{}: {probe}", deployed.name);
            paths.insert(path.clone());
        }
    }
    // In the data listener's route table...
    let server = std::fs::read_to_string(root().join("crates/gateway/src/server.rs")).unwrap();
    let data_router = &server[server.find("pub fn router(").unwrap()..server.find("fn ingress_routes(").unwrap()];
    for path in &paths {
        assert!(data_router.contains(&format!(".route(\"{path}\"")), "{path} is not a route of the data router");
    }
    // ...and answered by the binary on it (the embedded demo config).
    let dir = std::env::temp_dir().join(format!("switchyard-deploy-probes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--listen", &data.to_string(), "--admin-listen", &admin.to_string()])
        .current_dir(&dir)
        .env_remove("SWITCHYARD_CONFIG")
        .env("SWITCHYARD_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answers = BTreeMap::new();
    while answers.len() < paths.len() && Instant::now() < deadline {
        for path in &paths {
            if http(data, "GET", path, &[], "").0 == 200 {
                answers.insert(path.clone(), ());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The admin listener's /metrics (a scraper's target) exists and wants a token.
    let metrics = http(admin, "GET", "/metrics", &[], "").0;
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_dir_all(&dir).ok();
    for path in &paths {
        assert!(answers.contains_key(path), "GET {path} on the data listener never answered 200");
    }
    assert_eq!(metrics, 401, "/metrics on the admin listener");
}

#[test]
fn the_sbom_lists_every_crate_cargo_lock_pins_with_version_and_checksum() {
    let out = std::env::temp_dir().join(format!("switchyard-sbom-{}.cdx.json", std::process::id()));
    let run = Command::new("bash")
        .arg(root().join("scripts/sbom.sh"))
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1765000000")
        .output()
        .unwrap();
    assert!(run.status.success(), "scripts/sbom.sh failed:\n{}", String::from_utf8_lossy(&run.stderr));
    let bom: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    std::fs::remove_file(&out).ok();
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    assert_eq!(bom["metadata"]["component"]["name"], "switchyard");
    let mut listed: BTreeMap<(String, String), &serde_json::Value> = BTreeMap::new();
    for component in bom["components"].as_array().unwrap().iter().chain([&bom["metadata"]["component"]]) {
        let key = (component["name"].as_str().unwrap().to_owned(), component["version"].as_str().unwrap().to_owned());
        assert!(listed.insert(key.clone(), component).is_none(), "{key:?} listed twice");
    }
    // Cargo.lock, read here without the script's parser.
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let mut pinned = 0;
    for block in lock.split("[[package]]").skip(1) {
        let field = |name: &str| {
            block
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name} = \""))?.strip_suffix('"').map(str::to_owned))
        };
        let (name, version) = (field("name").unwrap(), field("version").unwrap());
        let component = listed
            .get(&(name.clone(), version.clone()))
            .unwrap_or_else(|| panic!("the SBOM does not list {name} {version}"));
        match field("checksum") {
            Some(checksum) => {
                assert_eq!(component["hashes"][0]["alg"], "SHA-256", "{name} {version}");
                assert_eq!(component["hashes"][0]["content"], checksum.as_str(), "{name} {version}: checksum");
                assert_eq!(component["purl"], format!("pkg:cargo/{name}@{version}"), "{name}");
            }
            None => assert!(component.get("hashes").is_none(), "{name}: a workspace crate has no registry checksum"),
        }
        pinned += 1;
    }
    assert_eq!(listed.len(), pinned, "the SBOM lists exactly what Cargo.lock pins");
    assert!(pinned > 200, "{pinned} packages in Cargo.lock");
    // What the release binary links, and what it does not.
    let role = |name: &str| {
        let component = listed.iter().find(|((n, _), _)| n == name).unwrap_or_else(|| panic!("{name} not listed")).1;
        let role = component["properties"].as_array().unwrap().iter().find(|p| p["name"] == "cargo:role").unwrap();
        (role["value"].as_str().unwrap().to_owned(), component["scope"].as_str().unwrap_or("").to_owned())
    };
    for linked in ["tokio", "hyper", "rusqlite", "switchyard-gateway"] {
        assert_eq!(role(linked), ("runtime".into(), "required".into()), "{linked}");
    }
    assert_eq!(role("serde_derive").0, "build", "a proc macro runs at build time only");
    assert_eq!(role("proptest").0, "dev", "a test-only crate");
    // The build's graph starts at the binary.
    let root_ref = bom["metadata"]["component"]["bom-ref"].as_str().unwrap();
    let edges = bom["dependencies"].as_array().unwrap();
    let from_root = edges.iter().find(|edge| edge["ref"] == root_ref).unwrap();
    assert!(from_root["dependsOn"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d.as_str().unwrap().starts_with("switchyard-gateway@")));
}

#[test]
fn the_deploy_pages_other_yaml_parses_and_its_chart_values_exist() {
    let page = std::fs::read_to_string(root().join("docs/deploy.md")).unwrap();
    let defaults = values(None);
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in page.lines() {
        match &mut open {
            None if line.trim_end() == "```yml" => open = Some(String::new()),
            Some(_) if line.starts_with("```") => blocks.extend(open.take()),
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    assert!(blocks.len() >= 2, "the page's values and scrape job");
    let mut chart_blocks = 0;
    for block in &blocks {
        let value: Value = serde_yaml_ng::from_str(block).unwrap_or_else(|err| panic!("not YAML: {err}\n{block}"));
        if !value.as_mapping().unwrap().keys().all(|key| defaults.get(key).is_some()) {
            continue;
        }
        // Chart values: each key the chart has, as deep as its defaults go.
        chart_blocks += 1;
        fn walk(given: &Value, defaults: &Value, path: &str) {
            let (Some(given), Some(known)) = (given.as_mapping(), defaults.as_mapping()) else { return };
            if known.is_empty() {
                return;
            }
            for (key, value) in given {
                let path = format!("{path}.{}", key.as_str().unwrap());
                let default = known
                    .get(key)
                    .unwrap_or_else(|| panic!("docs/deploy.md sets {path}, which the chart does not have"));
                walk(value, default, &path);
            }
        }
        walk(&value, &defaults, "");
    }
    assert!(chart_blocks >= 1, "the page shows chart values");
}
