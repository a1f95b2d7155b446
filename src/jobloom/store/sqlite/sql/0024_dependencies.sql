-- Dependencies between jobs. A job enqueued with depends_on is inserted waiting, with one edge per
-- dependency (done: the dependency's ending was counted) and a countdown of the edges still open;
-- when the countdown reaches zero in the transaction that ended its last dependency, the job is
-- queued (or skipped when a dependency did not succeed, unless on_failure is 'run').
-- jobloom_jobs.dependants: some job depends on this one (its ending is looked up only then).
ALTER TABLE jobloom_jobs ADD COLUMN dependants INTEGER NOT NULL DEFAULT 0;
CREATE TABLE jobloom_dependencies (
    depends_on INTEGER NOT NULL,
    job_id     INTEGER NOT NULL,
    done       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (depends_on, job_id)
) WITHOUT ROWID;
CREATE INDEX jobloom_dependencies_job ON jobloom_dependencies (job_id, depends_on);
CREATE TABLE jobloom_dependency_waits (
    job_id     INTEGER PRIMARY KEY,
    pending    INTEGER NOT NULL,
    on_failure TEXT    NOT NULL
);
