SELECT id, created_ms, expires_ms, meta, size, chunks, user_tag FROM kept_objects
WHERE kind = $1 AND owner = $2 AND (expires_ms IS NULL OR expires_ms > $3)
ORDER BY created_ms DESC, id DESC LIMIT $4
