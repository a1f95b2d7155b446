-- The by-age index of queued jobs is keyed on an expression (binding || '') that only the by-age
-- candidate query uses. With both queued indexes on plain (binding, ...), a planner that believed
-- few jobs were queued (no statistics yet after a burst of enqueues, or statistics from a quiet
-- hour) served the by-priority query from the by-age index and sorted every queued job per claim.
DROP INDEX jobloom_jobs_queued_age;
CREATE INDEX jobloom_jobs_queued_age ON jobloom_jobs ((binding || ''), run_at, id) WHERE state = 'queued';
