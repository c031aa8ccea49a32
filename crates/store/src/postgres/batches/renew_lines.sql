UPDATE batch_lines SET lease_until = $2 WHERE state = 1 AND worker = $1
