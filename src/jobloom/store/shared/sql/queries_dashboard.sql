-- Named queries of the dashboard's overview, each served by an index of active jobs.

-- row: RunJobRow
-- A job of a run.
--   id: int, node: str | None, state: str, result: str | None, error: str | None, attempt: int, binding: str

-- name: run_top_jobs
-- returns: RunJobRow
-- A run's page: the jobs of the flow's own nodes (not fan-out children ``name:i`` nor spawned ones
-- ``name/x``), through the run's (run_id, node) index.
SELECT id, node, state, result, error, attempt, binding FROM jobloom_jobs
WHERE run_id = :run_id::text AND strpos(node, ':') = 0 AND strpos(node, '/') = 0
ORDER BY id

-- row: ChildCountRow
-- How many children of a run's node ``top`` are in ``state``.
--   top: str, state: str, n: int

-- name: run_child_counts
-- returns: ChildCountRow
-- A run's page: its children per node and state (``top`` the node that made them), read from the run's
-- index and the rows' states, without their payloads or results.
SELECT CASE WHEN strpos(node, ':') > 0 AND (strpos(node, '/') = 0 OR strpos(node, ':') < strpos(node, '/'))
            THEN substr(node, 1, strpos(node, ':') - 1) ELSE substr(node, 1, strpos(node, '/') - 1) END AS top,
       state, count(*) AS n
FROM jobloom_jobs
WHERE run_id = :run_id::text AND (strpos(node, ':') > 0 OR strpos(node, '/') > 0)
GROUP BY 1, 2

-- name: oldest_queued
-- returns: MomentRow
-- When a binding's oldest queued job became due (its queue latency is now minus this): the first entry
-- of the queued jobs' index by age.
SELECT run_at AS at FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_queued_age}
WHERE binding = :binding AND state = 'queued'
ORDER BY run_at, id LIMIT 1

-- row: BindingMomentRow
-- A binding and the earliest moment of something about it.
--   binding: str, at: float

-- name: overdue_scheduled
-- returns: BindingMomentRow
-- Per binding, the earliest due moment of scheduled jobs that are due and not queued yet (promotion
-- moves them within a second or so): the scheduled jobs' index up to now.
SELECT binding, min(run_at) AS at FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_scheduled}
WHERE state = 'scheduled' AND run_at <= :now
GROUP BY binding
