-- Named queries of flows (runs) and durable steps.

-- row: NodeRow
-- A node of a run.
--   node: str | None

-- row: NewChildRow
-- A child job just inserted.
--   id: int, binding: str

-- name: insert_run
INSERT INTO jobloom_runs (id, flow, state, input, graph, deadline, parent_job_id, depth, created_at,
                          deadline_seconds, spec)
VALUES (:id, :flow, 'running', :input, :graph, :deadline, :parent_job_id, :depth, :now, :deadline_seconds, :spec)
ON CONFLICT (id) DO NOTHING

-- row: RunRow
-- A flow run (``jobloom_runs``).
--   id: str, flow: str, state: str, input: str, graph: str, deadline: float | None
--   parent_job_id: int | None, depth: int, error: str | None, created_at: float, finished_at: float | None
--   deadline_seconds: float | None, spec: str | None

-- name: get_run
-- returns: RunRow
SELECT id, flow, state, input, graph, deadline, parent_job_id, depth, error, created_at, finished_at,
       deadline_seconds, spec
FROM jobloom_runs WHERE id = :id

-- name: lock_run
-- returns: RunRow
SELECT id, flow, state, input, graph, deadline, parent_job_id, depth, error, created_at, finished_at,
       deadline_seconds, spec
FROM jobloom_runs WHERE id = :id
FOR UPDATE

-- row: RunIdRow
-- A run's id.
--   id: str

-- name: lock_run_skip
-- returns: RunIdRow
-- lock_run, skipping a run that another transaction holds (no row: held, or no such run).
SELECT id FROM jobloom_runs WHERE id = :id
FOR UPDATE SKIP LOCKED

-- name: list_runs
-- returns: RunRow
SELECT id, flow, state, input, graph, deadline, parent_job_id, depth, error, created_at, finished_at,
       deadline_seconds, spec
FROM jobloom_runs
WHERE (:flow::text IS NULL OR flow = :flow::text) AND (:state::text IS NULL OR state = :state::text)
  AND (:before::text IS NULL OR (created_at, id) < (SELECT created_at, id FROM jobloom_runs WHERE id = :before::text))
ORDER BY created_at DESC, id DESC LIMIT :limit

-- name: set_run_state
UPDATE jobloom_runs SET state = :state, error = :error, finished_at = :finished_at WHERE id = :id

-- name: run_jobs
-- returns: RunJobRow
SELECT id, node, state, result, error, attempt, binding FROM jobloom_jobs WHERE run_id = :run_id ORDER BY id

-- row: NodeResultRow
-- A node's state, result and error.
--   node: str | None, state: str, result: str | None, error: str | None

-- name: node_results
-- returns: NodeResultRow
SELECT node, state, result, error FROM jobloom_jobs
WHERE run_id = :run_id AND node = ANY(:nodes::text[])

-- row: ChildRow
-- A fan-out child's end.
--   node: str | None, state: str, result: str | None, error: str | None

-- name: children_of
-- returns: ChildRow
-- A fan-out's children in the order they were made (item order), without what they spawned.
SELECT node, state, result, error FROM jobloom_jobs
WHERE run_id = :run_id AND node LIKE :prefix ESCAPE '\' AND strpos(node, '/') = 0
ORDER BY id

-- name: queue_waiting
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE run_id = :run_id AND node = :node AND state = 'waiting'
RETURNING id, binding, attempt

-- name: skip_waiting
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'skipped', finished_at = :now, error = :reason
WHERE run_id = :run_id AND node = :node AND state = 'waiting'
RETURNING id, binding, attempt

-- name: wake_suspended
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE id = :id AND state = 'scheduled'
RETURNING id, binding, attempt

-- name: wake_node
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE run_id = :run_id AND node = :node AND state = 'scheduled'
RETURNING id, binding, attempt

-- name: reset_node
UPDATE jobloom_jobs
SET state = :state, retries_from = attempt, run_at = :now, error = NULL, result = NULL, finished_at = NULL,
    cancel_requested = false
WHERE id = :id AND state IN ('failed', 'stalled', 'cancelled', 'skipped')

-- name: set_run_deadline
UPDATE jobloom_runs SET deadline = :deadline WHERE id = :id

-- row: RunStateRow
-- A run's id and state.
--   id: str, state: str

