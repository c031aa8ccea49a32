-- Operations beyond chat: each ledger row says what it was (chat, embed,
-- rerank, ..., count_tokens) and what it billed beyond tokens: `units` of
-- its operation (search units, images, characters, seconds of audio) and
-- `billed_requests` (1 when a lane served it, for per-request prices). The
-- hourly rollup is keyed by operation too, and sums both.
ALTER TABLE ledger
    ADD COLUMN operation TEXT NOT NULL DEFAULT 'chat',
    ADD COLUMN units BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN billed_requests BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly
    ADD COLUMN operation TEXT NOT NULL DEFAULT 'chat',
    ADD COLUMN units BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN billed_requests BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly DROP CONSTRAINT spend_hourly_pkey;
ALTER TABLE spend_hourly ADD PRIMARY KEY (hour, key_id, grp, lane, model, operation);
CREATE OR REPLACE FUNCTION switchyard_spend_hourly() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens, output_tokens,
                              cache_read_tokens, cache_write_tokens, units, billed_requests)
    VALUES (floor(NEW.at_ms / 3600000.0)::BIGINT, COALESCE(NEW.key_id, ''), COALESCE(NEW.grp, ''), NEW.lane,
            NEW.model, NEW.operation, 1, NEW.input_tokens, NEW.output_tokens, NEW.cache_read_tokens,
            NEW.cache_write_tokens, NEW.units, NEW.billed_requests)
    ON CONFLICT (hour, key_id, grp, lane, model, operation) DO UPDATE SET
        requests = spend_hourly.requests + 1,
        input_tokens = spend_hourly.input_tokens + EXCLUDED.input_tokens,
        output_tokens = spend_hourly.output_tokens + EXCLUDED.output_tokens,
        cache_read_tokens = spend_hourly.cache_read_tokens + EXCLUDED.cache_read_tokens,
        cache_write_tokens = spend_hourly.cache_write_tokens + EXCLUDED.cache_write_tokens,
        units = spend_hourly.units + EXCLUDED.units,
        billed_requests = spend_hourly.billed_requests + EXCLUDED.billed_requests;
    RETURN NULL;
END
$$;
