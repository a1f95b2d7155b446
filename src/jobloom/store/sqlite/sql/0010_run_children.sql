-- Runs own what their nodes spawn, and keep their deadline's length. A child job spawned by a flow
-- node is a job of the node's run named '<node>/<child id>'; this index holds only those (a range of
-- '<node>/' .. '<node>0' holds exactly what '<node>' spawned), so a finishing node asks about its
-- spawned children without reading a large fan-out. A run's deadline length (seconds) is kept so
-- that resuming the run arms the deadline again.
ALTER TABLE jobloom_runs ADD COLUMN deadline_seconds REAL;
CREATE INDEX jobloom_jobs_run_spawned ON jobloom_jobs (run_id, node)
    WHERE run_id IS NOT NULL AND instr(node, '/') > 0;
