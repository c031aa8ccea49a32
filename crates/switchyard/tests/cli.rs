//! The command line as users meet it: `switchyard check` on good and bad
//! configs (exit codes, messages that name the key and the fix), and the
//! contract's example config.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a failed unwrap is a failed test")]

mod common;

use std::process::Command;

use common::{check, sample_value, variables};

/// The example of the external contract, as users copy it.
const CONTRACT_EXAMPLE: &str = r#"
listen: 127.0.0.1:8080
admin_listen: 127.0.0.1:8081
providers:
  openai:
    protocol: openai
    base_url: https://api.openai.com
    api_key: ${OPENAI_API_KEY}
  claude:
    protocol: anthropic
    base_url: https://api.anthropic.com
    api_key: ${ANTHROPIC_API_KEY}
  aws:
    protocol: bedrock
    base_url: https://bedrock-runtime.us-east-1.amazonaws.com
    aws: { access_key_id: ${AWS_ACCESS_KEY_ID}, secret_access_key: ${AWS_SECRET_ACCESS_KEY} }
  demo:
    protocol: openai
    base_url: mock://
models:
  gpt-4o-mini:
    provider: openai
    model: gpt-4o-mini
    context_window: 128000
    max_concurrent: 256
    billing: pay_as_you_go
    tier: small
    tags: [us]
  claude-sonnet: { provider: claude, model: claude-sonnet-4-5 }
  backup-model: { provider: demo }
rate_card:
  gpt-4o-mini: { input_utok: 0.15, output_utok: 0.6, cache_read_utok: 0.075 }
pools:
  fast:
    hooks: [cheapest]
    failover: { max_hops: 3, timeout: 60s }
    fallback: [backup]
    members:
      - { model: gpt-4o-mini, weight: 3 }
      - { model: claude-sonnet, weight: 1 }
  backup:
    members: [{ model: backup-model }]
"#;

#[test]
fn the_contract_example_checks_once_its_variables_are_set() {
    let env = [
        ("OPENAI_API_KEY", "sk-x"),
        ("ANTHROPIC_API_KEY", "sk-y"),
        ("AWS_ACCESS_KEY_ID", "AKIA"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
    ];
    let (ok, stderr) = check(CONTRACT_EXAMPLE, &env);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("ok (4 providers, 3 models, 2 pools)"), "{stderr}");
    let (ok, stderr) = check(CONTRACT_EXAMPLE, &env[1..]);
    assert!(!ok);
    assert!(stderr.contains("OPENAI_API_KEY") && stderr.contains("fix:"), "{stderr}");
}

#[test]
fn a_bad_config_exits_1_naming_every_problem() {
    let (ok, stderr) =
        check("providers:\n  p: { protocol: grpc, base_url: \"mock://\" }\nmodels:\n  m: { provider: q }\n", &[]);
    assert!(!ok);
    assert!(stderr.contains("providers.p.protocol") && stderr.contains("models.m.provider"), "{stderr}");
    assert!(stderr.contains("2 problems"), "{stderr}");
}

/// Every YAML block of the README and the book (`docs/`), and every file
/// in `examples/`, by name. (Other programs' YAML in the book, Kubernetes
/// values and Prometheus jobs, is fenced as `yml`; `deploy.rs` parses it.)
fn documented_configs() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec!["README.md".to_owned()];
    let mut book: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    book.sort();
    pages.extend(book);
    let mut configs = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(root.join(&page)).unwrap();
        let mut block: Option<(usize, String)> = None;
        for (number, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_end() == "```yaml" => block = Some((number + 1, String::new())),
                Some((start, text)) if line.starts_with("```") => {
                    configs.push((format!("{page} block at line {start}"), std::mem::take(text)));
                    block = None;
                }
                Some((_, text)) => {
                    text.push_str(line);
                    text.push('\n');
                }
                None => {}
            }
        }
    }
    let mut examples: Vec<_> =
        std::fs::read_dir(root.join("examples")).unwrap().map(|entry| entry.unwrap().path()).collect();
    examples.sort();
    for path in examples.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let name = format!("examples/{}", path.file_name().unwrap().to_string_lossy());
        configs.push((name, std::fs::read_to_string(&path).unwrap()));
    }
    configs
}

#[test]
fn every_documented_config_is_yaml_and_passes_check() {
    let configs = documented_configs();
    assert!(configs.len() >= 12, "README blocks and examples found: {}", configs.len());
    for (name, yaml) in configs {
        // Plain YAML to editors and linters, not only to Switchyard.
        if let Err(err) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&yaml) {
            panic!("{name} is not standard YAML: {err}\n{yaml}");
        }
        let values: Vec<(String, String)> = variables(&yaml)
            .into_iter()
            .map(|var| {
                let value = sample_value(&var);
                (var, value)
            })
            .collect();
        let env: Vec<(&str, &str)> = values.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let (ok, output) = check(&yaml, &env);
        assert!(ok, "{name} fails `switchyard check`:\n{output}\n{yaml}");
    }
}

