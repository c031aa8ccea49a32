-- Tool-call signatures (Gemini's thoughtSignature) kept for callers whose
-- protocol drops them; each row lives until expires_ms.
CREATE TABLE call_signatures (
    key TEXT PRIMARY KEY,
    signature TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);
CREATE INDEX call_signatures_expiry ON call_signatures (expires_ms);
