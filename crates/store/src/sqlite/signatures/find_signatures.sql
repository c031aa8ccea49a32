SELECT signature FROM call_signatures WHERE key = ?1 AND expires_ms > ?2
