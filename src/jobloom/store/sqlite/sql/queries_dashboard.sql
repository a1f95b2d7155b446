-- Named queries of the dashboard's overview, each served by an index of active jobs.

-- name: run_children_page
-- returns: RunJobRow
-- One page of a node's children (``top:i`` or ``top/x``: the run's index, its names checked), in the
-- order they were made.
SELECT id, node, state, result, error, attempt, binding FROM jobloom_jobs
WHERE run_id = :run_id AND substr(node, 1, length(:top) + 1) IN (:top || ':', :top || '/')
ORDER BY id LIMIT :limit OFFSET :offset
