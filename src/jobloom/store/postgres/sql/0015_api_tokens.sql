-- Tokens of the HTTP API (`jobloom tokens create|list|revoke`). A token reads `jlt_<prefix>_<secret>`:
-- the prefix finds the row, and only the SHA-256 of the secret is kept, compared in constant time.
-- A revoked token keeps its row (revoked_at set) so that `tokens list` still shows it.
CREATE TABLE jobloom_tokens (
    name text PRIMARY KEY,
    prefix text NOT NULL UNIQUE,
    secret_hash text NOT NULL,
    scopes text NOT NULL,
    created_at double precision NOT NULL,
    revoked_at double precision
);
