//! The documentation as a newcomer meets it: every link of the README, the
//! architecture map and the book (`docs/`) leads to a file and, where it
//! names one, a heading of that file; and the README's "Your first config"
//! runs as written (its own shell blocks and its YAML, against the binary
//! and the vendor fake over TCP, on free ports) to a pool of two providers
//! with a key and a budget, answered and billed.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages whose links are checked, relative to the root.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    let mut book: Vec<_> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    book.sort();
    pages.extend(book);
    pages
}

/// Text outside fenced code blocks, line by line.
fn prose(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// A heading's anchor as GitHub makes it: lower case, punctuation but `-`
/// and `_` dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text).filter(|line| line.starts_with('#')).map(|line| slug(line.trim_start_matches('#'))).collect()
}

/// `[text](target)` links of a line (inline code excluded).
fn links(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let mut rest = outside_code.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                found.push(after[..end].to_owned());
                rest = &after[end..];
            }
            None => break,
        }
    }
    found
}

#[test]
fn every_link_of_the_readme_the_architecture_and_the_book_leads_somewhere() {
    let root = root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(root.join(&page)).unwrap();
        let dir = Path::new(&page).parent().unwrap_or(Path::new("")).to_owned();
        for (number, line) in text.lines().enumerate() {
            for target in links(line) {
                if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let path = if file.is_empty() { PathBuf::from(&page) } else { dir.join(file) };
                let Ok(linked) = std::fs::read_to_string(root.join(&path)) else {
                    if !root.join(&path).exists() {
                        broken.push(format!("{page}:{}: {target} (no such file)", number + 1));
                    }
                    continue;
                };
                if let Some(anchor) = anchor {
                    if !anchors(&linked).contains(anchor) {
                        broken.push(format!("{page}:{}: {target} (no such heading)", number + 1));
                    }
                }
            }
        }
    }
    assert!(checked >= 15, "only {checked} links found: is the book there?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_stays_a_front_door_and_maps_every_page_of_the_book() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 260, "README.md has {lines} lines: the detail belongs in docs/");
    for page in pages().into_iter().filter(|page| page.starts_with("docs/")) {
        assert!(readme.contains(&format!("]({page})")), "README's map of the book does not link {page}");
    }
    for command in ["cargo run --release -p switchyard", "./scripts/test.sh"] {
        assert!(readme.contains(command), "README does not show `{command}`");
    }
}

