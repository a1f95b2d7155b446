-- Named queries both stores run, written once in PostgreSQL's syntax; SQLite runs them as translated by
-- jobloom.store.sql (casts dropped, a list passed as an array read with json_each, no row locks). A query
-- whose SQL really differs is in store/<dialect>/sql instead, once per dialect.

-- row: ClaimRow
-- A job a worker just claimed: ``run_at`` is when it became due (the wait is its start less this), ``meta``
-- JSON text that carries the enqueuer's trace context when tracing is on.
--   id: int, binding: str, payload: str, attempt: int, max_attempts: int, timeout: float | None
--   delivery: str, run_id: str | None, node: str | None, run_at: float, meta: str | None

-- row: ExpiredRow
-- A job ``expire_due`` ended: what its event needs, and whether jobs wait for it.
--   id: int, binding: str, attempt: int, dependants: bool, parent_id: int | None = None

-- row: HeartbeatRow
-- An attempt whose lease a heartbeat renewed.
--   id: int, attempt: int, cancel_requested: bool

-- fragment: job_columns
-- a job as the API reads it (JobRow): {job_columns} in a query, {job_columns j} with each column as j.column
id, binding, state, payload, attempt, max_attempts, priority, run_at,
unique_key, concurrency_key, delivery, result, error, created_at, started_at, finished_at,
cancel_requested, run_id, node, tags, meta, progress, retries_from, parent_id

-- row: UniqueRow
-- The newest job with a unique key.
--   id: int, state: str, unique_until: float | None

-- name: find_unique
-- returns: UniqueRow
SELECT id, state, unique_until FROM jobloom_jobs
WHERE binding = :binding AND unique_key = :unique_key
ORDER BY id DESC LIMIT 1

-- row: DebouncedRow
-- The newest job of a debounce key that is still scheduled and never started.
--   id: int, run_at: float, created_at: float

-- name: find_debounced
-- returns: DebouncedRow
-- The job enqueues of a debounce key collapse into: scheduled and never started (a retry's backoff or a
-- snooze is scheduled too, but has started), the newest if a window ended unpromoted. Locked: a
-- promotion that got there first leaves nothing to collapse into (the row no longer matches).
SELECT id, run_at, created_at FROM jobloom_jobs
WHERE binding = :binding AND debounce_key = :debounce_key AND state = 'scheduled' AND attempt = 0
ORDER BY id DESC LIMIT 1
FOR UPDATE

-- name: debounce_job
-- A debounced enqueue collapsed into its key's job: the latest payload, and the window moved on.
UPDATE jobloom_jobs SET payload = :payload, run_at = :run_at, concurrency_key = :concurrency_key,
                        expires_at = :expires_at
WHERE id = :id AND state = 'scheduled' AND attempt = 0

-- row: JobRow
-- A job as the API reads it.
--   id: int, binding: str, state: str, payload: str, attempt: int, max_attempts: int, priority: int
--   run_at: float, unique_key: str | None, concurrency_key: str | None, delivery: str, result: str | None
--   error: str | None, created_at: float, started_at: float | None, finished_at: float | None
--   cancel_requested: bool, run_id: str | None, node: str | None, tags: str | None, meta: str | None
--   progress: str | None, retries_from: int, parent_id: int | None

-- name: get_job
-- returns: JobRow
SELECT {job_columns}
FROM jobloom_jobs WHERE id = :id

-- row: StateCountRow
-- Jobs per binding and state.
--   binding: str, state: str, n: int

-- name: count_by_state
-- returns: StateCountRow
-- Every job, succeeded and skipped ones included: reads the whole history.
SELECT binding, state, count(*) AS n FROM jobloom_jobs GROUP BY binding, state

-- row: AttemptRow
-- One attempt of a job (``jobloom_attempts``).
--   job_id: int, attempt: int, worker: str | None, started_at: float, finished_at: float | None
--   outcome: str | None, error: str | None, traceback: str | None, reported_outcome: str | None
--   reported_at: float | None

-- name: get_attempts
-- returns: AttemptRow
SELECT job_id, attempt, worker, started_at, finished_at, outcome, error, traceback, reported_outcome, reported_at
FROM jobloom_attempts WHERE job_id = :id ORDER BY attempt

-- row: PolicyRow
-- A binding's stored limits, overrides and token bucket.
--   concurrency: int | None, key_concurrency: int | None, rate: float | None, burst: float | None
--   priority_aging: float | None, backoff: str | None, overrides: str | None, tokens: float | None
--   tokens_at: float | None, paused: bool, batch_size: int | None, batch_wait: float | None
--   key_rules: str | None = None, turn_key: str | None = None, turn_used: int | None = None
--   key_full_at: float | None = None

