-- Flows at scale. A node is unique within its run, so fan-out children are inserted set-based and
-- idempotently (INSERT ... ON CONFLICT DO NOTHING) instead of one unique-key check each; and the
-- active jobs of runs have an index of their own, so that a finishing child asks whether a sibling
-- is still active without reading the whole fan-out (node names compared byte by byte: a range of
-- 'name:' .. 'name;' holds exactly the children of 'name').
DROP INDEX IF EXISTS jobloom_jobs_run;
CREATE UNIQUE INDEX jobloom_jobs_run ON jobloom_jobs (run_id, node) WHERE run_id IS NOT NULL;
CREATE INDEX jobloom_jobs_run_active ON jobloom_jobs (run_id, node COLLATE "C")
    WHERE run_id IS NOT NULL AND state IN ('waiting', 'scheduled', 'queued', 'running');
