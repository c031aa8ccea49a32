SELECT version FROM switchyard_schema