/// The fenced blocks of one README section, as (language, text).
fn section_blocks(readme: &str, heading: &str) -> Vec<(String, String)> {
    let start = readme.find(heading).expect("the README has its first-config section");
    let section = &readme[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in section.lines() {
        match &mut open {
            None if line.starts_with("```") => open = Some((line[3..].trim().to_owned(), String::new())),
            Some(_) if line.starts_with("```") => blocks.extend(open.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// Kills the walk's process group (the servers its shell left running).
struct Group(Option<std::process::Child>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let group = child.id();
            Command::new("kill").args(["-TERM", "--", &format!("-{group}")]).status().ok();
            child.kill().ok();
            child.wait().ok();
        }
    }
}

#[test]
fn the_readmes_first_config_runs_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let blocks = section_blocks(&readme, "## Your first config");
    let yaml: Vec<_> = blocks.iter().filter(|(lang, _)| lang == "yaml").collect();
    let shell: Vec<_> = blocks.iter().filter(|(lang, _)| lang == "sh").map(|(_, text)| text.as_str()).collect();
    assert_eq!(yaml.len(), 1, "one config in the section");
    assert!(shell.len() >= 2, "the fake's start and the walk");

    // The README's ports, moved to free ones so the test runs beside others.
    let ports = [
        ("8080", common::free_port().to_string()),
        ("8081", common::free_port().to_string()),
        ("9000", common::free_port().to_string()),
    ];
    let moved = |text: &str| {
        ports.iter().fold(text.to_owned(), |text, (from, to)| {
            text.replace(&format!("localhost:{from}"), &format!("localhost:{to}"))
                .replace(&format!("127.0.0.1:{from}"), &format!("127.0.0.1:{to}"))
        })
    };
    let dir = std::env::temp_dir().join(format!("switchyard-readme-walk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("first.yaml"), moved(&yaml[0].1)).unwrap();
    let mut script = String::from("set -euo pipefail\n");
    for block in &shell {
        script.push_str(&moved(block));
        script.push('\n');
    }
    // The test's own line after the README's: the admin token and the key
    // the walk made, for the checks below (the servers run on meanwhile).
    script.push_str("printf '%s\\n%s\\n' \"$SWITCHYARD_ADMIN_TOKEN\" \"$KEY\" > walk.secrets\n");

    let binary = Path::new(env!("CARGO_BIN_EXE_switchyard"));
    let path = format!("{}:{}", binary.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    // Output to files: the servers the walk leaves running keep writing.
    let out = dir.join("walk.out");
    let err = dir.join("walk.err");
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(&script)
        .current_dir(&dir)
        .env("PATH", path)
        .env_remove("SWITCHYARD_CONFIG")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut group = Group(Some(command.spawn().unwrap()));

    // The shell ends once its last curl has; its servers are the group's.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = group.0.as_mut().unwrap().try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let secrets = std::fs::read_to_string(dir.join("walk.secrets")).unwrap_or_default();
    let Some(status) = status else {
        panic!("the README's walk did not end in 60 s:\n{stdout}\n{stderr}");
    };
    assert!(status.success(), "the README's walk failed ({status}):\n{stdout}\n{stderr}");
    // The OpenAI caller's answer, then the Anthropic caller's, then the spend.
    assert!(stdout.contains("\"chat.completion\""), "no Chat Completions answer:\n{stdout}\n{stderr}");
    assert!(stdout.contains("\"type\":\"message\""), "no Messages answer:\n{stdout}\n{stderr}");
    assert!(stdout.contains("my-app"), "the spend report does not name the key:\n{stdout}");

    // What the walk left running, checked: the key and its budget, the
    // pool served by both providers, each request billed to the key.
    let mut lines = secrets.lines();
    let (token, key) = (lines.next().unwrap_or_default(), lines.next().unwrap_or_default());
    assert!(!token.is_empty() && key.starts_with("sy-"), "the walk made no key: {secrets:?}");
    let port = |from: &str| ports.iter().find(|(f, _)| *f == from).unwrap().1.parse::<u16>().unwrap();
    let (data, admin) = (
        std::net::SocketAddr::from(([127, 0, 0, 1], port("8080"))),
        std::net::SocketAddr::from(([127, 0, 0, 1], port("8081"))),
    );
    let bearer = format!("Bearer {token}");
    let read = |path: &str| {
        let (status, body) = common::http(admin, "GET", path, &[("authorization", &bearer)], "");
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    let keys = read("/api/v1/admin/keys");
    let mine = keys["data"].as_array().unwrap().iter().find(|k| k["name"] == "my-app").expect("my-app is a key");
    assert_eq!((mine["group"].as_str(), mine["pools"][0].as_str()), (Some("team"), Some("chat")), "{mine}");
    assert_eq!((mine["budget"]["usd"].as_f64(), mine["budget"]["window"].as_str()), (Some(1.0), Some("1d")), "{mine}");
    let team = read("/api/v1/admin/groups/team");
    assert_eq!(team["budget"]["usd"].as_f64(), Some(10.0), "{team}");
    // The pool weighs its lanes 3 to 1: four requests reach both providers.
    let mut providers = BTreeSet::new();
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"hello"}]}"#;
    for _ in 0..4 {
        let (status, head, reply) = common::exchange(
            data,
            "POST",
            "/v1/chat/completions",
            &[("authorization", &format!("Bearer {key}"))],
            body,
        );
        assert_eq!(status, 200, "{reply}");
        providers.insert(common::header(&head, "x-switchyard-provider").unwrap_or_default().to_owned());
    }
    assert_eq!(providers, BTreeSet::from(["anthropic".to_owned(), "openai".to_owned()]), "the pool's two providers");
    // Billed: the README's two requests and these four, each priced from the rate card.
    let deadline = Instant::now() + Duration::from_secs(10);
    let billed = loop {
        let spend = read("/api/v1/admin/spend?by=key");
        let line = spend["data"].as_array().unwrap().iter().find(|l| l["name"] == "my-app").cloned();
        if let Some(line) = line.filter(|l| l["requests"] == 6) {
            break line;
        }
        assert!(Instant::now() < deadline, "the key's six requests were not all billed: {spend}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(billed["usd"].as_f64().unwrap() > 0.0, "{billed}");
    drop(group);
    std::fs::remove_dir_all(&dir).ok();
}
