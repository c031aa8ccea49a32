-- Operations beyond chat: each ledger row says what it was (chat, embed,
-- rerank, ..., count_tokens) and what it billed beyond tokens: `units` of
-- its operation (search units, images, characters, seconds of audio) and
-- `billed_requests` (1 when a lane served it, for per-request prices). The
-- hourly rollup is keyed by operation too, and sums both.
ALTER TABLE ledger ADD COLUMN operation TEXT NOT NULL DEFAULT 'chat';
ALTER TABLE ledger ADD COLUMN units INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN billed_requests INTEGER NOT NULL DEFAULT 0;
CREATE TABLE spend_hourly_by_operation (
    hour INTEGER NOT NULL,
    key_id TEXT NOT NULL,
    grp TEXT NOT NULL,
    lane TEXT NOT NULL,
    model TEXT NOT NULL,
    operation TEXT NOT NULL,
    requests INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    units INTEGER NOT NULL,
    billed_requests INTEGER NOT NULL,
    PRIMARY KEY (hour, key_id, grp, lane, model, operation)
) WITHOUT ROWID;
INSERT INTO spend_hourly_by_operation
SELECT hour, key_id, grp, lane, model, 'chat', requests, input_tokens, output_tokens, cache_read_tokens,
       cache_write_tokens, 0, 0
FROM spend_hourly;
DROP TABLE spend_hourly;
ALTER TABLE spend_hourly_by_operation RENAME TO spend_hourly;
