-- Named queries of the diagnosis of a job that is not running (app/diagnose.py, PostgreSQL). Each
-- reads an index of active jobs only, so that its cost does not grow with the history; none locks.

-- name: peek_by_priority
-- The queued jobs dispatch would weigh first (candidates_by_priority; of one concurrency key if :key is given), read without locking them.
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs
WHERE binding = :binding AND state = 'queued'
  AND (concurrency_key IS NULL OR concurrency_key <> ALL(:full_keys::text[]))
  AND (:key::text IS NULL OR concurrency_key = :key::text)
ORDER BY priority DESC, run_at, id LIMIT :limit

-- name: peek_by_age
-- The oldest queued jobs (candidates_by_age), read without locking them; `(state || '')` matches the
-- by-age index, and only it (see 0005_dispatch_indexes).
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs
WHERE binding = :binding AND (state || '') = 'queued'
  AND (concurrency_key IS NULL OR concurrency_key <> ALL(:full_keys::text[]))
  AND (:key::text IS NULL OR concurrency_key = :key::text)
ORDER BY run_at, id LIMIT :limit

-- name: running_ids
-- Running jobs of a binding (of one concurrency key, if :key is given), oldest first.
SELECT id FROM jobloom_jobs
WHERE binding = :binding AND state = 'running' AND (:key::text IS NULL OR concurrency_key = :key::text)
ORDER BY id LIMIT :limit

-- name: node_jobs
-- The jobs of some nodes of a run.
SELECT id, node, state FROM jobloom_jobs
WHERE run_id = :run_id AND node = ANY(:nodes::text[])

-- name: active_in_range
-- Active jobs of a run whose node lies between :lo and :hi (a fan-out's children, or what a node
-- spawned), from the index of active run jobs (node names compared byte by byte).
SELECT id, node, state FROM jobloom_jobs
WHERE run_id = :run_id AND state IN ('waiting', 'scheduled', 'queued', 'running')
  AND node COLLATE "C" > :lo::text COLLATE "C" AND node COLLATE "C" < :hi::text COLLATE "C"
ORDER BY node COLLATE "C" LIMIT :limit

-- name: job_timing
-- A job's debounce key and expiry, for the diagnosis (not part of the job's record).
SELECT debounce_key, expires_at FROM jobloom_jobs WHERE id = :id
