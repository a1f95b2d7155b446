-- Set-based forms of hot statements, named after the statement with "__": a "__bulk" twin runs instead
-- of a statement that the engine runs once per row ("executemany"), with the batch as one JSON array
-- of row objects in :rows (the same keys as the statement's parameters), so N rows are one statement.

-- name: insert_job__with_events
-- New jobs and their events (one outbox row per binding and kind) in one statement, and (with
-- :channel) a wake-up for the workers at commit. Ids come back in the rows' order: the rows are
-- inserted in "i" order and an INSERT returns its rows in the order it inserted them, which also
-- numbers them for their events. The wake-up names a lone job queued now (w).
WITH r AS (
    SELECT * FROM json_to_recordset(:rows::json) AS r(
        i int, binding text, state text, payload text, priority int, run_at float8, max_attempts int,
        delivery text, timeout float8, unique_key text, unique_until float8, concurrency_key text,
        created_at float8, run_id text, node text, tags text, meta text, event text, debounce_key text,
        expires_at float8)
), j AS (
    INSERT INTO jobloom_jobs (binding, state, payload, priority, run_at, max_attempts, delivery, timeout,
                              unique_key, unique_until, concurrency_key, created_at, run_id, node, tags, meta,
                          debounce_key, expires_at)
    SELECT binding, state, payload, priority, run_at, max_attempts, delivery, timeout,
           unique_key, unique_until, concurrency_key, created_at, run_id, node, tags, meta, debounce_key, expires_at
    FROM r ORDER BY i
    RETURNING id
), n AS (
    SELECT id, row_number() OVER () - 1 AS i FROM j
), e AS (
    -- one row per binding and kind: naming its job when it holds one event, counting them otherwise
    INSERT INTO jobloom_events (at, job_id, binding, kind, n)
    SELECT :at, CASE WHEN count(*) = 1 THEN min(n.id) END, r.binding, r.event, count(*)
    FROM n JOIN r USING (i) GROUP BY r.binding, r.event
), w AS (
    -- a lone job queued now without a concurrency key is named in the wake-up ("ID:BINDING"), so that
    -- an idle worker may claim it directly (claim_direct); any other insert only wakes
    SELECT count(*) = 1 AND bool_and(state = 'queued' AND concurrency_key IS NULL) AS one, min(binding) AS binding
    FROM r
)
SELECT id, (SELECT pg_notify(:channel::text, CASE WHEN w.one THEN n.id || ':' || w.binding ELSE '' END)
            WHERE :channel::text IS NOT NULL)
FROM n, w ORDER BY i

-- name: insert_event__bulk
INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration)
SELECT at, job_id, binding, kind, attempt, duration
FROM json_to_recordset(:rows::json)
     AS r(at float8, job_id bigint, binding text, kind text, attempt int, duration float8)

-- name: insert_counted_event__bulk
INSERT INTO jobloom_events (at, job_id, binding, kind, attempt, duration, n, top, bucket)
SELECT at, NULL, binding, kind, 0, duration, n, top, bucket
FROM json_to_recordset(:rows::json)
     AS r(at float8, binding text, kind text, duration float8, n int, top float8, bucket int)

-- name: insert_attempt__bulk
INSERT INTO jobloom_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error, traceback)
SELECT job_id, attempt, worker, started_at, finished_at, outcome, error, traceback
FROM json_to_recordset(:rows::json)
     AS r(job_id bigint, attempt int, worker text, started_at float8, finished_at float8, outcome text,
          error text, traceback text)
ON CONFLICT (job_id, attempt) DO NOTHING

-- name: finish_attempt__bulk
-- The rows are found by id (`id = ANY(...)`: the primary key, whatever the statistics say), never
-- through the partial index of running jobs, whose dead entries pile up during a drain.
WITH u AS MATERIALIZED (
    SELECT * FROM json_to_recordset(:rows::json)
         AS u(id bigint, attempt int, worker text, started_at float8, state text, result text, error text,
              run_at float8, finished_at float8, refund int, payload text)
)
UPDATE jobloom_jobs AS j
SET state = u.state, result = u.result, error = u.error, run_at = u.run_at, finished_at = u.finished_at,
    lease_owner = NULL, lease_expires = NULL, retries_from = j.retries_from + u.refund,
    payload = coalesce(u.payload, j.payload)
FROM u
WHERE j.id = ANY(ARRAY(SELECT id FROM u)) AND j.id = u.id AND j.attempt = u.attempt AND (j.state || '') = 'running'
  AND j.lease_owner = u.worker AND j.started_at = u.started_at

-- name: insert_job_tags__bulk
INSERT INTO jobloom_job_tags (tag, job_id)
SELECT tag, job_id FROM json_to_recordset(:rows::json) AS r(tag text, job_id bigint)
ON CONFLICT DO NOTHING

-- name: retry_now__bulk
-- retry_now for a chunk of retry_many: every row's job that is failed, stalled or cancelled is queued again.
UPDATE jobloom_jobs AS j
SET state = 'queued', retries_from = j.attempt, run_at = u.now, error = NULL, result = NULL, finished_at = NULL,
    cancel_requested = false
FROM json_to_recordset(:rows::json) AS u(id bigint, now float8)
WHERE j.id = u.id AND j.state IN ('failed', 'stalled', 'cancelled')


-- name: save_key_bucket__bulk
-- The keys' buckets a dispatch spent from (one row per key started), in one statement.
INSERT INTO jobloom_key_buckets (binding, concurrency_key, tokens, tokens_at, full_at)
SELECT binding, key, tokens, tokens_at, full_at
FROM json_to_recordset(:rows::json) AS r(binding text, key text, tokens float8, tokens_at float8, full_at float8)
ON CONFLICT (binding, concurrency_key) DO UPDATE SET
    tokens = excluded.tokens, tokens_at = excluded.tokens_at, full_at = excluded.full_at
