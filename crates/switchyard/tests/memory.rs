//! What callers keep never sits whole in the gateway's memory, measured on
//! the real binary over TCP (SQLite store): while a 120 MB file is
//! uploaded, a batch is made from it, a 120 MB Anthropic batch body is sent
//! and the file is read back, the process's peak resident set grows by far
//! less than what it was sent (the kernel's own high-water mark,
//! `VmHWM`, reset before each step).
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Child;
use std::time::Duration;

use common::{free_port, http, spawn_binary};

/// What each body sent holds.
const SENT: usize = 120 << 20;

/// The most the peak resident set may grow while one body is handled: a
/// fraction of it (what the form reader and the store's writes hold, the
/// allocator's slack), where a body read whole would add all of it.
const GROWTH: u64 = 40 << 20;

/// A kernel figure of the process's (`VmHWM`, `VmRSS`), in bytes.
fn status(child: &Child, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Resets the process's peak resident set to what it holds now (Linux's
/// `clear_refs` 5); whether it could.
fn reset_peak(child: &Child) -> bool {
    std::fs::write(format!("/proc/{}/clear_refs", child.id()), "5").is_ok()
}

/// Sends a request whose body is `head`, then `size` bytes made by `fill`
/// a MiB at a time (never held whole here either), then `tail`: the
/// answer's status and body.
fn streamed(
    addr: SocketAddr,
    path: &str,
    content_type: &str,
    head: &[u8],
    size: usize,
    fill: &mut dyn FnMut(&mut Vec<u8>, usize),
    tail: &[u8],
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
    let length = head.len() + size + tail.len();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(head).unwrap();
    let mut piece = Vec::with_capacity(1 << 20);
    let mut sent = 0;
    while sent < size {
        piece.clear();
        fill(&mut piece, 1 << 20);
        assert!(!piece.is_empty() && sent + piece.len() <= size);
        stream.write_all(&piece).unwrap();
        sent += piece.len();
    }
    stream.write_all(tail).unwrap();
    read_answer(stream)
}

fn read_answer(mut stream: TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// Batch lines of 100 KB each filling about [`SENT`]: OpenAI's JSONL
/// (`openai`) or the requests of Anthropic's array; their whole length, and
/// what writes them, as many whole lines at a time as fit.
fn lines(openai: bool) -> (usize, impl FnMut(&mut Vec<u8>, usize)) {
    let text = "x".repeat(100_000);
    let line = move |n: usize| {
        if openai {
            format!(
                "{{\"custom_id\":\"l{n:06}\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{{\"model\":\"nowhere\",\"messages\":[{{\"role\":\"user\",\"content\":\"{text}\"}}]}}}}\n"
            )
        } else {
            format!(
                "{}{{\"custom_id\":\"l{n:06}\",\"params\":{{\"model\":\"nowhere\",\"max_tokens\":8,\"messages\":[{{\"role\":\"user\",\"content\":\"{text}\"}}]}}}}",
                if n == 0 { ' ' } else { ',' }
            )
        }
    };
    let each = line(0).len();
    let count = SENT / each;
    let mut n = 0;
    let fill = move |out: &mut Vec<u8>, room: usize| {
        while n < count && out.len() + each <= room.max(each) {
            out.extend_from_slice(line(n).as_bytes());
            n += 1;
        }
    };
    (count * each, fill)
}

/// Runs `step` and returns how far the peak resident set rose above what
/// the process held before it.
fn growth(child: &Child, step: impl FnOnce()) -> u64 {
    std::thread::sleep(Duration::from_millis(1500));
    let before = status(child, "VmRSS:");
    let reset = reset_peak(child);
    let peak_before = status(child, "VmHWM:");
    step();
    let peak = status(child, "VmHWM:");
    // Without a reset, the peak may be an earlier one: measure from it.
    peak.saturating_sub(if reset { before } else { peak_before })
}

#[test]
fn an_upload_a_batch_and_a_download_never_hold_their_bodies_whole() {
    let dir = std::env::temp_dir().join(format!("switchyard-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        "listen: {data}\nadmin_listen: {admin}\nproviders:\n  up: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  m: {{ provider: up }}\nstorage: {{ sqlite_path: \"{}\" }}\n\
         server: {{ body_read_timeout: 5m }}\nbatches: {{ concurrency: 1 }}\n",
        dir.join("kept.db").display()
    );
    let path = dir.join("switchyard.yaml");
    std::fs::write(&path, config).unwrap();
    let mut child = spawn_binary(&path, data);

    // The file: a batch's input, checked line by line as it arrives.
    let boundary = "memoryboundary";
    let head = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{boundary}\r\n\
         content-disposition: form-data; name=\"file\"; filename=\"big.jsonl\"\r\ncontent-type: application/jsonl\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let form = format!("multipart/form-data; boundary={boundary}");
    let mut file = String::new();
    let upload = growth(&child, || {
        let (size, mut fill) = lines(true);
        let (status, body) = streamed(data, "/v1/files", &form, head.as_bytes(), size, &mut fill, tail.as_bytes());
        assert_eq!(status, 200, "{body}");
        file = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();
    });
    // The batch: its file read back chunk by chunk, its lines staged in parts.
    let batch = growth(&child, || {
        let create =
            format!(r#"{{"input_file_id":"{file}","endpoint":"/v1/chat/completions","completion_window":"24h"}}"#);
        let (status, body) = http(data, "POST", "/v1/batches", &[], &create);
        assert_eq!(status, 200, "{body}");
    });
    // Anthropic's shape: the body read request by request.
    let inline = growth(&child, || {
        let (size, mut fill) = lines(false);
        let head = b"{\"requests\":[";
        let (status, body) = streamed(data, "/v1/messages/batches", "application/json", head, size, &mut fill, b"]}");
        assert_eq!(status, 200, "{body}");
    });
    // The file read back: sent chunk by chunk.
    let download = growth(&child, || {
        let mut stream = TcpStream::connect(data).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        let request = format!("GET /v1/files/{file}/content HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut read = 0usize;
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            match stream.read(&mut buffer).unwrap() {
                0 => break,
                n => read += n,
            }
        }
        assert!(read > SENT - (1 << 20), "{read} bytes read back");
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let mib = |bytes: u64| bytes >> 20;
    let grew = [("upload", upload), ("batch from the file", batch), ("inline batch", inline), ("download", download)];
    eprintln!("peak growth per step, MiB (each body {} MiB): {:?}", SENT >> 20, grew.map(|(s, g)| (s, mib(g))));
    for (step, grown) in grew {
        assert!(grown < GROWTH, "the {step} grew the peak resident set by {} MiB of {} sent", mib(grown), SENT >> 20);
    }
}
