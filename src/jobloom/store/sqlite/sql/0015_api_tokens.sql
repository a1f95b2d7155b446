-- Tokens of the HTTP API (`jobloom tokens create|list|revoke`). A token reads `jlt_<prefix>_<secret>`:
-- the prefix finds the row, and only the SHA-256 of the secret is kept, compared in constant time.
-- A revoked token keeps its row (revoked_at set) so that `tokens list` still shows it.
CREATE TABLE jobloom_tokens (
    name TEXT PRIMARY KEY,
    prefix TEXT NOT NULL UNIQUE,
    secret_hash TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at REAL
);
