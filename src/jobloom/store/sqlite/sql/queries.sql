-- Named queries of the SQLite store. Lists are passed as JSON arrays and read with json_each.

-- name: lock_unique
SELECT 1

-- name: lock_debounce
-- SQLite serializes writers: enqueues of one debounce key run one after the other already.
SELECT 1

-- name: count_by_state_indexed
-- returns: StateCountRow
-- Every state but succeeded and skipped (most of the history), each read from a partial index of
-- its own: the cost follows the jobs counted, not the history. Each branch names its state as the
-- index's predicate does, so that the planner can prove the index covers it.
SELECT binding, 'queued' AS state, count(*) AS n FROM jobloom_jobs WHERE state = 'queued' GROUP BY binding
UNION ALL
SELECT binding, 'scheduled', count(*) FROM jobloom_jobs WHERE state = 'scheduled' GROUP BY binding
UNION ALL
SELECT binding, 'running', count(*) FROM jobloom_jobs WHERE state = 'running' GROUP BY binding
UNION ALL
SELECT binding, state, count(*) FROM jobloom_jobs
WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled') GROUP BY binding, state

-- name: lock_binding
-- returns: PolicyRow
SELECT concurrency, key_concurrency, rate, burst, priority_aging, backoff, overrides, tokens, tokens_at, paused,
       batch_size, batch_wait, key_rules, turn_key, turn_used, key_full_at
FROM jobloom_bindings WHERE binding = :binding

-- name: claim
-- returns: ClaimRow
UPDATE jobloom_jobs
SET state = 'running', attempt = attempt + 1, lease_owner = :worker, lease_expires = :lease_expires,
    started_at = :now, cancel_requested = 0
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'queued'
  AND (expires_at IS NULL OR expires_at > :now)
RETURNING id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta

-- name: claim_direct
-- returns: ClaimRow
-- The one job a wake-up named (a single job enqueued), claimed by an idle worker without reading
-- candidates first, and only where dispatch would claim it: it is queued, not past its expiry, has no
-- concurrency key, is the only queued job of its binding (so first in any order, with or without
-- priority aging), and its binding's policy is one that dispatch applies without a lock or a read (no
-- concurrency, rate, key rules, batch, run-time overrides; not paused).
-- Otherwise nothing is claimed and the worker runs a whole cycle. A new column of jobloom_bindings
-- that limits dispatch must be added to the policy's test here (tests/conformance/test_claim_direct.py
-- fails until it is).
UPDATE jobloom_jobs AS j
SET state = 'running', attempt = attempt + 1, lease_owner = :worker, lease_expires = :lease_expires,
    started_at = :now, cancel_requested = 0
WHERE j.id = :id AND j.binding = :binding AND j.state = 'queued' AND j.concurrency_key IS NULL
  AND (j.expires_at IS NULL OR j.expires_at > :now)
  AND EXISTS (SELECT 1 FROM jobloom_bindings AS b
              WHERE b.binding = :binding AND b.concurrency IS NULL AND b.rate IS NULL AND b.paused = 0
                AND b.batch_size IS NULL AND b.overrides IS NULL AND b.key_rules IS NULL)
  AND NOT EXISTS (SELECT 1 FROM jobloom_jobs AS o INDEXED BY jobloom_jobs_queued
                  WHERE o.binding = :binding AND o.state = 'queued' AND o.id <> j.id)
RETURNING id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta

-- name: claim_batch
-- returns: ClaimRow
-- claim, for a batch performer's binding: the jobs claimed together are one batch, named by :batch.
UPDATE jobloom_jobs
SET state = 'running', attempt = attempt + 1, lease_owner = :worker, lease_expires = :lease_expires,
    started_at = :now, cancel_requested = 0, batch = :batch
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'queued'
  AND (expires_at IS NULL OR expires_at > :now)
RETURNING id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta

-- name: expire_due
-- returns: ExpiredRow
-- Jobs not started by their expiry end expired (run in every cycle before dispatch, so none past it
-- is claimed; claim checks the expiry too). Flow nodes have no expiry.
UPDATE jobloom_jobs SET state = 'expired', finished_at = :now,
    error = 'expired: not started by its expiry'
WHERE id IN (SELECT id FROM jobloom_jobs WHERE expires_at <= :now AND (state = 'scheduled' OR state = 'queued')
             ORDER BY expires_at LIMIT :limit)
RETURNING id, binding, attempt, dependants, parent_id

-- name: promote_due
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'queued'
WHERE id IN (SELECT id FROM jobloom_jobs WHERE state = 'scheduled' AND run_at <= :now ORDER BY run_at LIMIT :limit)
RETURNING id, binding, attempt

-- name: heartbeat
-- returns: HeartbeatRow
-- Fenced by attempt: only the (id, attempt) pairs (a JSON array of [id, attempt]) that are still the jobs'
-- current, running attempts of this worker are renewed.
UPDATE jobloom_jobs SET lease_expires = :lease_expires
WHERE id IN (SELECT value FROM json_each(:ids))
  AND (id, attempt) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(:pairs))
  AND lease_owner = :worker AND state = 'running'
RETURNING id, attempt, cancel_requested

-- name: insert_job_tags
-- One row per tag of a job enqueued with tags (search by tag walks this table's primary key).
INSERT OR IGNORE INTO jobloom_job_tags (tag, job_id) VALUES (:tag, :job_id)
