DELETE FROM kept_objects WHERE expires_ms IS NOT NULL AND expires_ms <= $1
