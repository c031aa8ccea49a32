WITH released AS (
  UPDATE batch_lines SET state = 0, worker = NULL, lease_until = 0, not_before = $5
  WHERE batch = $1 AND idx = $2 AND state = 1 AND worker = $3 AND attempt = $4 RETURNING batch)
INSERT INTO batch_owners (owner, rest_until)
  SELECT b.owner, $5 FROM batches b JOIN released r ON r.batch = b.id
ON CONFLICT (owner) DO UPDATE
  SET rest_until = GREATEST(batch_owners.rest_until, EXCLUDED.rest_until)
