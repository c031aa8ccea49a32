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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
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
