-- Tool-call signatures (Gemini's thoughtSignature) kept for callers whose
-- protocol drops them; each row lives until expires_ms.
CREATE TABLE call_signatures (
    key TEXT PRIMARY KEY NOT NULL,
    signature TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX call_signatures_expiry ON call_signatures (expires_ms);
