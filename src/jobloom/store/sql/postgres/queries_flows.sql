-- Named queries of flows (runs) and durable steps (PostgreSQL).
-- lock_run takes the run's row lock: every change to one run (fan-in, cancel, resume) is serialized.

-- name: insert_run
INSERT INTO jobloom_runs (id, flow, state, input, graph, deadline, parent_job_id, depth, created_at)
VALUES (:id, :flow, 'running', :input, :graph, :deadline, :parent_job_id, :depth, :now)
ON CONFLICT (id) DO NOTHING

-- name: get_run
SELECT id, flow, state, input, graph, deadline, parent_job_id, depth, error, created_at, finished_at
FROM jobloom_runs WHERE id = :id

-- name: lock_run
SELECT id, flow, state, input, graph, deadline, parent_job_id, depth, error, created_at, finished_at
FROM jobloom_runs WHERE id = :id
FOR UPDATE

-- name: list_runs
SELECT id, flow, state, input, graph, deadline, parent_job_id, depth, error, created_at, finished_at
FROM jobloom_runs
WHERE (:flow::text IS NULL OR flow = :flow::text) AND (:state::text IS NULL OR state = :state::text)
ORDER BY created_at DESC LIMIT :limit

-- name: set_run_state
UPDATE jobloom_runs SET state = :state, error = :error, finished_at = :finished_at WHERE id = :id

-- name: run_jobs
SELECT id, node, state, result, error, attempt, binding FROM jobloom_jobs WHERE run_id = :run_id

-- name: runs_jobs
-- The node jobs of many runs at once (a listing of runs), each with its run's id.
SELECT id, node, state, result, error, attempt, binding, run_id FROM jobloom_jobs WHERE run_id = ANY(:run_ids::text[])

-- name: node_results
SELECT node, state, result FROM jobloom_jobs
WHERE run_id = :run_id AND node = ANY(:nodes::text[])

-- name: children_of
SELECT node, state, result, error FROM jobloom_jobs
WHERE run_id = :run_id AND node LIKE :prefix ESCAPE '\'

-- name: queue_waiting
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE run_id = :run_id AND node = :node AND state = 'waiting'
RETURNING id, binding, attempt

-- name: skip_waiting
UPDATE jobloom_jobs SET state = 'skipped', finished_at = :now, error = :reason
WHERE run_id = :run_id AND node = :node AND state = 'waiting'
RETURNING id, binding, attempt

-- name: fail_unstarted
UPDATE jobloom_jobs SET state = 'failed', finished_at = :now, error = :reason
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued')
RETURNING id, binding, attempt

-- name: cancel_unstarted
UPDATE jobloom_jobs SET state = 'cancelled', finished_at = :now, error = :reason
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued')
RETURNING id, binding, attempt

-- name: cancel_running_of_run
UPDATE jobloom_jobs SET cancel_requested = true WHERE run_id = :run_id AND state = 'running'

-- name: wake_suspended
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE id = :id AND state = 'scheduled'
RETURNING id, binding, attempt

-- name: wake_node
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE run_id = :run_id AND node = :node AND state = 'scheduled'
RETURNING id, binding, attempt

-- name: reset_node
UPDATE jobloom_jobs
SET state = :state, retries_from = attempt, run_at = :now, error = NULL, result = NULL, finished_at = NULL,
    cancel_requested = false
WHERE id = :id AND state IN ('failed', 'stalled', 'cancelled', 'skipped')

-- name: runs_past_deadline
SELECT id FROM jobloom_runs WHERE state = 'running' AND deadline IS NOT NULL AND deadline < :now
ORDER BY deadline LIMIT :limit

-- name: next_run_deadline
SELECT min(deadline) FROM jobloom_runs WHERE state = 'running' AND deadline IS NOT NULL

-- name: get_steps
SELECT name, result FROM jobloom_steps WHERE job_id = :job_id

-- name: save_step
INSERT INTO jobloom_steps (job_id, name, result, created_at)
SELECT :job_id::bigint, :name::text, :result::text, :now::double precision
WHERE EXISTS (SELECT 1 FROM jobloom_jobs WHERE id = :job_id AND attempt = :attempt AND state = 'running')
ON CONFLICT (job_id, name) DO NOTHING

-- name: get_signal
SELECT data FROM jobloom_signals WHERE job_id = :job_id AND name = :name

-- name: put_signal
INSERT INTO jobloom_signals (job_id, name, data, created_at) VALUES (:job_id, :name, :data, :now)
ON CONFLICT (job_id, name) DO UPDATE SET data = excluded.data, created_at = excluded.created_at

-- name: wake_waiting_for
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE id = :id AND state = 'scheduled'
  AND EXISTS (SELECT 1 FROM jobloom_steps WHERE job_id = :id AND name = :step)
RETURNING id, binding, attempt

-- name: prune_history_steps
DELETE FROM jobloom_steps WHERE job_id = ANY(:ids)

-- name: prune_history_signals
DELETE FROM jobloom_signals WHERE job_id = ANY(:ids)

-- name: job_events
SELECT seq, at, job_id, binding, kind, attempt, duration FROM jobloom_events WHERE job_id = :job_id ORDER BY seq
