SELECT fingerprint, key_id FROM idempotency WHERE scope = ?1 AND key = ?2
