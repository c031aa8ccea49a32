SELECT id, at_ms, actor, action, target, outcome FROM audit
WHERE ($1::BIGINT IS NULL OR id < $1) ORDER BY id DESC LIMIT $2
