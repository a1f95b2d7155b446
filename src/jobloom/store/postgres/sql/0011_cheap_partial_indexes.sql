-- The partial indexes that hold jobs by a set of states name each state with an equality joined by
-- OR, as on SQLite (where an IN list in an index predicate, evaluated on every UPDATE of a job's
-- state, costs the worker cycle about a tenth of its time). PostgreSQL proves that the queries'
-- `state IN (...)` implies these predicates, so its queries keep the IN form.
DROP INDEX IF EXISTS jobloom_jobs_counted;
CREATE INDEX jobloom_jobs_counted ON jobloom_jobs (binding, state)
    WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled');
DROP INDEX IF EXISTS jobloom_jobs_run_active;
CREATE INDEX jobloom_jobs_run_active ON jobloom_jobs (run_id, node COLLATE "C")
    WHERE run_id IS NOT NULL AND (state = 'waiting' OR state = 'scheduled' OR state = 'queued' OR state = 'running');
