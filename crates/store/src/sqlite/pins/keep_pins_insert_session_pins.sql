INSERT INTO session_pins (pool, session, lane, expires_ms, switches) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (pool, session) DO UPDATE SET lane = excluded.lane,
expires_ms = excluded.expires_ms, switches = excluded.switches
