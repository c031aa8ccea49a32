INSERT INTO groups (name, record) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET record = excluded.record
