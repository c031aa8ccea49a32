//! The receipt writer (`receipts:`): each settled request's receipt is
//! linked to the one before it and appended to this instance's chain file,
//! and the chain's head is sealed (signed) once a second while it grows,
//! on a thread of its own, off the request path. The request
//! path only offers a receipt to a bounded queue (full: dropped and
//! counted, never waited on: a receipt is proof, not money; the ledger
//! row is written either way).
//!
//! One chain per instance: a fleet's instances each keep their own file
//! under their own chain name (`receipts.chain`), and a chain continues
//! across restarts from its file's last line.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_governance::receipt::{write_line, Head, Receipt, Signer, VERSION};

/// What the receipt writer counts.
#[derive(Debug, Default)]
pub struct ReceiptStats {
    /// Receipts appended to the chain.
    pub written: AtomicU64,
    /// Receipts dropped: the queue was full.
    pub dropped: AtomicU64,
    /// Appends that failed (the file could not be written).
    pub errors: AtomicU64,
}

/// The sending side of the receipt writer.
#[derive(Clone)]
pub struct ReceiptQueue {
    tx: SyncSender<Receipt>,
    /// Counters.
    pub stats: Arc<ReceiptStats>,
    /// The signer's public key (hex), what a verifier trusts.
    pub public_key: Arc<str>,
    /// The chain file.
    pub path: Arc<Path>,
}

impl std::fmt::Debug for ReceiptQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptQueue").field("public_key", &self.public_key).field("path", &self.path).finish()
    }
}

/// Why the writer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    /// The chain file cannot be opened or read.
    #[error("receipts: {0}")]
    File(String),
}