-- name: get_binding
-- returns: PolicyRow
SELECT concurrency, key_concurrency, rate, burst, priority_aging, backoff, overrides, tokens, tokens_at, paused,
       batch_size, batch_wait, key_rules, turn_key, turn_used, key_full_at
FROM jobloom_bindings WHERE binding = :binding

-- row: BindingRow
-- A binding's row, as ``jobloom limits`` lists it.
--   binding: str, concurrency: int | None, key_concurrency: int, rate: float | None, burst: float | None
--   priority_aging: float | None, backoff: str | None, overrides: str | None, tokens: float | None
--   tokens_at: float | None, paused: bool, batch_size: int | None, batch_wait: float | None
--   paused_at: float | None, keyed: bool | None, key_rules: str | None = None

-- name: list_bindings
-- returns: BindingRow
SELECT binding, concurrency, key_concurrency, rate, burst, priority_aging, backoff, overrides, tokens, tokens_at, paused,
       batch_size, batch_wait, paused_at, keyed, key_rules
FROM jobloom_bindings ORDER BY binding

-- name: try_lock_binding
-- returns: PolicyRow
-- The binding's row lock for a rate-limited dispatch, unless another transaction holds it: that one is
-- dispatching the binding now and takes the token due; no row then, and this dispatch waits for the next.
-- (SQLite: one writer at a time holds the store, so the binding is this transaction's already.)
SELECT concurrency, key_concurrency, rate, burst, priority_aging, backoff, overrides, tokens, tokens_at, paused,
       batch_size, batch_wait, key_rules, turn_key, turn_used, key_full_at
FROM jobloom_bindings WHERE binding = :binding
FOR UPDATE SKIP LOCKED

-- name: upsert_binding
-- By the app that performs the binding: its limits, its retention (JSON) that every pruner uses, and
-- its enqueue rules (JSON) that an app without its performer applies.
INSERT INTO jobloom_bindings (binding, concurrency, key_concurrency, rate, burst, priority_aging, backoff,
                              retention, batch_size, batch_wait, keyed, rules, key_rules, updated_at)
VALUES (:binding, :concurrency, :key_concurrency, :rate, :burst, :priority_aging, :backoff, :retention,
        :batch_size, :batch_wait, :keyed, :rules, :key_rules, :now)
ON CONFLICT (binding) DO UPDATE SET
    batch_size = excluded.batch_size, batch_wait = excluded.batch_wait, keyed = excluded.keyed,
    concurrency = excluded.concurrency, key_concurrency = excluded.key_concurrency, rate = excluded.rate,
    burst = excluded.burst, priority_aging = excluded.priority_aging, backoff = excluded.backoff,
    retention = excluded.retention, rules = excluded.rules, key_rules = excluded.key_rules,
    updated_at = excluded.updated_at

-- name: set_overrides
INSERT INTO jobloom_bindings (binding, overrides, updated_at) VALUES (:binding, :overrides, :now)
ON CONFLICT (binding) DO UPDATE SET overrides = excluded.overrides, updated_at = excluded.updated_at

-- name: save_bucket
UPDATE jobloom_bindings SET tokens = :tokens, tokens_at = :tokens_at WHERE binding = :binding

-- row: CountRow
-- A count.
--   n: int

-- name: count_running
-- returns: CountRow
SELECT count(*) AS n FROM jobloom_jobs WHERE binding = :binding AND state = 'running'

-- row: KeyCountRow
-- Running jobs per concurrency key.
--   concurrency_key: str, n: int

-- name: running_by_key
-- returns: KeyCountRow
SELECT concurrency_key, count(*) AS n FROM jobloom_jobs
WHERE binding = :binding AND state = 'running' AND concurrency_key IS NOT NULL
GROUP BY concurrency_key

-- name: count_running_batches
-- returns: CountRow
SELECT count(DISTINCT batch) AS n FROM jobloom_jobs WHERE binding = :binding AND state = 'running'

-- row: RunningRow
-- A running job, locked to report or reap its attempt (a retry due at or past ``expires_at`` ends the job
-- expired; ``parent_id`` is the caller whose ``self.call`` made the job: woken when it ends).
--   id: int, binding: str, state: str, attempt: int, retries_from: int, max_attempts: int, delivery: str
--   cancel_requested: bool, lease_owner: str | None, started_at: float | None, run_id: str | None
--   node: str | None, timeout: float | None, claim_hash: str | None, dependants: bool
--   expires_at: float | None = None, parent_id: int | None = None

-- name: expired_leases
-- returns: RunningRow
-- Candidates only, read without locks: the reaper locks their runs first, then the jobs (lock_expired).
SELECT id, binding, state, attempt, retries_from, max_attempts, delivery, cancel_requested, lease_owner,
       started_at, run_id, node, timeout, claim_hash, dependants, expires_at, parent_id
FROM jobloom_jobs WHERE state = 'running' AND lease_expires < :cutoff ORDER BY lease_expires LIMIT :limit

-- name: lock_expired
-- returns: RunningRow
-- The reaper's candidates, locked in id order and checked again; one that another transaction holds
-- is skipped (never waited for): it is being reported, or is reaped later.
SELECT id, binding, state, attempt, retries_from, max_attempts, delivery, cancel_requested, lease_owner,
       started_at, run_id, node, timeout, claim_hash, dependants, expires_at, parent_id
FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) AND state = 'running' AND lease_expires < :cutoff
ORDER BY id
FOR UPDATE SKIP LOCKED

