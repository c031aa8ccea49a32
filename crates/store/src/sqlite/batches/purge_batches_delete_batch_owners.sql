DELETE FROM batch_owners WHERE owner NOT IN (SELECT owner FROM batches)