impl ReceiptQueue {
    /// Opens (or creates) the chain file, continues its chain from its last
    /// line, and starts the writer.
    pub fn start(config: &switchyard_config::proof::Receipts, capacity: usize) -> Result<ReceiptQueue, ReceiptError> {
        let signer = Signer::from_secret(&config.key).ok_or_else(|| ReceiptError::File("no signing key".into()))?;
        let path = config.path.clone();
        let fail = |err: std::io::Error| ReceiptError::File(format!("{}: {err}", path.display()));
        let mut file = std::fs::OpenOptions::new().create(true).read(true).append(true).open(&path).map_err(fail)?;
        let last = last_line(&mut file).map_err(fail)?;
        let head = last.as_deref().and_then(Head::of_line).unwrap_or_else(Head::genesis);
        // A file that ends with a seal is sealed up to its head; one that
        // ends with receipts is sealed by the first batch written.
        let sealed = match last.as_deref().is_some_and(|l| l.starts_with(r#"{"seal""#)) {
            true => head.seq,
            false => 0,
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity.max(1));
        let stats = Arc::new(ReceiptStats::default());
        let public_key: Arc<str> = Arc::from(signer.public_key());
        tracing::info!(path = %path.display(), chain = %config.chain, link = head.seq, public_key = %public_key, "receipts: chain open");
        let writer = Writer {
            file,
            signer,
            chain: config.chain.clone(),
            head,
            sealed,
            stats: stats.clone(),
            path: path.clone(),
        };
        std::thread::Builder::new()
            .name("switchyard-receipts".into())
            .spawn(move || writer.run(rx))
            .map_err(|err| ReceiptError::File(err.to_string()))?;
        Ok(ReceiptQueue { tx, stats, public_key, path: Arc::from(path.as_path()) })
    }

    /// Offers a settled request's receipt (its chain, place and link are
    /// the writer's to fill).
    pub fn push(&self, receipt: Receipt) {
        match self.tx.try_send(receipt) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A receipt of `row` (chain, place and link blank). Its cost is the
    /// row's own settled cost, so a receipt never states another figure
    /// than the ledger (a broken answer's row prices its tokens, not the
    /// reservation its budget keeps).
    pub fn draft(
        row: &switchyard_store::LedgerRow,
        upstream_model: Option<String>,
        upstream_id: Option<String>,
    ) -> Receipt {
        Receipt {
            v: VERSION,
            chain: String::new(),
            seq: 0,
            prev: String::new(),
            at_ms: row.at_ms,
            entry: row.entry,
            request_id: row.request_id.clone(),
            pool: row.pool.clone(),
            lane: row.lane.clone(),
            model: row.model.clone(),
            upstream_model,
            upstream_id,
            tokens: row.tokens,
            cost_nano: row.charge.map_or(0, |charge| charge.cost_nano),
            status: row.status,
            estimated: row.notes.estimated.map(|why| why.as_str().to_owned()),
        }
    }
}

/// The chain's writing end, on its own thread.
struct Writer {
    file: std::fs::File,
    signer: Signer,
    chain: String,
    head: Head,
    /// The last link a seal in the file covers.
    sealed: u64,
    stats: Arc<ReceiptStats>,
    path: PathBuf,
}

/// Receipts written with one write at most.
const BATCH: usize = 1024;

/// How long the writer gathers receipts after the first of a batch.
const GATHER: Duration = Duration::from_millis(20);

/// How often a growing chain's head is sealed.
const SEAL_EVERY: Duration = Duration::from_secs(1);

impl Writer {
    fn run(mut self, rx: Receiver<Receipt>) {
        let mut text: Vec<u8> = Vec::with_capacity(64 * 1024);
        let mut last_seal = Instant::now();
        loop {
            let unsealed = self.sealed != self.head.seq;
            let wait = match unsealed {
                true => SEAL_EVERY.saturating_sub(last_seal.elapsed()),
                false => Duration::from_secs(3_600),
            };
            let (first, closing) = match rx.recv_timeout(wait) {
                Ok(receipt) => (Some(receipt), false),
                Err(RecvTimeoutError::Timeout) => (None, false),
                Err(RecvTimeoutError::Disconnected) => (None, true),
            };
            if first.is_some() {
                // What else settles meanwhile is written with it: one write
                // (and no wake-up of this thread) for many receipts.
                std::thread::sleep(GATHER);
            }
            let mut head = self.head.clone();
            let mut n = 0u64;
            let more = std::iter::from_fn(|| rx.try_recv().ok()).take(BATCH - 1);
            for mut receipt in first.into_iter().chain(more) {
                receipt.chain.clone_from(&self.chain);
                receipt.seq = head.seq + 1;
                receipt.prev = std::mem::take(&mut head.hash);
                let hash = write_line(&mut text, &receipt);
                text.push(b'\n');
                head = Head { seq: receipt.seq, hash };
                n += 1;
            }
            let seal = head.seq != self.sealed && (closing || last_seal.elapsed() >= SEAL_EVERY);
            if seal {
                text.extend_from_slice(self.signer.seal(&self.chain, &head).as_bytes());
                text.push(b'\n');
            }
            if !text.is_empty() {
                match self.file.write_all(&text).and_then(|()| self.file.flush()) {
                    Ok(()) => {
                        self.head = head;
                        self.stats.written.fetch_add(n, Ordering::Relaxed);
                        if seal {
                            self.sealed = self.head.seq;
                            last_seal = Instant::now();
                        }
                    }
                    Err(err) => {
                        // The chain goes on from the last line written: the
                        // lost receipts are counted, never a gap in the chain.
                        self.stats.errors.fetch_add(n, Ordering::Relaxed);
                        tracing::warn!(path = %self.path.display(), error = %err, receipts = n, "receipts could not be written; dropped");
                    }
                }
                text.clear();
            }
            if closing {
                return;
            }
        }
    }
}

/// The file's last non-empty line (read from its last 64 KiB).
fn last_line(file: &mut std::fs::File) -> std::io::Result<Option<String>> {
    let len = file.seek(SeekFrom::End(0))?;
    let from = len.saturating_sub(64 * 1024);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = String::new();
    file.take(len - from).read_to_string(&mut tail)?;
    Ok(tail.lines().rev().find(|line| !line.trim().is_empty()).map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(path: &Path) -> switchyard_config::proof::Receipts {
        switchyard_config::proof::Receipts {
            key: "0123456789abcdef0123".into(),
            path: path.to_path_buf(),
            chain: "gw-test".into(),
        }
    }

    fn row(entry: i64) -> switchyard_store::LedgerRow {
        switchyard_store::LedgerRow {
            entry,
            at_ms: 1_000 + entry,
            request_id: format!("req-{entry}"),
            key_id: None,
            group: None,
            pool: "chat".into(),
            lane: "a".into(),
            model: "gpt-4o".into(),
            operation: "chat".into(),
            tokens: switchyard_store::Tokens { input: 10, output: 5, requests: 1, ..Default::default() },
            status: 200,
            latency_ms: 1,
            ttfb_ms: None,
            failovers: 0,
            estimated: false,
            attempts: Vec::new(),
            notes: switchyard_store::Notes::default(),
            end_user: None,
            ingress: None,
            stream: false,
            charge: Some(switchyard_store::Charge { cost_nano: 42, price_nano: 48 }),
        }
    }

    fn wait_written(queue: &ReceiptQueue, n: u64) {
        for _ in 0..200 {
            if queue.stats.written.load(Ordering::Relaxed) >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("receipts not written");
    }

    #[test]
    fn a_receipt_states_the_rows_settled_cost_and_nothing_else() {
        let mut broken = row(7);
        broken.charge = Some(switchyard_store::Charge { cost_nano: 1_234, price_nano: 1_500 });
        assert_eq!(ReceiptQueue::draft(&broken, None, None).cost_nano, 1_234);
        // A row written before the ledger kept charges states none.
        broken.charge = None;
        assert_eq!(ReceiptQueue::draft(&broken, None, None).cost_nano, 0);
    }

    #[test]
    fn a_chain_goes_on_across_restarts_and_verifies() {
        let dir = std::env::temp_dir().join(format!("sy-receipts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chain.jsonl");
        let _ = std::fs::remove_file(&path);
        let queue = ReceiptQueue::start(&config(&path), 16).unwrap();
        for entry in 1..=3 {
            queue.push(ReceiptQueue::draft(&row(entry), Some("gpt-4o-2024-08-06".into()), None));
        }
        wait_written(&queue, 3);
        let public = queue.public_key.clone();
        // Closed: the writer seals its head and ends.
        drop(queue);
        for _ in 0..200 {
            if std::fs::read_to_string(&path).unwrap().lines().last().is_some_and(|l| l.starts_with(r#"{"seal""#)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // A restart continues the same chain.
        let again = ReceiptQueue::start(&config(&path), 16).unwrap();
        again.push(ReceiptQueue::draft(&row(4), None, Some("req_up".into())));
        wait_written(&again, 1);
        let text = std::fs::read_to_string(&path).unwrap();
        let verified = switchyard_governance::receipt::verify(text.lines(), Some(&public)).unwrap();
        assert_eq!(verified.links, 4);
        // The first run's receipts were sealed when the second began.
        assert!(verified.sealed >= 3, "{verified:?}");
        assert_eq!(verified.chain.as_deref(), Some("gw-test"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
