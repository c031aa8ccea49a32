INSERT INTO batch_owners (owner, turn)
SELECT t.owner, (SELECT COALESCE(MAX(turn), 0) FROM batch_owners) + t.n
FROM UNNEST($1::TEXT[]) WITH ORDINALITY AS t(owner, n)
ON CONFLICT (owner) DO UPDATE SET turn = EXCLUDED.turn
