-- What requests met on the way, as columns of the row and of the hourly
-- rollup, so spend and usage show them beside cost: a response-cache hit,
-- the guardrail decisions made, and refusals at the door (counted in the
-- rollup under operation `refused`, never as requests).
ALTER TABLE ledger ADD COLUMN cache_hit BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN guarded BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN cache_hits BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN guarded BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN refused BIGINT NOT NULL DEFAULT 0;
UPDATE ledger SET cache_hit = 1 WHERE notes IS NOT NULL AND notes::jsonb ? 'cache_saved_nano';
UPDATE ledger SET guarded = jsonb_array_length(notes::jsonb -> 'guardrails')
    WHERE notes IS NOT NULL AND jsonb_typeof(notes::jsonb -> 'guardrails') = 'array';
UPDATE spend_hourly h SET cache_hits = s.hits, guarded = s.guarded FROM (
    SELECT floor(at_ms / 3600000.0)::BIGINT AS hour, COALESCE(key_id, '') AS key_id, COALESCE(grp, '') AS grp,
           lane, model, operation, sum(cache_hit)::BIGINT AS hits, sum(guarded)::BIGINT AS guarded
    FROM ledger WHERE cache_hit > 0 OR guarded > 0 GROUP BY 1, 2, 3, 4, 5, 6) s
WHERE h.hour = s.hour AND h.key_id = s.key_id AND h.grp = s.grp AND h.lane = s.lane AND h.model = s.model
  AND h.operation = s.operation;
INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens, output_tokens,
                          cache_read_tokens, cache_write_tokens, units, billed_requests, saved_nano, refused)
SELECT floor(at_ms / 3600000.0)::BIGINT, COALESCE(key_id, ''), COALESCE(grp, ''), lane, model, operation,
       0, 0, 0, 0, 0, 0, 0, 0, count(*)
FROM ledger WHERE operation = 'refused' GROUP BY 1, 2, 3, 4, 5, 6
ON CONFLICT (hour, key_id, grp, lane, model, operation) DO UPDATE SET refused = EXCLUDED.refused;
CREATE OR REPLACE FUNCTION switchyard_spend_hourly() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    served BIGINT := CASE WHEN NEW.operation = 'refused' THEN 0 ELSE 1 END;
BEGIN
    INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens, output_tokens,
                              cache_read_tokens, cache_write_tokens, units, billed_requests, saved_nano,
                              cache_hits, guarded, refused)
    VALUES (floor(NEW.at_ms / 3600000.0)::BIGINT, COALESCE(NEW.key_id, ''), COALESCE(NEW.grp, ''), NEW.lane,
            NEW.model, NEW.operation, served, NEW.input_tokens, NEW.output_tokens, NEW.cache_read_tokens,
            NEW.cache_write_tokens, NEW.units, NEW.billed_requests, NEW.saved_nano, NEW.cache_hit, NEW.guarded,
            1 - served)
    ON CONFLICT (hour, key_id, grp, lane, model, operation) DO UPDATE SET
        requests = spend_hourly.requests + EXCLUDED.requests,
        input_tokens = spend_hourly.input_tokens + EXCLUDED.input_tokens,
        output_tokens = spend_hourly.output_tokens + EXCLUDED.output_tokens,
        cache_read_tokens = spend_hourly.cache_read_tokens + EXCLUDED.cache_read_tokens,
        cache_write_tokens = spend_hourly.cache_write_tokens + EXCLUDED.cache_write_tokens,
        units = spend_hourly.units + EXCLUDED.units,
        billed_requests = spend_hourly.billed_requests + EXCLUDED.billed_requests,
        saved_nano = spend_hourly.saved_nano + EXCLUDED.saved_nano,
        cache_hits = spend_hourly.cache_hits + EXCLUDED.cache_hits,
        guarded = spend_hourly.guarded + EXCLUDED.guarded,
        refused = spend_hourly.refused + EXCLUDED.refused;
    RETURN NULL;
END
$$;
