-- What requests met on the way, as columns of the row and of the hourly
-- rollup, so spend and usage show them beside cost: a response-cache hit,
-- the guardrail decisions made, and refusals at the door (counted in the
-- rollup under operation `refused`, never as requests).
ALTER TABLE ledger ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN guarded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN cache_hits INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN guarded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN refused INTEGER NOT NULL DEFAULT 0;
UPDATE ledger SET cache_hit = 1 WHERE notes IS NOT NULL AND json_extract(notes, '$.cache_saved_nano') IS NOT NULL;
UPDATE ledger SET guarded = json_array_length(notes, '$.guardrails')
    WHERE notes IS NOT NULL AND json_extract(notes, '$.guardrails') IS NOT NULL;
UPDATE spend_hourly SET
    cache_hits = (SELECT COALESCE(sum(l.cache_hit), 0) FROM ledger l
        WHERE l.at_ms / 3600000 = spend_hourly.hour AND COALESCE(l.key_id, '') = spend_hourly.key_id
          AND COALESCE(l.grp, '') = spend_hourly.grp AND l.lane = spend_hourly.lane AND l.model = spend_hourly.model
          AND l.operation = spend_hourly.operation),
    guarded = (SELECT COALESCE(sum(l.guarded), 0) FROM ledger l
        WHERE l.at_ms / 3600000 = spend_hourly.hour AND COALESCE(l.key_id, '') = spend_hourly.key_id
          AND COALESCE(l.grp, '') = spend_hourly.grp AND l.lane = spend_hourly.lane AND l.model = spend_hourly.model
          AND l.operation = spend_hourly.operation);
INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens, output_tokens,
                          cache_read_tokens, cache_write_tokens, units, billed_requests, saved_nano, refused)
SELECT at_ms / 3600000, COALESCE(key_id, ''), COALESCE(grp, ''), lane, model, operation, 0, 0, 0, 0, 0, 0, 0, 0,
       count(*)
FROM ledger WHERE operation = 'refused' GROUP BY 1, 2, 3, 4, 5, 6;
