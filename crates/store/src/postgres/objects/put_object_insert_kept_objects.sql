INSERT INTO kept_objects (kind, owner, id, created_ms, expires_ms, meta, body, size, chunks, user_tag)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (kind, owner, id) DO UPDATE SET
created_ms = EXCLUDED.created_ms, expires_ms = EXCLUDED.expires_ms, meta = EXCLUDED.meta,
body = EXCLUDED.body, size = EXCLUDED.size, chunks = EXCLUDED.chunks, user_tag = EXCLUDED.user_tag
