-- Refusals at the door (operation `refused`) are ledger rows for the
-- request log, never spend: the hourly rollup leaves them out.
CREATE OR REPLACE FUNCTION switchyard_spend_hourly() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.operation = 'refused' THEN
        RETURN NULL;
    END IF;
    INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens, output_tokens,
                              cache_read_tokens, cache_write_tokens, units, billed_requests, saved_nano)
    VALUES (floor(NEW.at_ms / 3600000.0)::BIGINT, COALESCE(NEW.key_id, ''), COALESCE(NEW.grp, ''), NEW.lane,
            NEW.model, NEW.operation, 1, NEW.input_tokens, NEW.output_tokens, NEW.cache_read_tokens,
            NEW.cache_write_tokens, NEW.units, NEW.billed_requests, NEW.saved_nano)
    ON CONFLICT (hour, key_id, grp, lane, model, operation) DO UPDATE SET
        requests = spend_hourly.requests + 1,
        input_tokens = spend_hourly.input_tokens + EXCLUDED.input_tokens,
        output_tokens = spend_hourly.output_tokens + EXCLUDED.output_tokens,
        cache_read_tokens = spend_hourly.cache_read_tokens + EXCLUDED.cache_read_tokens,
        cache_write_tokens = spend_hourly.cache_write_tokens + EXCLUDED.cache_write_tokens,
        units = spend_hourly.units + EXCLUDED.units,
        billed_requests = spend_hourly.billed_requests + EXCLUDED.billed_requests,
        saved_nano = spend_hourly.saved_nano + EXCLUDED.saved_nano;
    RETURN NULL;
END
$$;
