-- Named queries of the pull protocol (jobloom.engine.remote): a remote attempt's claim secret is kept
-- only as its SHA-256 (claim_hash), and every heartbeat and report of the attempt must present it.

-- name: remote_attempts
-- The running attempts of jobs a heartbeat did not renew: was it a wrong claim secret?
SELECT id, attempt, binding, lease_owner, claim_hash FROM jobloom_jobs
WHERE id = ANY(:ids::bigint[]) AND state = 'running'

-- name: set_claim
-- A remote claim: the attempt's claim hash, and its lease no later than its deadline (started_at + timeout).
UPDATE jobloom_jobs
SET claim_hash = :claim_hash,
    lease_expires = CASE WHEN timeout IS NULL THEN lease_expires ELSE {sqlite: MIN}{postgres: least}(lease_expires, started_at + timeout) END
WHERE id = :id AND attempt = :attempt AND state = 'running'
