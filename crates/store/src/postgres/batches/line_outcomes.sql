SELECT l.idx, l.custom_id, l.state, l.status, l.result, l.done_ms FROM batch_lines l
JOIN batches b ON b.id = l.batch
WHERE l.batch = $1 AND b.owner = $2 AND NOT b.staged AND l.state >= 2 ORDER BY l.idx
