DELETE FROM audit WHERE at_ms < $1
