-- Named queries of the pull protocol (jobloom.engine.remote): a remote attempt's claim secret is kept
-- only as its SHA-256 (claim_hash), and every heartbeat and report of the attempt must present it.

-- name: heartbeat_remote
-- returns: RemoteBeatRow
-- Fenced by attempt and by claim: only the [id, attempt, claim hash] triples (a JSON array) that are still
-- the jobs' current, running attempts of this worker, claimed with that secret, are renewed; never past
-- the attempt's deadline (started_at + timeout), whatever the heartbeats say.
UPDATE jobloom_jobs
SET lease_expires = CASE WHEN timeout IS NULL THEN :lease_expires ELSE MIN(:lease_expires, started_at + timeout) END
WHERE id IN (SELECT value FROM json_each(:ids))
  AND (id, attempt, claim_hash) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
                                           json_extract(value, '$[2]') FROM json_each(:triples))
  AND lease_owner = :worker AND state = 'running'
RETURNING id, attempt, cancel_requested, binding, lease_expires
