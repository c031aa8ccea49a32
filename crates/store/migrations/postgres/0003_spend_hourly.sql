-- Spend by the hour: the ledger's rows summed per (hour, key, group, lane,
-- model), kept by the writer in the same transaction as the rows, so a
-- spend report reads hours instead of requests. '' stands for no key or no
-- group (a primary key column must not be NULL to be unique).
CREATE TABLE spend_hourly (
    hour BIGINT NOT NULL,
    key_id TEXT NOT NULL,
    grp TEXT NOT NULL,
    lane TEXT NOT NULL,
    model TEXT NOT NULL,
    requests BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    PRIMARY KEY (hour, key_id, grp, lane, model)
);
INSERT INTO spend_hourly
SELECT at_ms / 3600000, COALESCE(key_id, ''), COALESCE(grp, ''), lane, model, count(*), sum(input_tokens),
       sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens)
FROM ledger GROUP BY 1, 2, 3, 4, 5;
