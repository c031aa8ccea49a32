DELETE FROM call_signatures WHERE expires_ms <= $1
