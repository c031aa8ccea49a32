INSERT INTO kept_objects (kind, owner, id, created_ms, expires_ms, meta, body, size, chunks, user_tag)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (kind, owner, id) DO UPDATE SET
created_ms = excluded.created_ms, expires_ms = excluded.expires_ms, meta = excluded.meta,
body = excluded.body, size = excluded.size, chunks = excluded.chunks, user_tag = excluded.user_tag
