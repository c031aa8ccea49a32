UPDATE batches SET cancelled_ms = COALESCE(cancelled_ms, $3)
WHERE id = $1 AND owner = $2 AND NOT staged
