-- What a response-cache hit saved (nano-USD), as a column of the row and
-- of the hourly rollup, so spend reports show cost saved beside cost spent.
ALTER TABLE ledger ADD COLUMN saved_nano INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN saved_nano INTEGER NOT NULL DEFAULT 0;
UPDATE ledger SET saved_nano = CAST(json_extract(notes, '$.cache_saved_nano') AS INTEGER)
    WHERE notes IS NOT NULL AND json_extract(notes, '$.cache_saved_nano') IS NOT NULL;
UPDATE spend_hourly SET saved_nano = (
    SELECT COALESCE(sum(l.saved_nano), 0) FROM ledger l
    WHERE l.at_ms / 3600000 = spend_hourly.hour AND COALESCE(l.key_id, '') = spend_hourly.key_id
      AND COALESCE(l.grp, '') = spend_hourly.grp AND l.lane = spend_hourly.lane AND l.model = spend_hourly.model
      AND l.operation = spend_hourly.operation);
