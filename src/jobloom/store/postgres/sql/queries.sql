-- Named queries of the PostgreSQL store. Parameters are written :name (the driver turns them into
-- psycopg placeholders); lists are passed as arrays and read with = ANY / <> ALL.
-- Serialization: a row lock per limited binding (lock_binding), FOR UPDATE SKIP LOCKED to claim,
-- an advisory lock per unique key; statements run at READ COMMITTED, so each one sees what the
-- previous holder of a lock committed.

-- name: lock_unique
-- Racing enqueues of one unique key queue up here, so only the first inserts. The schema is part of
-- the key so that apps sharing a database do not wait on each other (text cannot hold chr(0), so
-- chr(31) separates; a hash collision only makes two keys wait on each other, never merges them).
SELECT pg_advisory_xact_lock(hashtext(current_schema() || chr(31) || :binding::text),
                             hashtext(:unique_key::text))

-- name: lock_debounce
-- Racing enqueues of one debounce key queue up here (as lock_unique does for unique keys; 'debounce'
-- keeps the two kinds of key apart), so each finds what the one before it made or moved.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || chr(31) || 'debounce' || chr(31) || :binding::text),
                             hashtext(:debounce_key::text))

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
WHERE state IN ('waiting', 'failed', 'stalled', 'cancelled') GROUP BY binding, state

-- name: lock_binding
-- returns: PolicyRow
-- The binding's row lock serializes its dispatches. The row is created if missing; when another
-- transaction creates it at the same moment, the upsert waits for it and then takes the lock.
WITH locked AS (
    SELECT concurrency, key_concurrency, rate, burst, priority_aging, backoff, overrides, tokens, tokens_at, paused,
       batch_size, batch_wait, key_rules, turn_key, turn_used, key_full_at
    FROM jobloom_bindings WHERE binding = :binding
    FOR UPDATE
), created AS (
    INSERT INTO jobloom_bindings (binding, updated_at)
    SELECT :binding::text, extract(epoch FROM clock_timestamp())::double precision
    WHERE NOT EXISTS (SELECT 1 FROM locked)
    ON CONFLICT (binding) DO UPDATE SET binding = excluded.binding
    RETURNING concurrency, key_concurrency, rate, burst, priority_aging, backoff, overrides, tokens, tokens_at, paused,
       batch_size, batch_wait, key_rules, turn_key, turn_used, key_full_at
)
SELECT * FROM locked
UNION ALL
SELECT * FROM created

-- name: claim
-- returns: ClaimRow
-- The ids are candidates this transaction has just read FOR UPDATE (PostgreSQL rechecks that they
-- are still queued when it locks them), so they are queued until it commits. The statement names
-- no state: a condition on state would let the planner reach the ids through a partial index of
-- queued jobs and scan it whole instead of looking them up in the primary key.
UPDATE jobloom_jobs
SET state = 'running', attempt = attempt + 1, lease_owner = :worker, lease_expires = :lease_expires,
    started_at = :now, cancel_requested = false
WHERE id = ANY(:ids::bigint[]) AND (expires_at IS NULL OR expires_at > :now)
RETURNING id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta

-- name: claim__with_events
-- claim, and the claimed jobs' started events in the same statement (so that a worker's cycle can send
-- it with its COMMIT): one row per binding, naming its job when it holds one event, counting them
-- otherwise (as count_events counts them).
WITH c AS (
    UPDATE jobloom_jobs
    SET state = 'running', attempt = attempt + 1, lease_owner = :worker, lease_expires = :lease_expires,
        started_at = :now, cancel_requested = false
    WHERE id = ANY(:ids::bigint[]) AND (expires_at IS NULL OR expires_at > :now)
    RETURNING id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta
), e AS (
    INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration, n, top, bucket)
    SELECT :now, CASE WHEN count(*) = 1 THEN min(id) END, binding, 'started',
           CASE WHEN count(*) = 1 THEN min(attempt) ELSE 0 END, NULL, count(*), NULL, NULL
    FROM c GROUP BY binding
)
SELECT id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta FROM c

-- fragment: claim_direct_update
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
    started_at = :now, cancel_requested = false
