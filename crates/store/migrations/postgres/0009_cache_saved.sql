-- What a response-cache hit saved (nano-USD), as a column of the row and
-- of the hourly rollup, so spend reports show cost saved beside cost spent.
ALTER TABLE ledger ADD COLUMN saved_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN saved_nano BIGINT NOT NULL DEFAULT 0;
UPDATE ledger SET saved_nano = (notes::jsonb ->> 'cache_saved_nano')::BIGINT
    WHERE notes IS NOT NULL AND notes::jsonb ? 'cache_saved_nano';
UPDATE spend_hourly h SET saved_nano = s.saved FROM (
    SELECT floor(at_ms / 3600000.0)::BIGINT AS hour, COALESCE(key_id, '') AS key_id, COALESCE(grp, '') AS grp,
           lane, model, operation, sum(saved_nano)::BIGINT AS saved
    FROM ledger WHERE saved_nano > 0 GROUP BY 1, 2, 3, 4, 5, 6) s
WHERE h.hour = s.hour AND h.key_id = s.key_id AND h.grp = s.grp AND h.lane = s.lane AND h.model = s.model
  AND h.operation = s.operation;
CREATE OR REPLACE FUNCTION switchyard_spend_hourly() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
