SELECT COALESCE(MAX(turn), 0) FROM batch_owners
