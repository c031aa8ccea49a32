//! Repository hygiene: every Rust source file opens with a `//!` line saying
//! what it owns.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "corpus" || name == "artifacts" {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_source_file_says_what_it_owns() {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    rust_files(&root.join("fuzz/fuzz_targets"), &mut files);
    assert!(files.len() > 50, "found only {} files under {}", files.len(), root.display());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| std::fs::read_to_string(path).map_or(true, |text| !text.starts_with("//!")))
        .map(|path| path.display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a leading `//!` doc line: {missing:#?}");
}

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's crates: each folder of `crates/` with a manifest.
fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.join("Cargo.toml").is_file()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn dir_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[test]
fn the_map_names_every_crate() {
    let root = root();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    let headings: Vec<&str> = map.lines().filter(|l| l.starts_with("### ")).collect();
    let dirs = crate_dirs(&root);
    assert!(dirs.len() > 20, "found only {} crates", dirs.len());
    let missing: Vec<String> = dirs
        .iter()
        .map(|d| dir_name(d))
        .filter(|name| {
            let own = format!("`{name}`");
            let family = name.starts_with("protocol-") && headings.iter().any(|h| h.contains("`protocol-<name>`"));
            !family && !headings.iter().any(|h| h.contains(&own))
        })
        .collect();
    assert!(missing.is_empty(), "crates with no section of ARCHITECTURE.md's code map: {missing:?}");
}

/// The spans between backticks of `text`'s prose (fenced blocks skipped).
fn backticked(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        spans.extend(line.split('`').skip(1).step_by(2));
    }
    spans
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `word` stands in `text` as a whole identifier.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = text[at + word.len()..].chars().next().is_none_or(|c| !is_ident(c));
        before && after
    })
}

/// The file of module `name` inside the module whose files sit in `dir`.
fn module_file(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")].into_iter().find(|p| p.is_file())
}

/// Why `path` (`engine::filter::build`) names nothing, if it does not.
/// Each segment is a module while a file of that name exists; the first
/// that is not must be a name its module's file mentions (an item, a
/// re-export, an inline module). What follows an item (a method, a
/// field) is not checked.
fn stale_rust_path(crates: &[(String, PathBuf)], path: &str) -> Option<String> {
    let mut segments = path.split("::");
    let first = segments.next()?;
    let (_, dir) = crates.iter().find(|(name, _)| name == first)?;
    let src = dir.join("src");
    let mut file = [src.join("lib.rs"), src.join("main.rs")].into_iter().find(|p| p.is_file())?;
    let mut module_dir = src;
    for segment in segments {
        if segment.is_empty() || !segment.chars().all(is_ident) {
            return None;
        }
        if let Some(next) = module_file(&module_dir, segment) {
            module_dir = if next.ends_with("mod.rs") {
                next.parent().map(Path::to_path_buf).unwrap_or_default()
            } else {
                next.with_extension("")
            };
            file = next;
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        return (!has_word(&text, segment)).then(|| format!("`{path}`: no `{segment}` in {}", file.display()));
    }
    None
}

/// Where the files a document names sit (`crates/engine/src/exchange.rs`).
const FILE_PREFIXES: [&str; 8] = ["crates/", "docs/", "scripts/", "bench/", "deploy/", "examples/", "fuzz/", "tests/"];

fn stale_file_path(root: &Path, crate_dir: Option<&Path>, crates: &[(String, PathBuf)], span: &str) -> Option<String> {
    // What an install or a build makes is not in a fresh clone.
    let made = span.contains("node_modules") || span.contains("target/");
    if made || !FILE_PREFIXES.iter().any(|p| span.starts_with(p)) || span.contains(['*', '{', '<', ' ', '$']) {
        return None;
    }
    let path = span.split(['#', ':']).next().unwrap_or(span);
    let exists = root.join(path).exists()
        || crate_dir.is_some_and(|d| d.join(path).exists())
        || (path.starts_with("tests/") && crates.iter().any(|(_, d)| d.join(path).exists()));
    (!exists).then(|| format!("`{span}`: no such file"))
}

#[test]
fn every_module_and_file_a_document_names_exists() {
    let root = root();
    let mut crates = Vec::new();
    for dir in crate_dirs(&root) {
        let name = dir_name(&dir).replace('-', "_");
        if name != "switchyard" {
            crates.push((format!("switchyard_{name}"), dir.clone()));
        }
        crates.push((name, dir));
    }
    // The documents: the front door, the map and the book, then every
    // source file's `//!` lines.
    let mut documents: Vec<(PathBuf, Option<PathBuf>, String)> = Vec::new();
    let mut pages = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    if let Ok(entries) = std::fs::read_dir(root.join("docs")) {
        pages.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "md")));
    }
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap_or_default();
        documents.push((page, None, text));
    }
    for (_, dir) in crates.iter().filter(|(name, _)| !name.starts_with("switchyard_") || name == "switchyard") {
        let mut files = Vec::new();
        rust_files(dir, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let doc: String =
                text.lines().filter_map(|l| l.trim_start().strip_prefix("//!")).collect::<Vec<_>>().join("\n");
            documents.push((file, Some(dir.clone()), doc));
        }
    }
    assert!(documents.len() > 100, "found only {} documents", documents.len());
    let mut stale = Vec::new();
    let mut checked = 0;
    for (document, crate_dir, text) in &documents {
        for span in backticked(text) {
            let span = span.trim_end_matches("()");
            checked += usize::from(span.contains("::") || FILE_PREFIXES.iter().any(|p| span.starts_with(p)));
            let found = if span.contains("::") {
                stale_rust_path(&crates, span)
            } else {
                stale_file_path(&root, crate_dir.as_deref(), &crates, span)
            };
            if let Some(why) = found {
                stale.push(format!("{}: {why}", document.strip_prefix(&root).unwrap_or(document).display()));
            }
        }
    }
    assert!(checked > 300, "checked only {checked} names: is the scan reading the documents?");
    assert!(stale.is_empty(), "documents naming what no longer exists ({}):\n{}", stale.len(), stale.join("\n"));
}