-- name: finish_attempt
-- An attempt's outcome, applied only while the job still runs the claim that reported it: this attempt,
-- this lease owner, the claim's own started_at (a claim lost with the server gives its attempt number
-- back, and the re-run's claim takes it again). The statements that end an attempt are fenced so.
UPDATE jobloom_jobs
SET state = :state, result = :result, error = :error, run_at = :run_at, finished_at = :finished_at,
    lease_owner = NULL, lease_expires = NULL, retries_from = retries_from + :refund,
    payload = coalesce(:payload::text, payload)
WHERE id = :id AND attempt = :attempt AND state = 'running' AND lease_owner = :worker AND started_at = :started_at

-- name: snooze_attempt
-- The performer raised Snooze: scheduled again without spending the attempt (retries_from moves on,
-- as for a suspension), and one more snooze counted against the performer's max_snoozes.
UPDATE jobloom_jobs
SET state = 'scheduled', run_at = :run_at, lease_owner = NULL, lease_expires = NULL,
    retries_from = retries_from + 1, snoozes = snoozes + 1
WHERE id = :id AND attempt = :attempt AND state = 'running' AND lease_owner = :worker AND started_at = :started_at

-- row: SnoozeRow
-- How many times a job was snoozed.
--   id: int, snoozes: int

-- name: get_snoozes
-- returns: SnoozeRow
SELECT id, snoozes FROM jobloom_jobs WHERE id = ANY(:ids::bigint[])

-- name: insert_attempt
INSERT INTO jobloom_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error, traceback)
VALUES (:job_id, :attempt, :worker, :started_at, :finished_at, :outcome, :error, :traceback)
ON CONFLICT (job_id, attempt) DO NOTHING

-- row: PriorAttemptRow
-- What an attempt's history row says.
--   worker: str | None, outcome: str | None, started_at: float | None

-- name: get_attempt
-- returns: PriorAttemptRow
SELECT worker, outcome, started_at FROM jobloom_attempts WHERE job_id = :job_id AND attempt = :attempt

-- name: record_stale_report
UPDATE jobloom_attempts SET reported_outcome = :outcome, reported_at = :at
WHERE job_id = :job_id AND attempt = :attempt

-- name: release
UPDATE jobloom_jobs
SET state = 'queued', attempt = attempt - 1, lease_owner = NULL, lease_expires = NULL, started_at = NULL
WHERE id = :id AND attempt = :attempt AND state = 'running' AND lease_owner = :worker

-- row: BindingOfRow
-- The binding of a job.
--   binding: str

-- name: fail_attempt
-- returns: BindingOfRow
-- The last resort for an attempt whose outcome cannot be applied: failed, with jobloom's own error text.
UPDATE jobloom_jobs
SET state = 'failed', error = :error, finished_at = :now, lease_owner = NULL, lease_expires = NULL
WHERE id = :id AND attempt = :attempt AND state = 'running' AND lease_owner = :worker AND started_at = :started_at
RETURNING binding

-- row: MomentRow
-- The earliest moment of something (None: there is none).
--   at: float | None

-- name: next_scheduled
-- returns: MomentRow
SELECT min(run_at) AS at FROM jobloom_jobs WHERE state = 'scheduled'

-- name: next_expiry
-- returns: MomentRow
-- The earliest expiry of a job not started (jobloom_jobs_expiring): the cycle that ends it is due then.
SELECT min(expires_at) AS at FROM jobloom_jobs
WHERE expires_at IS NOT NULL AND (state = 'scheduled' OR state = 'queued')

