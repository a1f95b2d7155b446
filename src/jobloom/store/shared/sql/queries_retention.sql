-- Named queries of retention: finished jobs past their binding's retention are deleted with their
-- history, a bounded batch per transaction. Every query named prune_history_* is run for each batch
-- with :ids (the jobs being deleted), so each concept that keeps rows per job removes its own.
-- How each store picks the jobs to delete is in its own queries_retention.sql.

-- row: RetentionRow
-- A binding's stored retention (JSON).
--   binding: str, retention: str | None

-- name: binding_retentions
-- returns: RetentionRow
-- The retention that the app performing each binding stored with it (JSON: state -> seconds).
SELECT binding, retention FROM jobloom_bindings WHERE retention IS NOT NULL ORDER BY binding

-- name: prune_history_attempts
DELETE FROM jobloom_attempts WHERE job_id = ANY(:ids::bigint[])

-- name: prune_history_tags
DELETE FROM jobloom_job_tags WHERE job_id = ANY(:ids::bigint[])

-- name: prune_jobs
DELETE FROM jobloom_jobs WHERE id = ANY(:ids::bigint[])

-- name: prune_stats
DELETE FROM jobloom_stats
WHERE (binding, minute) IN (SELECT binding, minute FROM jobloom_stats WHERE minute < :minute LIMIT :limit)

-- name: prune_stats_hourly
DELETE FROM jobloom_stats_hourly
WHERE (binding, minute) IN (SELECT binding, minute FROM jobloom_stats_hourly WHERE minute < :minute LIMIT :limit)

-- row: PruneRow
-- A finished job picked for deletion.
--   id: int, run_id: str | None

-- name: prune_pick
-- returns: PruneRow
SELECT id, run_id FROM jobloom_jobs
WHERE finished_at IS NOT NULL AND finished_at < :cutoff AND state = :state AND binding = ANY(:bindings::text[])
  {sqlite: AND id < (SELECT max(id) FROM jobloom_jobs)}
ORDER BY finished_at LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: prune_pick_others
-- returns: PruneRow
-- Jobs of the bindings not in :bindings (the pruning app's own) that have no stored retention: the
-- default retention applies. The stored retention is checked here, in the statement that picks, so
-- a binding whose retention is stored after the pruner listed them is never pruned by the default.
SELECT id, run_id FROM jobloom_jobs
WHERE finished_at IS NOT NULL AND finished_at < :cutoff AND state = :state
  AND binding <> ALL(:bindings::text[])
  AND NOT EXISTS (SELECT 1 FROM jobloom_bindings b WHERE b.binding = jobloom_jobs.binding AND b.retention IS NOT NULL)
  {sqlite: AND id < (SELECT max(id) FROM jobloom_jobs)}
ORDER BY finished_at LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: lock_pruned_runs
-- returns: RunIdRow
-- The runs of a batch's jobs, locked before prune_runs looks for their other jobs: of two batches
-- that delete a run's last jobs at the same time, the second then sees the first's deletes.
SELECT id FROM jobloom_runs WHERE id = ANY(:ids::text[]) {postgres: ORDER BY id} FOR UPDATE

-- name: prune_history_dependencies
-- The edges of deleted dependants (nothing waits on them any more) and their countdowns. An edge
-- whose dependency is deleted but whose dependant lives is kept until the dependant goes: it was
-- closed (counted) when its dependency finished, so it neither blocks nor releases anything, and the
-- dependant still lists the dependency (as deleted).
DELETE FROM jobloom_dependencies WHERE job_id = ANY(:ids::bigint[])

-- name: prune_history_dependency_waits
DELETE FROM jobloom_dependency_waits WHERE job_id = ANY(:ids::bigint[])

-- name: prune_history_batch_jobs
DELETE FROM jobloom_batch_jobs WHERE job_id = ANY(:ids::bigint[])

-- name: prune_batches
-- Batches whose jobs and callbacks are all deleted by this delete (run before the history queries,
-- while the batch's rows still name the jobs).
DELETE FROM jobloom_batches
WHERE id IN (SELECT batch_id FROM jobloom_batch_jobs WHERE job_id = ANY(:ids::bigint[])
             UNION SELECT id FROM jobloom_batches
             WHERE on_complete = ANY(:ids::bigint[]) OR on_success = ANY(:ids::bigint[]))
  AND NOT EXISTS (SELECT 1 FROM jobloom_batch_jobs bj
                  WHERE bj.batch_id = jobloom_batches.id AND bj.job_id <> ALL(:ids::bigint[]))
  AND NOT EXISTS (SELECT 1 FROM jobloom_jobs j
                  WHERE (j.id = jobloom_batches.on_complete OR j.id = jobloom_batches.on_success)
                    AND j.id <> ALL(:ids::bigint[]))
