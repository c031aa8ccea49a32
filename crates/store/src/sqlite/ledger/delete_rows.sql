DELETE FROM ledger WHERE id = ?1
