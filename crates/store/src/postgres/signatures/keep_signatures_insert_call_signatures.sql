INSERT INTO call_signatures (key, signature, expires_ms)
SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[])
ON CONFLICT (key) DO UPDATE SET signature = EXCLUDED.signature, expires_ms = EXCLUDED.expires_ms
