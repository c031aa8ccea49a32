DELETE FROM batch_owners o WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.owner = o.owner)
