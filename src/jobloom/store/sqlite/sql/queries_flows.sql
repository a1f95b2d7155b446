-- Named queries of flows (runs) and durable steps.

-- name: node_states
-- returns: NodeStateRow
SELECT node, state FROM jobloom_jobs
WHERE run_id = :run_id
  AND node IN (SELECT key FROM json_each((SELECT graph FROM jobloom_runs WHERE id = :run_id)))

-- name: child_active
-- returns: NodeRow
SELECT node FROM jobloom_jobs
WHERE run_id = :run_id AND (state = 'waiting' OR state = 'scheduled' OR state = 'queued' OR state = 'running') AND node > :lo AND node < :hi
ORDER BY node DESC LIMIT 1

-- name: run_child_active
-- returns: NodeRow
SELECT node FROM jobloom_jobs
WHERE run_id = :run_id AND (state = 'waiting' OR state = 'scheduled' OR state = 'queued' OR state = 'running') AND (instr(node, ':') > 0 OR instr(node, '/') > 0)
LIMIT 1

-- name: insert_children
-- returns: NewChildRow
INSERT INTO jobloom_jobs (binding, state, payload, priority, run_at, max_attempts, delivery, timeout,
                          unique_key, unique_until, concurrency_key, created_at, run_id, node, tags, meta)
SELECT json_extract(value, '$.binding'), json_extract(value, '$.state'), json_extract(value, '$.payload'),
       json_extract(value, '$.priority'), json_extract(value, '$.run_at'), json_extract(value, '$.max_attempts'),
       json_extract(value, '$.delivery'), json_extract(value, '$.timeout'), json_extract(value, '$.unique_key'),
       json_extract(value, '$.unique_until'), json_extract(value, '$.concurrency_key'), json_extract(value, '$.created_at'),
       json_extract(value, '$.run_id'), json_extract(value, '$.node'), json_extract(value, '$.tags'),
       json_extract(value, '$.meta')
FROM json_each(:rows) WHERE true
ON CONFLICT DO NOTHING
RETURNING id, binding

-- name: fail_unstarted
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'failed', finished_at = :now, error = :reason
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued')
  AND NOT (state = 'scheduled' AND binding = 'jobloom.subflow')
RETURNING id, binding, attempt

-- name: cancel_unstarted
-- returns: MovedRow
UPDATE jobloom_jobs SET state = 'cancelled', finished_at = :now, error = :reason
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued')
  AND NOT (state = 'scheduled' AND binding = 'jobloom.subflow')
RETURNING id, binding, attempt

-- name: cancel_running_of_run
UPDATE jobloom_jobs SET cancel_requested = 1 WHERE run_id = :run_id AND state = 'running'
