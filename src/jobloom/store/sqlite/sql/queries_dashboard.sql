-- Named queries of the dashboard's overview, each served by an index of active jobs.

-- name: oldest_queued
-- When a binding's oldest queued job became due (its queue latency is now minus this): the first entry
-- of the queued jobs' index by age.
SELECT run_at AS at FROM jobloom_jobs INDEXED BY jobloom_jobs_queued_age
WHERE binding = :binding AND state = 'queued'
ORDER BY run_at, id LIMIT 1

-- name: overdue_scheduled
-- Per binding, the earliest due moment of scheduled jobs that are due and not queued yet (promotion
-- moves them within a second or so): the scheduled jobs' index up to now.
SELECT binding, min(run_at) AS at FROM jobloom_jobs INDEXED BY jobloom_jobs_scheduled
WHERE state = 'scheduled' AND run_at <= :now
GROUP BY binding
