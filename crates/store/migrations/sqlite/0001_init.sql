-- Keys are kept as their JSON record; the hash and the AWS access key id
-- are columns too, so a duplicate is refused by the database itself.
CREATE TABLE keys (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    aws_access_key_id TEXT UNIQUE,
    record TEXT NOT NULL
);

CREATE TABLE idempotency (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    key_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE TABLE groups (
    name TEXT PRIMARY KEY,
    record TEXT NOT NULL
);

-- Tokens per request; spend is derived from these when read.
CREATE TABLE ledger (
    -- The rowid: rows are only appended, so ids grow with time without
    -- AUTOINCREMENT's extra write per insert.
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    key_id TEXT,
    grp TEXT,
    pool TEXT NOT NULL,
    lane TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    status INTEGER NOT NULL,
    latency_ms INTEGER NOT NULL,
    ttfb_ms INTEGER,
    failovers INTEGER NOT NULL,
    estimated INTEGER NOT NULL
);
CREATE INDEX ledger_at ON ledger (at_ms);
CREATE INDEX ledger_key_at ON ledger (key_id, at_ms);

CREATE TABLE audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    outcome INTEGER NOT NULL
);
