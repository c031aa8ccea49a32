INSERT INTO idempotency (scope, key, fingerprint, key_id, at_ms) VALUES ($1, $2, $3, $4, $5)
