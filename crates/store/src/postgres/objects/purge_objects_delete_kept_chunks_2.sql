DELETE FROM kept_chunks c WHERE c.at_ms <= $1 AND NOT EXISTS (SELECT 1 FROM kept_objects o
WHERE o.kind = c.kind AND o.owner = c.owner AND o.id = c.id)
