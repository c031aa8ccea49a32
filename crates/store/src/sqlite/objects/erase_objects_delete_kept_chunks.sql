DELETE FROM kept_chunks WHERE EXISTS (SELECT 1 FROM kept_objects o WHERE o.kind = kept_chunks.kind
AND o.owner = kept_chunks.owner AND o.id = kept_chunks.id AND o.user_tag = ?1)
