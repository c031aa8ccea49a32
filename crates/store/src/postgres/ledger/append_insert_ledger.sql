INSERT INTO ledger (entry, at_ms, request_id, key_id, grp, pool, lane, model, input_tokens,
output_tokens, cache_read_tokens, cache_write_tokens, status, latency_ms, ttfb_ms, failovers,
estimated, attempts, units, billed_requests, operation, notes, saved_nano, end_user, ingress, stream,
cache_hit, guarded, refused, cache_write_1h_tokens, reasoning_tokens, audio_input_tokens,
audio_output_tokens, image_input_tokens, image_output_tokens, cost_nano, price_nano)
SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[],
$7::TEXT[], $8::TEXT[], $9::BIGINT[], $10::BIGINT[], $11::BIGINT[], $12::BIGINT[], $13::INTEGER[],
$14::BIGINT[], $15::BIGINT[], $16::INTEGER[], $17::BOOLEAN[], $18::TEXT[], $19::BIGINT[],
$20::BIGINT[], $21::TEXT[], $22::TEXT[], $23::BIGINT[], $24::TEXT[], $25::TEXT[], $26::BOOLEAN[],
$27::BIGINT[], $28::BIGINT[], $29::BIGINT[], $30::BIGINT[], $31::BIGINT[], $32::BIGINT[],
$33::BIGINT[], $34::BIGINT[], $35::BIGINT[], $36::BIGINT[], $37::BIGINT[])
ON CONFLICT (entry) DO NOTHING
