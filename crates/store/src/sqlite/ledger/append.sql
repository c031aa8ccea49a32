INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens,
output_tokens, cache_read_tokens, cache_write_tokens, units, billed_requests, saved_nano,
cache_hits, guarded, refused, cache_write_1h_tokens, reasoning_tokens, audio_input_tokens,
audio_output_tokens, image_input_tokens, image_output_tokens, cost_nano, price_nano, unsettled)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
?20, ?21, ?22, ?23, ?24, ?25, ?26)
ON CONFLICT (hour, key_id, grp, lane, model, operation) DO UPDATE SET
requests = requests + excluded.requests, input_tokens = input_tokens + excluded.input_tokens,
output_tokens = output_tokens + excluded.output_tokens,
cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
units = units + excluded.units, billed_requests = billed_requests + excluded.billed_requests,
saved_nano = saved_nano + excluded.saved_nano, cache_hits = cache_hits + excluded.cache_hits,
guarded = guarded + excluded.guarded, refused = refused + excluded.refused,
cache_write_1h_tokens = cache_write_1h_tokens + excluded.cache_write_1h_tokens,
reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
audio_input_tokens = audio_input_tokens + excluded.audio_input_tokens,
audio_output_tokens = audio_output_tokens + excluded.audio_output_tokens,
image_input_tokens = image_input_tokens + excluded.image_input_tokens,
image_output_tokens = image_output_tokens + excluded.image_output_tokens,
cost_nano = cost_nano + excluded.cost_nano, price_nano = price_nano + excluded.price_nano,
unsettled = unsettled + excluded.unsettled
