INSERT INTO kept_chunks (kind, owner, id, seq, at_ms, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (kind, owner, id, seq) DO UPDATE SET at_ms = excluded.at_ms, data = excluded.data
