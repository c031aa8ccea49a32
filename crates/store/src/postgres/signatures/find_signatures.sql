SELECT key, signature FROM call_signatures WHERE key = ANY($1::TEXT[]) AND expires_ms > $2
