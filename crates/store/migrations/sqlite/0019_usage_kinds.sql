-- Every kind of token a provider bills apart, as columns of the row and of
-- the hourly rollup, so spend priced from summed tokens prices each kind at
-- its own rate: the hour-long part of the cache writes, and the reasoning,
-- audio and image parts of input and output (each a part of its total).
ALTER TABLE ledger ADD COLUMN cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN audio_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN audio_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN image_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN image_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN audio_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN audio_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN image_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN image_output_tokens INTEGER NOT NULL DEFAULT 0;
