-- Named queries of flows (runs) and durable steps (PostgreSQL).
-- lock_run takes the run's row lock: every change to one run (fan-in, cancel, resume) is serialized.
-- Locks are taken in the order the coordinator's module documents: runs (by id), then jobs (by id).

-- name: node_states
-- returns: NodeStateRow
-- The states of a run's top-level nodes (those of its graph), found by the run's unique (run_id, node).
SELECT node, state FROM jobloom_jobs
WHERE run_id = :run_id
  AND node = ANY(ARRAY(SELECT json_object_keys(graph::json) FROM jobloom_runs WHERE id = :run_id))

-- name: child_active
-- returns: NodeRow
-- One active fan-out child of a node, if any: a range of the index of active run jobs (node names
-- compared byte by byte, :lo = 'name:' and :hi = 'name;'), newest children first.
SELECT node FROM jobloom_jobs
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued', 'running')
  AND node COLLATE "C" > :lo::text COLLATE "C" AND node COLLATE "C" < :hi::text COLLATE "C"
ORDER BY node COLLATE "C" DESC LIMIT 1

-- name: run_child_active
-- returns: NodeRow
-- One active fan-out child of a run, if any (asked once no top-level node of the run is active).
SELECT node FROM jobloom_jobs
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued', 'running') AND (strpos(node, ':') > 0 OR strpos(node, '/') > 0)
ORDER BY node COLLATE "C" LIMIT 1

-- name: insert_children
-- returns: NewChildRow
-- Fan-out children, a chunk in one statement (:rows: a JSON array of insert_job rows); a child that
-- exists (the same run and node) is left as it is. Returns the children inserted now.
INSERT INTO jobloom_jobs (binding, state, payload, priority, run_at, max_attempts, delivery, timeout,
                          unique_key, unique_until, concurrency_key, created_at, run_id, node, tags, meta)
SELECT binding, state, payload, priority, run_at, max_attempts, delivery, timeout,
       unique_key, unique_until, concurrency_key, created_at, run_id, node, tags, meta
FROM json_to_recordset(:rows::json) AS r(
    binding text, state text, payload text, priority int, run_at float8, max_attempts int, delivery text,
    timeout float8, unique_key text, unique_until float8, concurrency_key text, created_at float8,
    run_id text, node text, tags text, meta text)
ON CONFLICT DO NOTHING
RETURNING id, binding

-- name: fail_unstarted
-- returns: MovedRow
-- The run's jobs are locked in id order (the lock order), then changed.
WITH j AS (
    SELECT id FROM jobloom_jobs WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued')
      AND NOT (state = 'scheduled' AND binding = 'jobloom.subflow') ORDER BY id FOR UPDATE
)
UPDATE jobloom_jobs AS t SET state = 'failed', finished_at = :now, error = :reason FROM j WHERE t.id = j.id AND t.state IN ('waiting', 'scheduled', 'queued')
RETURNING t.id, t.binding, t.attempt

-- name: cancel_unstarted
-- returns: MovedRow
-- The run's jobs are locked in id order (the lock order), then changed.
WITH j AS (
    SELECT id FROM jobloom_jobs WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued')
      AND NOT (state = 'scheduled' AND binding = 'jobloom.subflow') ORDER BY id FOR UPDATE
)
UPDATE jobloom_jobs AS t SET state = 'cancelled', finished_at = :now, error = :reason FROM j WHERE t.id = j.id AND t.state IN ('waiting', 'scheduled', 'queued')
RETURNING t.id, t.binding, t.attempt

-- name: cancel_running_of_run
-- The run's jobs are locked in id order (the lock order), then changed.
WITH j AS (
    SELECT id FROM jobloom_jobs WHERE run_id = :run_id AND state = 'running' ORDER BY id FOR UPDATE
)
UPDATE jobloom_jobs AS t SET cancel_requested = true FROM j WHERE t.id = j.id AND t.state = 'running'
