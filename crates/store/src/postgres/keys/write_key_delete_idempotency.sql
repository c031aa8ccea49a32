DELETE FROM idempotency WHERE at_ms < $1
