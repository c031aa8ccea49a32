SELECT count(*) FROM ledger
