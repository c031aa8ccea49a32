INSERT INTO batch_owners (owner, rest_until) SELECT owner, ?2 FROM batches WHERE id = ?1
ON CONFLICT (owner) DO UPDATE SET rest_until = MAX(rest_until, excluded.rest_until)
