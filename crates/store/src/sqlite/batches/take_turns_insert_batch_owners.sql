INSERT INTO batch_owners (owner, turn) VALUES (?1, ?2)
ON CONFLICT (owner) DO UPDATE SET turn = excluded.turn
