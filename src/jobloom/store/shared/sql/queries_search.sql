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

-- fragment: search_filters
-- the filters every search query takes, each NULL when not given
  AND (:states::text[] IS NULL OR j.state = ANY(:states::text[]))
  AND (:binding::text IS NULL OR j.binding = :binding::text)
  AND (:unique_key::text IS NULL OR j.unique_key = :unique_key::text)
  AND (:text::text IS NULL OR strpos(j.error, :text::text) > 0)
  AND (:payload_text::text IS NULL OR strpos(j.payload, :payload_text::text) > 0
       OR strpos(j.meta, :payload_text::text) > 0)
  AND (:created_after::float8 IS NULL OR j.created_at >= :created_after::float8)
  AND (:created_before::float8 IS NULL OR j.created_at < :created_before::float8)
  AND (:tags::text[] IS NULL OR NOT EXISTS (
      SELECT 1 FROM {sqlite: json_each(:tags) t}{postgres: unnest(:tags::text[]) AS t(tag)} WHERE NOT EXISTS (
      SELECT 1 FROM jobloom_job_tags g WHERE g.tag = {sqlite: t.value}{postgres: t.tag} AND g.job_id = j.id)))

-- name: search_all
-- returns: JobRow
SELECT {job_columns j}
FROM jobloom_jobs j
WHERE j.id < :before::bigint
  AND j.id >= :floor::bigint
  {search_filters}
ORDER BY j.id DESC LIMIT :limit::bigint

-- name: search_tagged
-- returns: JobRow
-- SQLite's CROSS JOIN keeps the tag's rows as the outer loop.
SELECT {job_columns j}
FROM jobloom_job_tags g {sqlite: CROSS JOIN jobloom_jobs j}{postgres: JOIN jobloom_jobs j ON j.id = g.job_id}
WHERE {sqlite: g.job_id = j.id AND }g.tag = :tag::text AND g.job_id < :before::bigint
  {search_filters}
ORDER BY g.job_id DESC LIMIT :limit::bigint

-- name: search_unique
-- returns: JobRow
SELECT {job_columns j}
FROM jobloom_jobs j
WHERE j.binding = :binding::text AND j.unique_key = :unique_key::text AND j.id < :before::bigint
  {search_filters}
ORDER BY j.id DESC LIMIT :limit::bigint

-- name: search_counted
-- returns: JobRow
SELECT {job_columns j}
FROM jobloom_jobs j
WHERE {sqlite: (j.state = 'waiting' OR j.state = 'failed' OR j.state = 'stalled' OR j.state = 'cancelled')}{postgres: j.state IN ('waiting', 'failed', 'stalled', 'cancelled')}
  AND j.state = :state::text AND j.binding = :binding::text AND j.id < :before::bigint
  {search_filters}
ORDER BY j.id DESC LIMIT :limit::bigint

-- name: search_queued
-- returns: JobRow
SELECT {job_columns j}
FROM jobloom_jobs j
WHERE j.state = 'queued' AND j.binding = :binding::text AND j.id < :before::bigint
  {search_filters}
ORDER BY j.id DESC LIMIT :limit::bigint

-- name: search_scheduled
-- returns: JobRow
SELECT {job_columns j}
FROM jobloom_jobs j {sqlite: INDEXED BY jobloom_jobs_scheduled}
WHERE j.state = 'scheduled' AND j.id < :before::bigint
  {search_filters}
ORDER BY j.id DESC LIMIT :limit::bigint

-- name: search_running
-- returns: JobRow
SELECT {job_columns j}
FROM jobloom_jobs j {sqlite: INDEXED BY jobloom_jobs_running}
WHERE j.state = 'running' AND j.id < :before::bigint
  {search_filters}
ORDER BY j.id DESC LIMIT :limit::bigint

-- name: search_bindings_counted
-- returns: BindingOfRow
WITH RECURSIVE b(binding) AS (
    SELECT (SELECT binding FROM jobloom_jobs
            WHERE {sqlite: (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled')}{postgres: state IN ('waiting', 'failed', 'stalled', 'cancelled')}
              AND state = :state::text ORDER BY binding LIMIT 1)
    UNION ALL
    SELECT (SELECT binding FROM jobloom_jobs
            WHERE {sqlite: (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled')}{postgres: state IN ('waiting', 'failed', 'stalled', 'cancelled')}
              AND state = :state::text AND binding > b.binding ORDER BY binding LIMIT 1)
    FROM b WHERE b.binding IS NOT NULL
)
SELECT binding FROM b WHERE binding IS NOT NULL

-- name: search_bindings_queued
-- returns: BindingOfRow
WITH RECURSIVE b(binding) AS (
    SELECT (SELECT binding FROM jobloom_jobs WHERE state = 'queued' ORDER BY binding LIMIT 1)
    UNION ALL
    SELECT (SELECT binding FROM jobloom_jobs WHERE state = 'queued' AND binding > b.binding ORDER BY binding LIMIT 1)
    FROM b WHERE b.binding IS NOT NULL
)
SELECT binding FROM b WHERE binding IS NOT NULL

-- name: lock_jobs
-- returns: LockedJobRow
-- A chunk of a bulk action: its jobs, locked in id order (a job's run is not locked: retry takes no
-- run lock, and cancel goes job by job through coordinator.cancel, which keeps the lock order). SQLite
-- serializes writers: nothing to lock.
SELECT id, state, attempt, binding, run_id, node, dependants, parent_id FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) ORDER BY id FOR UPDATE

-- name: top_job_id
-- returns: CountRow
-- The newest job's id (the top of the primary key): where a search that reads by id begins.
SELECT coalesce(max(id), 0) AS n FROM jobloom_jobs

-- name: pick_deletable
-- returns: PruneRow
-- The finished jobs of a chunk of delete_many, locked (a person's retry cannot slip in before the delete).
-- SQLite never deletes the newest job: it would hand its id out again, and an id must name one job for
-- ever (as in retention).
SELECT id, run_id FROM jobloom_jobs
WHERE id = ANY(:ids::bigint[]) AND {sqlite: state}{postgres: (state || '')} IN ('succeeded', 'failed', 'stalled', 'cancelled', 'skipped', 'expired')
  {sqlite: AND id < (SELECT max(id) FROM jobloom_jobs)}
ORDER BY id FOR UPDATE
