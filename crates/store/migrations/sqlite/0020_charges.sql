-- What each request cost (what the provider bills, at the rate card in
-- force when it settled: its tier by input size, a batch line's discount,
-- the service tier's factor) and what its tenant is charged (the cost and
-- its group's markup), in nano-USD. Such a cost depends on each request's
-- own size and tier, so summed tokens can no longer price it: the rollup
-- sums the settled figures instead. A row written before this migration
-- has none (NULL) and is priced from its tokens when read; so is an hour
-- of the rollup that holds one (`unsettled` counts them, and an hour summed
-- before this migration counts as one).
ALTER TABLE ledger ADD COLUMN cost_nano INTEGER;
ALTER TABLE ledger ADD COLUMN price_nano INTEGER;
ALTER TABLE spend_hourly ADD COLUMN cost_nano INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN price_nano INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN unsettled INTEGER NOT NULL DEFAULT 1;
