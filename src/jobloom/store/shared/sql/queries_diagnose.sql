-- Named queries of the diagnosis of a job that is not running (app/diagnose.py). Each reads an index
-- of active jobs only, so that its cost does not grow with the history.

-- row: JobIdRow
-- A job's id.
--   id: int

-- name: running_ids
-- returns: JobIdRow
-- Running jobs of a binding (of one concurrency key, if :key is given), oldest first.
SELECT id FROM jobloom_jobs
WHERE binding = :binding AND state = 'running' AND (:key::text IS NULL OR concurrency_key = :key::text)
ORDER BY id LIMIT :limit

-- row: NodeJobRow
-- A job of a run by its node (what a diagnosis links to).
--   id: int, node: str | None, state: str

-- name: node_jobs
-- returns: NodeJobRow
-- The jobs of some nodes of a run.
SELECT id, node, state FROM jobloom_jobs
WHERE run_id = :run_id AND node = ANY(:nodes::text[])

-- row: JobTimingRow
-- A job's debounce key and expiry (``job_timing``).
--   debounce_key: str | None, expires_at: float | None

-- name: job_timing
-- returns: JobTimingRow
-- A job's debounce key and expiry, for the diagnosis (not part of the job's record).
SELECT debounce_key, expires_at FROM jobloom_jobs WHERE id = :id

-- name: peek_by_priority
-- returns: CandidateRow
-- The queued jobs dispatch would weigh first (candidates_by_priority; of one concurrency key if :key is given), read without locking them.
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_queued}
WHERE binding = :binding AND state = 'queued'
  AND (concurrency_key IS NULL OR concurrency_key <> ALL(:full_keys::text[]))
  AND (:key::text IS NULL OR concurrency_key = :key::text)
ORDER BY priority DESC, run_at, id LIMIT :limit

-- name: peek_by_age
-- returns: CandidateRow
-- The oldest queued jobs (candidates_by_age), read without locking them; PostgreSQL: `(state || '')`
-- matches the by-age index, and only it (see jobloom_jobs_queued_age in postgres/sql/0027_baseline.sql).
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_queued_age}
WHERE binding = :binding AND {sqlite: state}{postgres: (state || '')} = 'queued'
  AND (concurrency_key IS NULL OR concurrency_key <> ALL(:full_keys::text[]))
  AND (:key::text IS NULL OR concurrency_key = :key::text)
ORDER BY run_at, id LIMIT :limit
