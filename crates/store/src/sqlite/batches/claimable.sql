WITH open AS (
  SELECT l.batch, l.idx, b.owner,
    ROW_NUMBER() OVER (PARTITION BY b.owner ORDER BY b.created_ms, l.batch, l.idx) AS nth
  FROM batch_lines l JOIN batches b ON b.id = l.batch LEFT JOIN batch_owners o ON o.owner = b.owner
  WHERE ((l.state = 0 AND l.not_before <= ?1) OR (l.state = 1 AND l.lease_until < ?1))
    AND b.cancelled_ms IS NULL AND b.staged = 0 AND COALESCE(o.rest_until, 0) <= ?1)
SELECT open.batch, open.owner, b.endpoint, open.idx, l.custom_id, l.body, l.attempt
FROM open JOIN batches b ON b.id = open.batch JOIN batch_lines l ON l.batch = open.batch AND l.idx = open.idx
  LEFT JOIN batch_owners o ON o.owner = open.owner
WHERE open.nth <= ?2
ORDER BY open.nth, COALESCE(o.turn, 0), open.owner LIMIT ?2
