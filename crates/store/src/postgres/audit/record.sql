INSERT INTO audit (at_ms, actor, action, target, outcome) VALUES ($1, $2, $3, $4, $5)