-- name: descendant_runs
-- returns: RunStateRow
-- The runs of a run's sub-flows at any depth ('<id>/<node>...') (read without a lock: the caller
-- locks them with lock_run, in id order).
SELECT id, state FROM jobloom_runs
WHERE id COLLATE "C" > :lo::text COLLATE "C" AND id COLLATE "C" < :hi::text COLLATE "C"
ORDER BY id COLLATE "C"

-- row: NodeStateRow
-- A node's state.
--   node: str | None, state: str

-- name: spawned_of
-- returns: NodeStateRow
-- What a node spawned (at any depth): its jobs '<node>/...' (:lo = '<node>/', :hi = '<node>0').
SELECT node, state FROM jobloom_jobs
WHERE run_id = :run_id AND strpos(node, '/') > 0
  AND node COLLATE "C" > :lo::text COLLATE "C" AND node COLLATE "C" < :hi::text COLLATE "C"
ORDER BY node COLLATE "C"

-- name: hold_node
-- A node's attempt succeeded while what it spawned still runs: its result is kept and it waits.
UPDATE jobloom_jobs
SET state = 'waiting', result = :result, error = NULL, finished_at = NULL, lease_owner = NULL,
    lease_expires = NULL, payload = coalesce(:payload, payload)
WHERE id = :id AND attempt = :attempt AND state = 'running' AND lease_owner = :worker AND started_at = :started_at

-- name: settle_node
-- returns: MovedRow
-- The last of a waiting node's spawned children finished: the node succeeds, or fails if one failed.
UPDATE jobloom_jobs SET state = :state, error = :error, finished_at = :now
WHERE run_id = :run_id AND node = :node AND state = 'waiting'
RETURNING id, binding, attempt

-- name: runs_past_deadline
-- returns: RunIdRow
SELECT id FROM jobloom_runs WHERE state = 'running' AND deadline IS NOT NULL AND deadline < :now
ORDER BY deadline LIMIT :limit

-- name: next_run_deadline
-- returns: MomentRow
SELECT min(deadline) AS at FROM jobloom_runs WHERE state = 'running' AND deadline IS NOT NULL

-- row: StepRow
-- A durable step's recorded result.
--   name: str, result: str | None

-- name: get_steps
-- returns: StepRow
SELECT name, result FROM jobloom_steps WHERE job_id = :job_id

-- name: save_step
-- A durable step, recorded only while its attempt's own claim runs (fenced as finish_attempt is).
INSERT INTO jobloom_steps (job_id, name, result, created_at)
SELECT :job_id::bigint, :name::text, :result::text, :now::double precision
WHERE EXISTS (SELECT 1 FROM jobloom_jobs WHERE id = :job_id AND attempt = :attempt AND state = 'running'
              AND lease_owner = :worker AND started_at = :started_at)
ON CONFLICT (job_id, name) DO NOTHING

-- row: SignalRow
-- An event sent to a job.
--   data: str | None

-- name: get_signal
-- returns: SignalRow
SELECT data FROM jobloom_signals WHERE job_id = :job_id AND name = :name

-- name: put_signal
INSERT INTO jobloom_signals (job_id, name, data, created_at) VALUES (:job_id, :name, :data, :now)
ON CONFLICT (job_id, name) DO UPDATE SET data = excluded.data, created_at = excluded.created_at

-- name: wake_waiting_for
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'queued', run_at = :now
WHERE id = :id AND state = 'scheduled'
  AND EXISTS (SELECT 1 FROM jobloom_steps WHERE job_id = :id AND name = :step)
RETURNING id, binding, attempt

-- name: prune_history_steps
DELETE FROM jobloom_steps WHERE job_id = ANY(:ids)

-- name: prune_history_signals
DELETE FROM jobloom_signals WHERE job_id = ANY(:ids)

-- row: RunsJobRow
-- A job of one of several runs.
--   id: int, node: str | None, state: str, result: str | None, error: str | None, attempt: int, binding: str
--   run_id: str | None

-- name: runs_jobs
-- returns: RunsJobRow
-- The node jobs of many runs at once (a listing of runs), each with its run's id.
SELECT id, node, state, result, error, attempt, binding, run_id FROM jobloom_jobs WHERE run_id = ANY(:run_ids::text[])
{sqlite: AND run_id IS NOT NULL}
