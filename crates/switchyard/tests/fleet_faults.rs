//! The ledger of a fleet (real binaries, a PostgreSQL and a Redis of the
//! test's own) under load while PostgreSQL is held up and an instance is
//! killed with `kill -9`: what a kill loses is the rows settled in the
//! last flush interval and the write before theirs, never more; a
//! PostgreSQL hung on a table lock or frozen with SIGSTOP is timed out, its
//! rows spooled, and serving goes on; every row comes back once.
//!
//! Skipped without the test services (`scripts/services.sh` exports
//! `SWITCHYARD_TEST_PG_BIN` and `SWITCHYARD_TEST_REDIS_SERVER`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{free_port, http, spawn_binary};

const ADMIN_TOKEN: &str = "fleet-faults-admin-token-0123456789";

/// A PostgreSQL server of the test's own, so it can be locked, frozen and
/// stopped.
struct Postgres {
    dir: PathBuf,
    bin: String,
    port: u16,
}

impl Postgres {
    fn start(dir: &Path) -> Postgres {
        let bin = std::env::var("SWITCHYARD_TEST_PG_BIN").unwrap();
        let postgres = Postgres { dir: dir.join("pg"), bin, port: free_port() };
        std::fs::create_dir_all(&postgres.dir).unwrap();
        if root() {
            assert!(Command::new("chown").arg("postgres").arg(&postgres.dir).status().unwrap().success());
        }
        let data = postgres.dir.join("data");
        let initdb = format!("{}/initdb", postgres.bin);
        assert!(postgres.run(&initdb, &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres"]).success());
        let options =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", postgres.port, postgres.dir.display());
        let log = postgres.dir.join("server.log");
        let pg_ctl = format!("{}/pg_ctl", postgres.bin);
        let started = postgres
            .run(&pg_ctl, &["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "-o", &options, "start"]);
        assert!(started.success(), "postgres did not start");
        postgres
    }

    fn run(&self, program: &str, args: &[&str]) -> std::process::ExitStatus {
        let mut command = if root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", program]);
            command
        } else {
            Command::new(program)
        };
        command.args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn psql(&self) -> Command {
        let mut command = Command::new(format!("{}/psql", self.bin));
        command.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres"]);
        command
    }

    /// One query's rows, one per line.
    fn query(&self, sql: &str) -> Vec<String> {
        let out = self.psql().args(["-tAc", sql]).output().unwrap();
        assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
    }

    /// The server's processes: the postmaster and its children.
    fn pids(&self) -> Vec<String> {
        let pidfile = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).unwrap_or_default();
        let Some(postmaster) = pidfile.lines().next().map(|line| line.trim().to_owned()) else { return Vec::new() };
        let mut pids = vec![postmaster.clone()];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // `pid (comm) state ppid ...`: the fields after the last `)`.
            let Some((_, rest)) = stat.rsplit_once(')') else { continue };
            if rest.split_whitespace().nth(1) == Some(postmaster.as_str()) {
                pids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        pids
    }

    /// Sends every process of the server `signal` (`-STOP`, `-CONT`).
    fn signal(&self, signal: &str) {
        for pid in self.pids() {
            let _ = Command::new("kill").args([signal, &pid]).stderr(Stdio::null()).status();
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.signal("-CONT");
        let data = self.dir.join("data");
        let pg_ctl = format!("{}/pg_ctl", self.bin);
        let _ = self.run(&pg_ctl, &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"]);
    }
}

fn root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0"))
}

/// A session holding `LOCK TABLE ledger` (as a migration or a long
/// maintenance statement would): every insert waits behind it.
struct TableLock {
    child: Child,
    stdin: ChildStdin,
}

impl TableLock {
    fn take(postgres: &Postgres) -> TableLock {
        let mut child = postgres.psql().stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "BEGIN; LOCK TABLE ledger IN ACCESS EXCLUSIVE MODE;").unwrap();
        stdin.flush().unwrap();
        let lock = TableLock { child, stdin };
        wait_for(postgres, "the table lock to be held", |waiting| waiting.0 > 0);
        lock
    }

    fn release(mut self) {
        writeln!(self.stdin, "COMMIT;").unwrap();
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

/// Waits until `ready` holds of (locks held on `ledger` in exclusive mode,
/// sessions waiting for a lock on it).
fn wait_for(postgres: &Postgres, what: &str, ready: impl Fn((u64, u64)) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let row = postgres.query(
            "SELECT count(*) FILTER (WHERE granted AND mode = 'AccessExclusiveLock'), count(*) FILTER (WHERE NOT granted) \
             FROM pg_locks WHERE relation = 'ledger'::regclass",
        );
        let (held, waiting) = row[0].split_once('|').unwrap();
        if ready((held.parse().unwrap(), waiting.parse().unwrap())) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A Redis server of the test's own.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Redis {
        let server = std::env::var("SWITCHYARD_TEST_REDIS_SERVER").unwrap();
        let port = free_port();
        let child = Command::new(server)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, port }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One instance of the fleet: the real binary.
struct Instance {
    child: Child,
    data: SocketAddr,
    admin: SocketAddr,
    config: PathBuf,
}

/// How an instance writes its ledger.
struct Ledger {
    flush: Duration,
    write_timeout: Duration,
    queue: usize,
}

impl Instance {
    fn start(dir: &Path, name: &str, postgres: &Postgres, redis: &Redis, ledger: &Ledger) -> Instance {
        let data: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let spool = dir.join(format!("spool-{name}.db"));
        let yaml = format!(
            "listen: {data}\nadmin_listen: {admin}\nproviders:\n  up: {{ protocol: openai, base_url: \"mock://\" }}\n\
             models:\n  m: {{ provider: up }}\nrate_card:\n  m: {{ input_utok: 1, output_utok: 1 }}\n\
             auth: {{ mode: keys }}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\n\
             storage: {{ postgres_url: \"{}\", redis_url: \"redis://127.0.0.1:{}\", ledger_spool: \"{}\" }}\n\
             governance: {{ ledger_flush_interval: {}ms, ledger_write_timeout: {}ms, ledger_queue: {} }}\n",
            postgres.url(),
            redis.port,
            spool.display(),
            ledger.flush.as_millis(),
            ledger.write_timeout.as_millis(),
            ledger.queue,
        );
        let config = dir.join(format!("{name}.yaml"));
        std::fs::write(&config, yaml).unwrap();
        Instance { child: spawn_binary(&config, data), data, admin, config }
    }

    /// The same instance started again on its file (its spool replays).
    fn restart(&mut self) {
        let _ = self.child.wait();
        self.child = spawn_binary(&self.config, self.data);
    }

    fn kill_9(&mut self) {
        Command::new("kill").args(["-9", &self.child.id().to_string()]).status().unwrap();
        let _ = self.child.wait();
    }

    fn new_key(&self) -> String {
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let (status, body) =
            http(self.admin, "POST", "/api/v1/admin/keys", &[("authorization", &auth)], r#"{"name":"load"}"#);
        assert_eq!(status, 201, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["key"].as_str().unwrap().to_owned()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request answered: its id, when its answer arrived (since the load
/// began) and how long it took.
struct Answered {
    id: String,
    at: Duration,
    took: Duration,
}

/// Load on `targets` (two callers each, each pausing `pause` between
/// requests) until `stop`: every answer's id, time and latency, by target.
fn load(targets: &[(SocketAddr, String)], pause: Duration, stop: &AtomicBool, began: Instant) -> Vec<Vec<Answered>> {
    std::thread::scope(|scope| {
        let callers: Vec<_> = targets
            .iter()
            .enumerate()
            .flat_map(|(target, (data, key))| (0..2).map(move |caller| (target, caller, *data, key)))
            .map(|(target, caller, data, key)| {
                scope.spawn(move || {
                    let auth = format!("Bearer {key}");
                    let mut answered = Vec::new();
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let id = format!("t{target}-c{caller}-{n}");
                        let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{id}"}}]}}"#);
                        let sent = Instant::now();
                        let headers = [("authorization", auth.as_str()), ("x-request-id", id.as_str())];
                        match http(data, "POST", "/v1/chat/completions", &headers, &body).0 {
                            200 => {
                                answered.push(Answered { id, at: began.elapsed(), took: sent.elapsed() });
                                std::thread::sleep(pause);
                            }
                            // Killed: nobody answers any more.
                            _ => std::thread::sleep(Duration::from_millis(20)),
                        }
                    }
                    (target, answered)
                })
            })
            .collect();
        let mut by_target: Vec<Vec<Answered>> = targets.iter().map(|_| Vec::new()).collect();
        for caller in callers {
            let (target, answered) = caller.join().unwrap();
            by_target[target].extend(answered);
        }
        by_target
    })
}

/// The request ids the ledger holds, each with how many rows it has.
fn ledger_ids(postgres: &Postgres) -> HashMap<String, u64> {
    postgres
        .query("SELECT request_id, count(*) FROM ledger GROUP BY request_id")
        .into_iter()
        .map(|line| {
            let (id, count) = line.rsplit_once('|').unwrap();
            (id.to_owned(), count.parse().unwrap())
        })
        .collect()
}

/// Of `answered`, the ones missing from the ledger: the longest any of
/// them had been answered when the kill came, and how many.
fn lost(answered: &[Answered], kept: &HashMap<String, u64>, killed_at: Duration) -> (Duration, usize) {
    let missing: Vec<&Answered> = answered.iter().filter(|a| a.at <= killed_at && !kept.contains_key(&a.id)).collect();
    let oldest = missing.iter().map(|a| killed_at.saturating_sub(a.at)).max().unwrap_or_default();
    (oldest, missing.len())
}

fn workdir(name: &str) -> Option<PathBuf> {
    if std::env::var("SWITCHYARD_TEST_PG_BIN").is_err() || std::env::var("SWITCHYARD_TEST_REDIS_SERVER").is_err() {
        assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL and Redis: run the tests through scripts/test.sh");
        eprintln!("the test services are not set: fleet fault cases skipped (scripts/services.sh starts them)");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("switchyard-fleet-faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if root() {
        // PostgreSQL's own directory is made below it, owned by `postgres`.
        let _ = Command::new("chmod").args(["755", dir.to_str().unwrap()]).status();
    }
    Some(dir)
}

/// `kill -9` while a batch is being written (held up by a table lock as
/// long as a slow write takes) loses the rows that batch holds and those
/// gathered meanwhile: settled at most the flush interval and one write
/// before the kill. The rows that arrived while the batch before was
/// written used to wait a whole flush interval more after it: the kill
/// then lost them too, the flush interval and two writes back.
#[test]
fn kill_9_loses_at_most_the_flush_interval_and_the_write_in_flight() {
    let Some(dir) = workdir("kill") else { return };
    let postgres = Postgres::start(&dir);
    let redis = Redis::start();
    let ledger = Ledger { flush: Duration::from_millis(1000), write_timeout: Duration::from_secs(10), queue: 65_536 };
    let mut instance = Instance::start(&dir, "one", &postgres, &redis, &ledger);
    let key = instance.new_key();
    // A write takes this long (the table lock holds it up), under the flush interval.
    let write = Duration::from_millis(900);
    let stop = AtomicBool::new(false);
    let began = Instant::now();
    let targets = [(instance.data, key.clone())];
    let (answered, killed_at) = std::thread::scope(|scope| {
        // A few hundred requests a second: no batch fills before its flush interval.
        let loader = scope.spawn(|| load(&targets, Duration::from_millis(5), &stop, began));
        std::thread::sleep(Duration::from_millis(1500));
        // A write held up for `write`, then the next one held up as long,
        // and the kill as it is about to end.
        let lock = TableLock::take(&postgres);
        let locked = began.elapsed();
        wait_for(&postgres, "a ledger write", |(_, waiting)| waiting > 0);
        let first = began.elapsed();
        std::thread::sleep(write);
        lock.release();
        let released = began.elapsed();
        let lock = TableLock::take(&postgres);
        let relocked = began.elapsed();
        wait_for(&postgres, "the next ledger write", |(_, waiting)| waiting > 0);
        let second = began.elapsed();
        std::thread::sleep(write);
        let killed_at = began.elapsed();
        eprintln!("locked {locked:?}, a write waits {first:?}, released {released:?}, locked {relocked:?}, the next waits {second:?}, killed {killed_at:?}");
        instance.kill_9();
        lock.release();
        stop.store(true, Ordering::SeqCst);
        (loader.join().unwrap().remove(0), killed_at)
    });
    let kept = ledger_ids(&postgres);
    let (oldest, missing) = lost(&answered, &kept, killed_at);
    let newest_kept = answered.iter().filter(|a| kept.contains_key(&a.id)).map(|a| a.at).max();
    eprintln!("the newest answer kept {newest_kept:?}");
    eprintln!(
        "kill -9 mid-write: {} answered, {} rows kept, {missing} lost, the oldest answered {oldest:?} before the kill \
         (flush {:?}, write {write:?})",
        answered.len(),
        kept.len(),
        ledger.flush,
    );
    assert!(answered.len() > 500, "the load ran: {} answers", answered.len());
    assert!(missing > 0, "the kill came mid-write: something was lost");
    let bound = ledger.flush + write + Duration::from_millis(300);
    assert!(oldest <= bound, "a row answered {oldest:?} before the kill was lost (bound {bound:?})");
    assert!(kept.values().all(|&rows| rows == 1), "a row was stored twice");
    drop((instance, redis, postgres));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What PostgreSQL being held up does to a fleet's ledger.
#[derive(Debug, Clone, Copy)]
enum Hold {
    /// A session holds `LOCK TABLE ledger`: the server answers everything else.
    TableLock,
    /// Every process of the server is stopped (SIGSTOP): nothing answers.
    Frozen,
}

/// Two instances under load while PostgreSQL is held up for 4 s: writes
/// time out and go to the spool, so the queue never fills and requests
/// keep being answered; one instance is then killed with `kill -9`, and
/// once PostgreSQL is back and it is started again, every row is in the
/// ledger once but those of its last flush interval and write.
fn a_held_up_postgres_is_timed_out_and_spooled(hold: Hold) {
    let Some(dir) = workdir(&format!("{hold:?}")) else { return };
    let postgres = Postgres::start(&dir);
    let redis = Redis::start();
    // A small queue: a writer that waited on the store would fill it in a second.
    let ledger = Ledger { flush: Duration::from_millis(200), write_timeout: Duration::from_millis(1000), queue: 256 };
    let mut killed = Instance::start(&dir, "killed", &postgres, &redis, &ledger);
    let survivor = Instance::start(&dir, "survivor", &postgres, &redis, &ledger);
    let (killed_key, survivor_key) = (killed.new_key(), survivor.new_key());
    let stop = AtomicBool::new(false);
    let began = Instant::now();
    let targets = [(killed.data, killed_key), (survivor.data, survivor_key)];
    let (answered, held, killed_at) = std::thread::scope(|scope| {
        let loader = scope.spawn(|| load(&targets, Duration::ZERO, &stop, began));
        std::thread::sleep(Duration::from_millis(1000));
        let lock = match hold {
            Hold::TableLock => Some(TableLock::take(&postgres)),
            Hold::Frozen => {
                postgres.signal("-STOP");
                None
            }
        };
        let held = began.elapsed();
        std::thread::sleep(Duration::from_millis(4000));
        let killed_at = began.elapsed();
        killed.kill_9();
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        let answered = loader.join().unwrap();
        match lock {
            Some(lock) => lock.release(),
            None => postgres.signal("-CONT"),
        }
        (answered, held, killed_at)
    });
    // Requests went on being answered while PostgreSQL was held up, by
    // both instances, with no pause longer than one write's timeout.
    for (target, answered) in answered.iter().enumerate() {
        let mut times: Vec<Duration> =
            answered.iter().map(|a| a.at).filter(|at| *at > held && *at < killed_at).collect();
        times.sort();
        let edges = std::iter::once(held).chain(times.iter().copied()).chain(std::iter::once(killed_at));
        let longest_pause =
            edges.clone().zip(edges.skip(1)).map(|(a, b)| b.saturating_sub(a)).max().unwrap_or_default();
        let slowest = answered.iter().filter(|a| a.at > held && a.at < killed_at).map(|a| a.took).max();
        eprintln!(
            "PostgreSQL {hold:?}: instance {target} answered {} while held up, the longest pause {longest_pause:?}, \
             the slowest request {slowest:?}",
            times.len()
        );
        assert!(times.len() > 100, "{hold:?}: instance {target} answered {} while PostgreSQL was held up", times.len());
        assert!(
            longest_pause < ledger.write_timeout + Duration::from_millis(500),
            "{hold:?}: instance {target} answered nothing for {longest_pause:?} while PostgreSQL was held up"
        );
    }

    // The killed instance starts again and replays its spool.
    killed.restart();
    let all: HashSet<&str> = answered.iter().flatten().map(|a| a.id.as_str()).collect();
    let bound = ledger.flush + ledger.write_timeout + Duration::from_millis(300);
    let deadline = Instant::now() + Duration::from_secs(30);
    let (kept, survivor_missing, oldest, missing) = loop {
        let kept = ledger_ids(&postgres);
        let survivor_missing = answered[1].iter().filter(|a| !kept.contains_key(&a.id)).count();
        let (oldest, missing) = lost(&answered[0], &kept, killed_at);
        if (survivor_missing == 0 && oldest <= bound) || Instant::now() > deadline {
            break (kept, survivor_missing, oldest, missing);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "PostgreSQL {hold:?}, kill -9: {} answered by the killed instance, {missing} lost, the oldest answered \
         {oldest:?} before the kill; {} answered by the other, {survivor_missing} missing",
        answered[0].len(),
        answered[1].len(),
    );
    assert_eq!(survivor_missing, 0, "{hold:?}: the instance that lived lost rows");
    assert!(oldest <= bound, "{hold:?}: a row answered {oldest:?} before the kill was lost (bound {bound:?})");
    assert!(kept.values().all(|&rows| rows == 1), "{hold:?}: a row was stored twice");
    assert!(kept.keys().all(|id| all.contains(id.as_str())), "{hold:?}: a row no caller was answered for");
    // The servers stop before their directory goes.
    drop((killed, survivor, redis, postgres));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_postgres_hung_on_a_table_lock_is_timed_out_and_spooled() {
    a_held_up_postgres_is_timed_out_and_spooled(Hold::TableLock);
}

#[test]
fn a_frozen_postgres_is_timed_out_and_spooled() {
    a_held_up_postgres_is_timed_out_and_spooled(Hold::Frozen);
}
