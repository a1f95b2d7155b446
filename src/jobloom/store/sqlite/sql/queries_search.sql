-- Named queries of job search (App.list_jobs and the bulk actions): a page of jobs, newest first, with
-- the ids below :before (the cursor). Every query takes the same filters (:states, :binding,
-- :unique_key, :text, :payload_text, :created_after, :created_before, :tags, each NULL when not given) and differs only
-- in the index that drives it, chosen by app/search.py:
--   search_tagged     the first tag's rows of jobloom_job_tags (its primary key, walked from the cursor down)
--   search_unique     a binding's unique key (jobloom_jobs_unique)
--   search_counted    one waiting, failed, stalled or cancelled state of one binding (jobloom_jobs_counted)
--   search_queued     the queued jobs of one binding (jobloom_jobs_queued)
--   search_scheduled  scheduled jobs (jobloom_jobs_scheduled); search_running: running jobs (jobloom_jobs_running)
--   search_all        the primary key from the cursor down to :floor (no index filter applies: it reads until the
--                     page is full or it reaches :floor, SCAN_BUDGET ids below the cursor or the newest job)
-- A state-driven query names its state as the partial index's predicate does, so the planner can prove
-- the index covers it; search_bindings_* list the bindings present in such an index (a loose index scan,
-- one probe per binding) for a search of that state without a binding.

-- name: search_all
SELECT j.id, j.binding, j.state, j.payload, j.attempt, j.max_attempts, j.priority, j.run_at, j.unique_key,
       j.concurrency_key, j.delivery, j.result, j.error, j.created_at, j.started_at, j.finished_at,
       j.cancel_requested, j.run_id, j.node, j.tags, j.meta, j.progress, j.retries_from
FROM jobloom_jobs j
WHERE j.id < :before
  AND j.id >= :floor
  AND (:states IS NULL OR j.state IN (SELECT value FROM json_each(:states)))
  AND (:binding IS NULL OR j.binding = :binding)
  AND (:unique_key IS NULL OR j.unique_key = :unique_key)
  AND (:text IS NULL OR instr(j.error, :text) > 0)
  AND (:payload_text IS NULL OR instr(j.payload, :payload_text) > 0 OR instr(j.meta, :payload_text) > 0)
  AND (:created_after IS NULL OR j.created_at >= :created_after)
  AND (:created_before IS NULL OR j.created_at < :created_before)
  AND (:tags IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(:tags) t WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = t.value AND g.job_id = j.id)))
ORDER BY j.id DESC LIMIT :limit

-- name: search_tagged
SELECT j.id, j.binding, j.state, j.payload, j.attempt, j.max_attempts, j.priority, j.run_at, j.unique_key,
       j.concurrency_key, j.delivery, j.result, j.error, j.created_at, j.started_at, j.finished_at,
       j.cancel_requested, j.run_id, j.node, j.tags, j.meta, j.progress, j.retries_from
FROM jobloom_job_tags g CROSS JOIN jobloom_jobs j
WHERE g.job_id = j.id AND g.tag = :tag AND g.job_id < :before
  AND (:states IS NULL OR j.state IN (SELECT value FROM json_each(:states)))
  AND (:binding IS NULL OR j.binding = :binding)
  AND (:unique_key IS NULL OR j.unique_key = :unique_key)
  AND (:text IS NULL OR instr(j.error, :text) > 0)
  AND (:payload_text IS NULL OR instr(j.payload, :payload_text) > 0 OR instr(j.meta, :payload_text) > 0)
  AND (:created_after IS NULL OR j.created_at >= :created_after)
  AND (:created_before IS NULL OR j.created_at < :created_before)
  AND (:tags IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(:tags) t WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = t.value AND g.job_id = j.id)))
ORDER BY g.job_id DESC LIMIT :limit

-- name: search_unique
SELECT j.id, j.binding, j.state, j.payload, j.attempt, j.max_attempts, j.priority, j.run_at, j.unique_key,
       j.concurrency_key, j.delivery, j.result, j.error, j.created_at, j.started_at, j.finished_at,
       j.cancel_requested, j.run_id, j.node, j.tags, j.meta, j.progress, j.retries_from
