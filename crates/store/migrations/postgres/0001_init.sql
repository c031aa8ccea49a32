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
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE TABLE groups (
    name TEXT PRIMARY KEY,
    record TEXT NOT NULL
);

-- Tokens per request; spend is derived from these when read.
CREATE TABLE ledger (
    id BIGSERIAL PRIMARY KEY,
    -- The gateway's id for the row: a batch retried after a lost commit
    -- acknowledgement inserts nothing twice.
    entry BIGINT NOT NULL UNIQUE,
    at_ms BIGINT NOT NULL,
    request_id TEXT NOT NULL,
    key_id TEXT,
    grp TEXT,
    pool TEXT NOT NULL,
    lane TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    status INTEGER NOT NULL,
    latency_ms BIGINT NOT NULL,
    ttfb_ms BIGINT,
    failovers INTEGER NOT NULL,
    estimated BOOLEAN NOT NULL
);
CREATE INDEX ledger_at ON ledger (at_ms);
CREATE INDEX ledger_key_at ON ledger (key_id, at_ms);

CREATE TABLE audit (
    id BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    outcome INTEGER NOT NULL
);
