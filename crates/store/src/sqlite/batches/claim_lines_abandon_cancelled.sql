UPDATE batch_lines SET state = ?1, done_ms = ?2 WHERE state = 1 AND lease_until < ?2
AND batch IN (SELECT id FROM batches WHERE cancelled_ms IS NOT NULL)