FROM jobloom_jobs j
WHERE j.binding = :binding AND j.unique_key = :unique_key AND j.id < :before
  AND (:states IS NULL OR j.state IN (SELECT value FROM json_each(:states)))
  AND (:binding IS NULL OR j.binding = :binding)
  AND (:unique_key IS NULL OR j.unique_key = :unique_key)
  AND (:text IS NULL OR instr(j.error, :text) > 0)
  AND (:payload_text IS NULL OR instr(j.payload, :payload_text) > 0 OR instr(j.meta, :payload_text) > 0)
  AND (:created_after IS NULL OR j.created_at >= :created_after)
  AND (:created_before IS NULL OR j.created_at < :created_before)
  AND (:tags IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(:tags) t WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = t.value AND g.job_id = j.id)))
ORDER BY j.id DESC LIMIT :limit

-- name: search_counted
SELECT j.id, j.binding, j.state, j.payload, j.attempt, j.max_attempts, j.priority, j.run_at, j.unique_key,
       j.concurrency_key, j.delivery, j.result, j.error, j.created_at, j.started_at, j.finished_at,
       j.cancel_requested, j.run_id, j.node, j.tags, j.meta, j.progress, j.retries_from
FROM jobloom_jobs j
WHERE (j.state = 'waiting' OR j.state = 'failed' OR j.state = 'stalled' OR j.state = 'cancelled') AND j.state = :state AND j.binding = :binding AND j.id < :before
  AND (:states IS NULL OR j.state IN (SELECT value FROM json_each(:states)))
  AND (:binding IS NULL OR j.binding = :binding)
  AND (:unique_key IS NULL OR j.unique_key = :unique_key)
  AND (:text IS NULL OR instr(j.error, :text) > 0)
  AND (:payload_text IS NULL OR instr(j.payload, :payload_text) > 0 OR instr(j.meta, :payload_text) > 0)
  AND (:created_after IS NULL OR j.created_at >= :created_after)
  AND (:created_before IS NULL OR j.created_at < :created_before)
  AND (:tags IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(:tags) t WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = t.value AND g.job_id = j.id)))
ORDER BY j.id DESC LIMIT :limit

-- name: search_queued
SELECT j.id, j.binding, j.state, j.payload, j.attempt, j.max_attempts, j.priority, j.run_at, j.unique_key,
       j.concurrency_key, j.delivery, j.result, j.error, j.created_at, j.started_at, j.finished_at,
       j.cancel_requested, j.run_id, j.node, j.tags, j.meta, j.progress, j.retries_from
FROM jobloom_jobs j
WHERE j.state = 'queued' AND j.binding = :binding AND j.id < :before
  AND (:states IS NULL OR j.state IN (SELECT value FROM json_each(:states)))
  AND (:binding IS NULL OR j.binding = :binding)
  AND (:unique_key IS NULL OR j.unique_key = :unique_key)
  AND (:text IS NULL OR instr(j.error, :text) > 0)
  AND (:payload_text IS NULL OR instr(j.payload, :payload_text) > 0 OR instr(j.meta, :payload_text) > 0)
  AND (:created_after IS NULL OR j.created_at >= :created_after)
  AND (:created_before IS NULL OR j.created_at < :created_before)
  AND (:tags IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(:tags) t WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = t.value AND g.job_id = j.id)))
ORDER BY j.id DESC LIMIT :limit

-- name: search_scheduled
SELECT j.id, j.binding, j.state, j.payload, j.attempt, j.max_attempts, j.priority, j.run_at, j.unique_key,
       j.concurrency_key, j.delivery, j.result, j.error, j.created_at, j.started_at, j.finished_at,
       j.cancel_requested, j.run_id, j.node, j.tags, j.meta, j.progress, j.retries_from
