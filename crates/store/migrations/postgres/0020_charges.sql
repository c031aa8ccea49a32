-- What each request cost (what the provider bills, at the rate card in
-- force when it settled: its tier by input size, a batch line's discount,
-- the service tier's factor) and what its tenant is charged (the cost and
-- its group's markup), in nano-USD. Such a cost depends on each request's
-- own size and tier, so summed tokens can no longer price it: the rollup
-- sums the settled figures instead. A row written before this migration,
-- or by an older instance during a rolling upgrade, has none (NULL) and is
-- priced from its tokens when read; so is an hour of the rollup that holds
-- one (`unsettled` counts them, and an hour summed before this migration
-- counts as one).
ALTER TABLE ledger ADD COLUMN cost_nano BIGINT;
ALTER TABLE ledger ADD COLUMN price_nano BIGINT;
ALTER TABLE spend_hourly ADD COLUMN cost_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN price_nano BIGINT NOT NULL DEFAULT 0;
ALTER TABLE spend_hourly ADD COLUMN unsettled BIGINT NOT NULL DEFAULT 1;
-- The rollup's statement trigger sums them too.
CREATE OR REPLACE FUNCTION switchyard_spend_hourly_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens, output_tokens,
                              cache_read_tokens, cache_write_tokens, units, billed_requests, saved_nano,
                              cache_hits, guarded, refused, cache_write_1h_tokens, reasoning_tokens,
                              audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens,
                              cost_nano, price_nano, unsettled)
    SELECT floor(at_ms / 3600000.0)::BIGINT, COALESCE(key_id, ''), COALESCE(grp, ''), lane, model, operation,
           count(*) FILTER (WHERE operation <> 'refused'), sum(input_tokens)::BIGINT, sum(output_tokens)::BIGINT,
           sum(cache_read_tokens)::BIGINT, sum(cache_write_tokens)::BIGINT, sum(units)::BIGINT,
           sum(billed_requests)::BIGINT, sum(saved_nano)::BIGINT, sum(cache_hit)::BIGINT, sum(guarded)::BIGINT,
           sum(refused)::BIGINT, sum(cache_write_1h_tokens)::BIGINT, sum(reasoning_tokens)::BIGINT,
           sum(audio_input_tokens)::BIGINT, sum(audio_output_tokens)::BIGINT, sum(image_input_tokens)::BIGINT,
           sum(image_output_tokens)::BIGINT, COALESCE(sum(cost_nano), 0)::BIGINT,
           COALESCE(sum(price_nano), 0)::BIGINT, (count(*) - count(cost_nano))::BIGINT
    FROM added GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
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
        refused = spend_hourly.refused + EXCLUDED.refused,
        cache_write_1h_tokens = spend_hourly.cache_write_1h_tokens + EXCLUDED.cache_write_1h_tokens,
        reasoning_tokens = spend_hourly.reasoning_tokens + EXCLUDED.reasoning_tokens,
        audio_input_tokens = spend_hourly.audio_input_tokens + EXCLUDED.audio_input_tokens,
        audio_output_tokens = spend_hourly.audio_output_tokens + EXCLUDED.audio_output_tokens,
        image_input_tokens = spend_hourly.image_input_tokens + EXCLUDED.image_input_tokens,
        image_output_tokens = spend_hourly.image_output_tokens + EXCLUDED.image_output_tokens,
        cost_nano = spend_hourly.cost_nano + EXCLUDED.cost_nano,
        price_nano = spend_hourly.price_nano + EXCLUDED.price_nano,
        unsettled = spend_hourly.unsettled + EXCLUDED.unsettled;
    RETURN NULL;
END
$$;
