-- The request log by operation (the admin plane's MCP tool calls are
-- `operation = 'mcp'`), newest first, without a scan of every row.
CREATE INDEX ledger_operation_id ON ledger (operation, id);
