-- Named queries of the pull protocol (jobloom.engine.remote): a remote attempt's claim secret is kept
-- only as its SHA-256 (claim_hash), and every heartbeat and report of the attempt must present it.

-- name: set_claim
-- A remote claim: the attempt's claim hash, and its lease no later than its deadline (started_at + timeout).
UPDATE jobloom_jobs
SET claim_hash = :claim_hash,
    lease_expires = CASE WHEN timeout IS NULL THEN lease_expires ELSE least(lease_expires, started_at + timeout) END
WHERE id = :id AND attempt = :attempt AND state = 'running'

-- name: heartbeat_remote
-- Fenced by attempt and by claim: only the (id, attempt, claim hash) triples that are still the jobs'
-- current, running attempts of this worker, claimed with that secret, are renewed; never past the
-- attempt's deadline (started_at + timeout), whatever the heartbeats say.
WITH held AS (
    SELECT id FROM jobloom_jobs
    WHERE id = ANY(:ids::bigint[])
      AND (id, attempt, claim_hash) IN (SELECT * FROM unnest(:ids::bigint[], :attempts::int[], :hashes::text[]))
      AND lease_owner = :worker AND (state || '') = 'running'  -- by id (see claim)
    ORDER BY id
    FOR UPDATE
)
UPDATE jobloom_jobs AS j
SET lease_expires = CASE WHEN j.timeout IS NULL THEN :lease_expires::double precision
                         ELSE least(:lease_expires::double precision, j.started_at + j.timeout) END
FROM held WHERE j.id = held.id
RETURNING j.id, j.attempt, j.cancel_requested, j.binding, j.lease_expires

-- name: remote_attempts
-- The running attempts of jobs a heartbeat did not renew: was it a wrong claim secret?
SELECT id, attempt, binding, lease_owner, claim_hash FROM jobloom_jobs
WHERE id = ANY(:ids::bigint[]) AND state = 'running'