-- name: next_lease_expiry
-- returns: MomentRow
SELECT min(lease_expires) AS at FROM jobloom_jobs WHERE state = 'running'

-- row: JobRunRow
-- The run a job belongs to (None: none).
--   run_id: str | None

-- name: job_run
-- returns: JobRunRow
SELECT run_id FROM jobloom_jobs WHERE id = :id

-- row: LockedJobRow
-- A job locked to cancel or retry it.
--   id: int, state: str, attempt: int, binding: str, run_id: str | None, node: str | None, dependants: bool
--   parent_id: int | None = None

-- name: lock_job
-- returns: LockedJobRow
SELECT id, state, attempt, binding, run_id, node, dependants, parent_id FROM jobloom_jobs WHERE id = :id FOR UPDATE

-- name: cancel_now
UPDATE jobloom_jobs SET state = 'cancelled', finished_at = :now, error = :reason
WHERE id = :id AND state IN ('waiting', 'scheduled', 'queued')

-- name: request_cancel
UPDATE jobloom_jobs SET cancel_requested = true WHERE id = :id AND state = 'running'

-- name: retry_now
UPDATE jobloom_jobs
SET state = 'queued', retries_from = attempt, run_at = :now, error = NULL, result = NULL, finished_at = NULL,
    cancel_requested = false
WHERE id = :id AND state IN ('failed', 'stalled', 'cancelled')

-- name: insert_event
INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration)
VALUES (:at, :job_id, :binding, :kind, :attempt, :duration)

-- name: insert_counted_event
-- n events of one kind for one binding at one moment, in one row that names no job: duration is their
-- run times added up, top the longest, bucket the histogram bucket they share (NULL: no run time).
INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration, n, top, bucket)
VALUES (:at, NULL, :binding, :kind, 0, :duration, :n, :top, :bucket)

-- row: HeldRow
-- A job a worker holds (``running_of_worker``).
--   id: int, attempt: int, binding: str

-- name: running_of_worker
-- returns: HeldRow
SELECT id, attempt, binding FROM jobloom_jobs WHERE state = 'running' AND lease_owner = :worker

-- row: CandidateRow
-- A runnable job, as dispatch weighs it.
--   id: int, priority: int, run_at: float, concurrency_key: str | None

-- name: candidates_by_age
-- returns: CandidateRow
-- PostgreSQL: `(state || '')` matches the by-age index, and only it (see jobloom_jobs_queued_age in
-- postgres/sql/0027_baseline.sql).
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_queued_age}
WHERE binding = :binding AND {sqlite: state}{postgres: (state || '')} = 'queued'
  AND (concurrency_key IS NULL OR concurrency_key <> ALL(:full_keys::text[]))
ORDER BY run_at, id LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: candidates_by_priority
-- returns: CandidateRow
-- SKIP LOCKED: workers claiming from one unlimited binding at once take disjoint jobs.
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_queued}
WHERE binding = :binding AND state = 'queued'
  AND (concurrency_key IS NULL OR concurrency_key <> ALL(:full_keys::text[]))
ORDER BY priority DESC, run_at, id LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: lock_running
-- returns: RunningRow
-- Locks are taken in id order everywhere a transaction locks several jobs, so they cannot deadlock.
SELECT id, binding, state, attempt, retries_from, max_attempts, delivery, cancel_requested, lease_owner,
       started_at, run_id, node, timeout, claim_hash, dependants, expires_at, parent_id
FROM jobloom_jobs WHERE id = ANY(:ids::bigint[])
{postgres: ORDER BY id}
FOR UPDATE

-- row: AttemptKeyRow
-- A running attempt asked to stop.
--   id: int, attempt: int

-- name: cancel_requests
-- returns: AttemptKeyRow
SELECT id, attempt FROM jobloom_jobs
WHERE state = 'running' AND lease_owner = :worker AND cancel_requested{sqlite:  = 1}

-- name: insert_job
INSERT INTO jobloom_jobs (binding, state, payload, priority, run_at, max_attempts, delivery, timeout,
                          unique_key, unique_until, concurrency_key, created_at, run_id, node, tags, meta,
                          debounce_key, expires_at)
VALUES (:binding, :state, :payload, :priority, :run_at, :max_attempts, :delivery, :timeout,
        :unique_key, :unique_until, :concurrency_key, :created_at, :run_id, :node, :tags, :meta,
        :debounce_key, :expires_at)
{postgres: RETURNING id}