#[test]
fn the_compose_file_runs_the_checked_fleet_config_with_its_variables() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let compose: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(root.join("deploy/compose.yaml")).unwrap()).unwrap();
    let fleet = std::fs::read_to_string(root.join("examples/fleet.yaml")).unwrap();
    let services = compose["services"].as_mapping().unwrap();
    for name in ["postgres", "redis", "nginx"] {
        assert!(services.contains_key(name), "compose has no {name}");
    }
    let instances: Vec<_> =
        services.iter().filter(|(name, _)| name.as_str().unwrap().starts_with("switchyard-")).collect();
    assert_eq!(instances.len(), 2, "two instances");
    for (name, service) in instances {
        let mounted = service["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|v| v.as_str().unwrap().starts_with("../examples/fleet.yaml:/etc/switchyard/fleet.yaml"));
        assert!(mounted, "{name:?} mounts examples/fleet.yaml");
        let command: Vec<&str> =
            service["command"].as_sequence().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert_eq!(command, ["serve", "--config", "/etc/switchyard/fleet.yaml"]);
        for var in variables(&fleet) {
            assert!(service["environment"][var.as_str()].is_string(), "{name:?} sets {var}");
        }
    }
    let nginx = std::fs::read_to_string(root.join("deploy/nginx.conf")).unwrap();
    assert!(nginx.contains("server switchyard-1:8080") && nginx.contains("server switchyard-2:8080"));
}

/// The binary serving `yaml` with `args`, its stderr captured; killed after
/// `for_` (or when it exits by itself).
fn serve_for(yaml: &str, args: &[&str], for_: std::time::Duration, poke: impl FnOnce(u16)) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("switchyard-serve-{}-{}", std::process::id(), yaml.len() + args.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("switchyard.yaml");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(&path, format!("listen: 127.0.0.1:{port}\nadmin_listen: 127.0.0.1:{admin}\n{yaml}")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .args(args)
        .env("SWITCHYARD_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let mut poke = Some(poke);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            if let Some(poke) = poke.take() {
                poke(port);
            }
        }
        if started.elapsed() > for_ {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    (code, stderr)
}

#[test]
fn the_command_line_s_listeners_pass_the_boot_checks() {
    // Off loopback without mTLS is refused whether the file or the flag says it.
    let (code, stderr) = serve_for("", &["--admin-listen", "0.0.0.0:0"], std::time::Duration::from_secs(20), |_| {});
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("off loopback") && stderr.contains("admin.tls"), "{stderr}");
}

#[test]
fn a_webhook_that_fails_is_logged_by_its_host_alone() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let yaml = format!(
        "telemetry:\n  request_log:\n    webhook: {{ url: \"http://127.0.0.1:{closed}/services/T000/B000/XSECRETPATHX?token=QSECRETQ\", batch: 1, interval: 10ms }}\n"
    );
    // Three tries 1.4 s apart end in the log line; the window leaves room
    // for a loaded CI machine (8 s was once not enough there).
    let (_, stderr) = serve_for(&yaml, &[], std::time::Duration::from_secs(15), |port| {
        let body = r#"{"model":"demo-openai","messages":[{"role":"user","content":"hi"}]}"#;
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
        let _ = std::io::Read::read_to_end(&mut stream, &mut Vec::new());
    });
    assert!(stderr.contains("request-log webhook unreachable"), "{stderr}");
    assert!(!stderr.contains("XSECRETPATHX") && !stderr.contains("QSECRETQ"), "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{closed}")), "{stderr}");
}

#[test]
fn receipts_verify_checks_a_chain_offline_and_names_the_first_broken_link() {
    use switchyard_governance::receipt::{line, Head, Receipt, Signer, GENESIS, VERSION};
    let secret = "cli-receipts-secret-0123456789";
    let signer = Signer::from_secret(secret).unwrap();
    let mut prev = GENESIS.to_owned();
    let mut lines: Vec<String> = (1..=3)
        .map(|seq| {
            let receipt = Receipt {
                v: VERSION,
                chain: "gw-cli".into(),
                seq,
                prev: prev.clone(),
                at_ms: 1_765_000_000_000,
                entry: seq as i64,
                request_id: format!("req-{seq}"),
                pool: "chat".into(),
                lane: "a".into(),
                model: "gpt-4o".into(),
                upstream_model: None,
                upstream_id: None,
                tokens: switchyard_governance::money::Tokens {
                    input: 10,
                    output: 5,
                    requests: 1,
                    ..Default::default()
                },
                cost_nano: 75,
                status: 200,
                estimated: None,
            };
            let (text, hash) = line(&receipt);
            prev = hash;
            text
        })
        .collect();
    lines.push(signer.seal("gw-cli", &Head { seq: 3, hash: prev.clone() }));
    let dir = std::env::temp_dir().join(format!("switchyard-cli-receipts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let verify = |text: String, args: &[&str]| {
        let path = dir.join("chain.jsonl");
        std::fs::write(&path, text).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["receipts", "verify"])
            .arg(&path)
            .args(args)
            .env_remove("SWITCHYARD_RECEIPT_KEY")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.code(), text)
    };
    let (code, text) = verify(lines.join("\n"), &["--public-key", signer.public_key()]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("ok: 3 receipts of chain `gw-cli`, linked; sealed up to link 3"), "{text}");
    // The secret names the same key.
    let (code, text) = verify(lines.join("\n"), &["--key", secret]);
    assert_eq!(code, Some(0), "{text}");
    // Tokens changed on the second: exit 1, the line and link named.
    let tampered =
        [lines[0].clone(), lines[1].replace(r#""input":10"#, r#""input":1"#), lines[2].clone(), lines[3].clone()];
    let (code, text) = verify(tampered.join("\n"), &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("line 2 (link 2)") && text.contains("changed"), "{text}");
    // The second removed.
    let (code, text) = verify([lines[0].clone(), lines[2].clone(), lines[3].clone()].join("\n"), &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("link 2 should follow link 1 but link 3 does"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}
