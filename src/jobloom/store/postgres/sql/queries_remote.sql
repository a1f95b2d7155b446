-- Named queries of the pull protocol (jobloom.engine.remote): a remote attempt's claim secret is kept
-- only as its SHA-256 (claim_hash), and every heartbeat and report of the attempt must present it.

-- name: heartbeat_remote
-- returns: RemoteBeatRow
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
