DELETE FROM session_pins WHERE expires_ms <= ?1
