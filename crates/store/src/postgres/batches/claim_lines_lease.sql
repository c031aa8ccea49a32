WITH open AS (
  SELECT l.batch, l.idx, b.owner, COALESCE(o.turn, 0) AS turn,
    ROW_NUMBER() OVER (PARTITION BY b.owner ORDER BY b.created_ms, l.batch, l.idx) AS nth
  FROM batch_lines l JOIN batches b ON b.id = l.batch
    LEFT JOIN batch_owners o ON o.owner = b.owner
  WHERE ((l.state = 0 AND l.not_before <= $1) OR (l.state = 1 AND l.lease_until < $1))
    AND b.cancelled_ms IS NULL AND NOT b.staged AND COALESCE(o.rest_until, 0) <= $1),
picked AS (
  SELECT l.batch, l.idx, open.nth, open.turn FROM batch_lines l
    JOIN open ON open.batch = l.batch AND open.idx = l.idx
  WHERE open.nth <= $2
    AND ((l.state = 0 AND l.not_before <= $1) OR (l.state = 1 AND l.lease_until < $1))
  ORDER BY open.nth, open.turn, open.owner LIMIT $2 FOR UPDATE OF l SKIP LOCKED)
UPDATE batch_lines l SET state = 1, worker = $3, attempt = l.attempt + 1, lease_until = $4
FROM picked, batches b WHERE l.batch = picked.batch AND l.idx = picked.idx AND b.id = l.batch
RETURNING l.batch, b.owner, b.endpoint, l.idx, l.custom_id, l.body, l.attempt, picked.nth, picked.turn
