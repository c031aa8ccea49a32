INSERT INTO call_signatures (key, signature, expires_ms) VALUES (?1, ?2, ?3)
ON CONFLICT (key) DO UPDATE SET signature = excluded.signature, expires_ms = excluded.expires_ms
