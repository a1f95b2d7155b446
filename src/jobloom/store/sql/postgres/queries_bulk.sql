-- Set-based twins of hot statements that the engine runs once per row ("executemany"): the driver
-- sends one of these instead, with each column as an array, so a batch of N rows is one statement.
-- A twin is named after its statement with "__bulk" and takes the same parameter names.

-- name: insert_event__bulk
INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration)
SELECT * FROM unnest(:at::float8[], :job_id::bigint[], :binding::text[], :kind::text[], :attempt::int[],
                     :duration::float8[])

-- name: insert_attempt__bulk
INSERT INTO jobloom_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error, traceback)
SELECT * FROM unnest(:job_id::bigint[], :attempt::int[], :worker::text[], :started_at::float8[],
                     :finished_at::float8[], :outcome::text[], :error::text[], :traceback::text[])
ON CONFLICT (job_id, attempt) DO NOTHING

-- name: finish_attempt__bulk
UPDATE jobloom_jobs AS j
SET state = u.state, result = u.result, error = u.error, run_at = u.run_at, finished_at = u.finished_at,
    lease_owner = NULL, lease_expires = NULL, retries_from = j.retries_from + u.refund,
    payload = coalesce(u.payload, j.payload)
FROM unnest(:id::bigint[], :attempt::int[], :state::text[], :result::text[], :error::text[], :run_at::float8[],
            :finished_at::float8[], :refund::int[], :payload::text[])
     AS u(id, attempt, state, result, error, run_at, finished_at, refund, payload)
WHERE j.id = u.id AND j.attempt = u.attempt AND j.state = 'running'
