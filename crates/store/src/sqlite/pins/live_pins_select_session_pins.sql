SELECT pool, session, lane, expires_ms, switches FROM (
SELECT *, ROW_NUMBER() OVER (PARTITION BY pool ORDER BY expires_ms DESC) AS rank
FROM session_pins) WHERE rank <= ?1 ORDER BY pool, expires_ms DESC
