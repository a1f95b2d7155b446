-- Named queries of the pull protocol (jobloom.engine.remote): a remote attempt's claim secret is kept
-- only as its SHA-256 (claim_hash), and every heartbeat and report of the attempt must present it.

-- row: RemoteAttemptRow
-- A running attempt as the pull protocol checks a heartbeat that did not renew it.
--   id: int, attempt: int, binding: str, lease_owner: str | None, claim_hash: str | None

-- row: RemoteBeatRow
-- A remote attempt whose lease a heartbeat renewed (fenced by its claim).
--   id: int, attempt: int, cancel_requested: bool, binding: str, lease_expires: float

-- name: remote_attempts
-- returns: RemoteAttemptRow
-- The running attempts of jobs a heartbeat did not renew: was it a wrong claim secret?
SELECT id, attempt, binding, lease_owner, claim_hash FROM jobloom_jobs
WHERE id = ANY(:ids::bigint[]) AND state = 'running'

-- name: set_claim
-- A remote claim: the attempt's claim hash, and its lease no later than its deadline (started_at + timeout).
UPDATE jobloom_jobs
SET claim_hash = :claim_hash,
    lease_expires = CASE WHEN timeout IS NULL THEN lease_expires ELSE {sqlite: MIN}{postgres: least}(lease_expires, started_at + timeout) END
WHERE id = :id AND attempt = :attempt AND state = 'running'
