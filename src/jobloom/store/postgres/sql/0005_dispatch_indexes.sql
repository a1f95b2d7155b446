-- The by-age index of queued jobs gets a predicate of its own, (state || '') = 'queued', which only
-- the by-age candidate query states. With both queued indexes under the same predicate, a planner
-- that believed few jobs were queued (no statistics yet after a burst of enqueues, or statistics
-- taken over a history of finished jobs) served either candidate query from the other's index and
-- sorted every queued job per claim.
DROP INDEX jobloom_jobs_queued_age;
CREATE INDEX jobloom_jobs_queued_age ON jobloom_jobs (binding, run_at, id) WHERE (state || '') = 'queued';
