-- Named queries of the HTTP API's tokens (jobloom_tokens).

-- row: TokenRow
-- An API token (its secret only as a hash).
--   name: str, prefix: str, secret_hash: str, scopes: str, created_at: float, revoked_at: float | None
--   bindings: str | None

-- name: list_tokens
-- returns: TokenRow
SELECT name, prefix, secret_hash, scopes, created_at, revoked_at, bindings FROM jobloom_tokens ORDER BY name

-- name: get_token
-- returns: TokenRow
SELECT name, prefix, secret_hash, scopes, created_at, revoked_at, bindings FROM jobloom_tokens WHERE name = :name

-- name: delete_revoked_token
DELETE FROM jobloom_tokens WHERE name = :name AND revoked_at IS NOT NULL

-- name: insert_token
INSERT INTO jobloom_tokens (name, prefix, secret_hash, scopes, created_at, bindings)
VALUES (:name, :prefix, :secret_hash, :scopes, :now, :bindings)

-- name: revoke_token
UPDATE jobloom_tokens SET revoked_at = :now WHERE name = :name AND revoked_at IS NULL