FROM jobloom_jobs j INDEXED BY jobloom_jobs_scheduled
WHERE j.state = 'scheduled' AND j.id < :before
  AND (:states IS NULL OR j.state IN (SELECT value FROM json_each(:states)))
  AND (:binding IS NULL OR j.binding = :binding)
  AND (:unique_key IS NULL OR j.unique_key = :unique_key)
  AND (:text IS NULL OR instr(j.error, :text) > 0)
  AND (:payload_text IS NULL OR instr(j.payload, :payload_text) > 0 OR instr(j.meta, :payload_text) > 0)
  AND (:created_after IS NULL OR j.created_at >= :created_after)
  AND (:created_before IS NULL OR j.created_at < :created_before)
  AND (:tags IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(:tags) t WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = t.value AND g.job_id = j.id)))
ORDER BY j.id DESC LIMIT :limit

-- name: search_running
SELECT j.id, j.binding, j.state, j.payload, j.attempt, j.max_attempts, j.priority, j.run_at, j.unique_key,
       j.concurrency_key, j.delivery, j.result, j.error, j.created_at, j.started_at, j.finished_at,
       j.cancel_requested, j.run_id, j.node, j.tags, j.meta, j.progress, j.retries_from
FROM jobloom_jobs j INDEXED BY jobloom_jobs_running
WHERE j.state = 'running' AND j.id < :before
  AND (:states IS NULL OR j.state IN (SELECT value FROM json_each(:states)))
  AND (:binding IS NULL OR j.binding = :binding)
  AND (:unique_key IS NULL OR j.unique_key = :unique_key)
  AND (:text IS NULL OR instr(j.error, :text) > 0)
  AND (:payload_text IS NULL OR instr(j.payload, :payload_text) > 0 OR instr(j.meta, :payload_text) > 0)
  AND (:created_after IS NULL OR j.created_at >= :created_after)
  AND (:created_before IS NULL OR j.created_at < :created_before)
  AND (:tags IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(:tags) t WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = t.value AND g.job_id = j.id)))
ORDER BY j.id DESC LIMIT :limit

-- name: search_bindings_counted
WITH RECURSIVE b(binding) AS (
    SELECT (SELECT binding FROM jobloom_jobs WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled') AND state = :state ORDER BY binding LIMIT 1)
    UNION ALL
    SELECT (SELECT binding FROM jobloom_jobs
            WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled') AND state = :state AND binding > b.binding ORDER BY binding LIMIT 1)
    FROM b WHERE b.binding IS NOT NULL
)
SELECT binding FROM b WHERE binding IS NOT NULL

-- name: search_bindings_queued
WITH RECURSIVE b(binding) AS (
    SELECT (SELECT binding FROM jobloom_jobs WHERE state = 'queued' ORDER BY binding LIMIT 1)
    UNION ALL
    SELECT (SELECT binding FROM jobloom_jobs WHERE state = 'queued' AND binding > b.binding ORDER BY binding LIMIT 1)
    FROM b WHERE b.binding IS NOT NULL
)
SELECT binding FROM b WHERE binding IS NOT NULL

-- name: lock_jobs
-- A chunk of a bulk action: its jobs as they are now (SQLite serializes writers: nothing to lock).
SELECT id, state, attempt, binding, run_id, node, dependants FROM jobloom_jobs WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id

-- name: pick_deletable
-- The finished jobs of a chunk of delete_many. The newest job is never deleted: SQLite would hand its
-- id out again, and an id must name one job for ever (as in retention).
SELECT id, run_id FROM jobloom_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND state IN ('succeeded', 'failed', 'stalled', 'cancelled', 'skipped', 'expired')
  AND id < (SELECT max(id) FROM jobloom_jobs)
ORDER BY id

-- name: top_job_id
-- The newest job's id (the top of the primary key): where a search that reads by id begins.
SELECT coalesce(max(id), 0) AS n FROM jobloom_jobs

-- name: search_in_id_order
-- Nothing to do on SQLite: its planner walks the index in id order (PostgreSQL's needs telling).
SELECT 1
