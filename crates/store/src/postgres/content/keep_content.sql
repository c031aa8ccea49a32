INSERT INTO kept_content (entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (entry) DO NOTHING
