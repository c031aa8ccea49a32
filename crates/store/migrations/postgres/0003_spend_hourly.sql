-- Spend by the hour: the ledger's rows summed per (hour, key, group, lane,
-- model), so a spend report reads hours instead of requests. '' stands for
-- no key or no group (a primary key column must not be NULL to be unique).
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

-- The database keeps it, for every writer: an instance of an older version
-- still writing during a rolling upgrade counts too, and a row a retried
-- batch skips (ON CONFLICT DO NOTHING) fires nothing.
CREATE FUNCTION switchyard_spend_hourly() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO spend_hourly (hour, key_id, grp, lane, model, requests, input_tokens, output_tokens,
                              cache_read_tokens, cache_write_tokens)
    VALUES (floor(NEW.at_ms / 3600000.0)::BIGINT, COALESCE(NEW.key_id, ''), COALESCE(NEW.grp, ''), NEW.lane,
            NEW.model, 1, NEW.input_tokens, NEW.output_tokens, NEW.cache_read_tokens, NEW.cache_write_tokens)
    ON CONFLICT (hour, key_id, grp, lane, model) DO UPDATE SET
        requests = spend_hourly.requests + 1,
        input_tokens = spend_hourly.input_tokens + EXCLUDED.input_tokens,
        output_tokens = spend_hourly.output_tokens + EXCLUDED.output_tokens,
        cache_read_tokens = spend_hourly.cache_read_tokens + EXCLUDED.cache_read_tokens,
        cache_write_tokens = spend_hourly.cache_write_tokens + EXCLUDED.cache_write_tokens;
    RETURN NULL;
END
$$;
-- Creating the trigger locks out inserts until this migration commits, so
-- the backfill below and the trigger together count every row once.
CREATE TRIGGER ledger_spend_hourly AFTER INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION switchyard_spend_hourly();
INSERT INTO spend_hourly
SELECT floor(at_ms / 3600000.0)::BIGINT, COALESCE(key_id, ''), COALESCE(grp, ''), lane, model, count(*),
       sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens)
FROM ledger GROUP BY 1, 2, 3, 4, 5;