WHERE j.id = :id AND j.binding = :binding AND j.state = 'queued' AND j.concurrency_key IS NULL
  AND (j.expires_at IS NULL OR j.expires_at > :now)
  AND EXISTS (SELECT 1 FROM jobloom_bindings AS b
              WHERE b.binding = :binding AND b.concurrency IS NULL AND b.rate IS NULL AND NOT b.paused
                AND b.batch_size IS NULL AND b.overrides IS NULL AND b.key_rules IS NULL)
  AND NOT EXISTS (SELECT 1 FROM jobloom_jobs AS o
                  WHERE o.binding = :binding AND o.state = 'queued' AND o.id <> j.id)
RETURNING id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta

-- name: claim_direct
-- returns: ClaimRow
-- claim_direct_update, alone.
{claim_direct_update}

-- name: claim_direct__with_events
-- claim_direct, and the job's started event in the same statement (sent with hold_dispatch and COMMIT:
-- one round trip).
WITH c AS (
    {claim_direct_update}
), e AS (
    INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration, n, top, bucket)
    SELECT :now, id, binding, 'started', attempt, NULL, 1, NULL, NULL FROM c
)
SELECT id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta FROM c

-- name: claim_direct__asynchronous
-- claim_direct__with_events where the store was opened with asynchronous_claims: a claimed at-least-once
-- job's transaction commits without waiting for its flush (synchronous_commit off for this transaction
-- only). A crash may lose the claim: the job runs again, and the lost claim's attempt number is taken
-- again by the re-run's claim, whose writes are fenced by their claim (lease owner and started_at), so
-- the first run's late report is stale. An at-most-once claim is committed durably as ever.
WITH c AS (
    {claim_direct_update}
), e AS (
    INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration, n, top, bucket)
    SELECT :now, id, binding, 'started', attempt, NULL, 1, NULL, NULL FROM c
), s AS (
    SELECT set_config('synchronous_commit', 'off', true) AS v FROM c WHERE c.delivery = 'at_least_once'
)
SELECT id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta FROM c
WHERE (SELECT count(v) FROM s) >= 0  -- reads s, so that its set_config runs

-- name: claim_batch
-- returns: ClaimRow
-- claim, for a batch performer's binding: the jobs claimed together are one batch, named by :batch.
UPDATE jobloom_jobs
SET state = 'running', attempt = attempt + 1, lease_owner = :worker, lease_expires = :lease_expires,
    started_at = :now, cancel_requested = false, batch = :batch
WHERE id = ANY(:ids::bigint[]) AND (expires_at IS NULL OR expires_at > :now)
RETURNING id, binding, payload, attempt, max_attempts, timeout, delivery, run_id, node, run_at, meta

-- name: expire_due
-- returns: ExpiredRow
-- Jobs not started by their expiry end expired (run in every cycle before dispatch; claim checks the
-- expiry too, so a job committed past it meanwhile is never claimed). Flow nodes have no expiry.
WITH due AS (
    SELECT id FROM jobloom_jobs WHERE expires_at <= :now AND (state = 'scheduled' OR state = 'queued')
    ORDER BY expires_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE jobloom_jobs AS j SET state = 'expired', finished_at = :now, error = 'expired: not started by its expiry'
FROM due WHERE j.id = due.id AND (j.state = 'scheduled' OR j.state = 'queued')
RETURNING j.id, j.binding, j.attempt, j.dependants, j.parent_id

-- name: promote_due
-- returns: MovedRow
WITH due AS (
    SELECT id FROM jobloom_jobs WHERE state = 'scheduled' AND run_at <= :now
    ORDER BY run_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE jobloom_jobs AS j SET state = 'queued' FROM due WHERE j.id = due.id
RETURNING j.id, j.binding, j.attempt

-- name: heartbeat
-- returns: HeartbeatRow
-- Fenced by attempt: only the (id, attempt) pairs that are still the jobs' current, running attempts of
-- this worker are renewed.
WITH held AS (
    SELECT id FROM jobloom_jobs
    WHERE id = ANY(:ids::bigint[]) AND (id, attempt) IN (SELECT * FROM unnest(:ids::bigint[], :attempts::int[]))
      AND lease_owner = :worker AND (state || '') = 'running'  -- by id (see claim)
    ORDER BY id
    FOR UPDATE
)
UPDATE jobloom_jobs AS j SET lease_expires = :lease_expires FROM held WHERE j.id = held.id
RETURNING j.id, j.attempt, j.cancel_requested

-- name: insert_job_tags
-- One row per tag of a job enqueued with tags (search by tag walks this table's primary key).
INSERT INTO jobloom_job_tags (tag, job_id) VALUES (:tag, :job_id) ON CONFLICT DO NOTHING
