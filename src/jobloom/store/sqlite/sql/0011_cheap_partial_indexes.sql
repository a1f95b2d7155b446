-- The partial indexes that hold jobs by a set of states name each state with an equality joined by
-- OR rather than with IN (...). SQLite evaluates an index's predicate on every UPDATE that changes a
-- column it reads (a job's state changes on every claim and finish), and an IN list is evaluated
-- much more slowly than a few equalities: with IN, these two indexes cost the worker cycle about a
-- tenth of its time. The queries that read them repeat the same OR expression, so that the planner
-- can prove that the index covers them.
DROP INDEX IF EXISTS jobloom_jobs_counted;
CREATE INDEX jobloom_jobs_counted ON jobloom_jobs (binding, state)
    WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled');
DROP INDEX IF EXISTS jobloom_jobs_run_active;
CREATE INDEX jobloom_jobs_run_active ON jobloom_jobs (run_id, node)
    WHERE run_id IS NOT NULL AND (state = 'waiting' OR state = 'scheduled' OR state = 'queued' OR state = 'running');
