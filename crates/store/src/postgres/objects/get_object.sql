SELECT id, created_ms, expires_ms, meta, size, chunks, user_tag, body FROM kept_objects
WHERE kind = $1 AND owner = $2 AND id = $3 AND (expires_ms IS NULL OR expires_ms > $4)
