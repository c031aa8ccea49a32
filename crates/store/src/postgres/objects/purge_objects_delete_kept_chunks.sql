DELETE FROM kept_chunks c USING kept_objects o WHERE o.kind = c.kind AND o.owner = c.owner
AND o.id = c.id AND o.expires_ms IS NOT NULL AND o.expires_ms <= $1
