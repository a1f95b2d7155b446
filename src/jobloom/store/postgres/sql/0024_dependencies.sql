-- Dependencies between jobs. A job enqueued with depends_on is inserted waiting, with one edge per
-- dependency (done: the dependency's ending was counted) and a countdown of the edges still open;
-- when the countdown reaches zero in the transaction that ended its last dependency, the job is
-- queued (or skipped when a dependency did not succeed, unless on_failure is 'run'). The countdown's
-- row lock serializes the transactions that end a job's last dependencies at the same moment.
-- jobloom_jobs.dependants: some job depends on this one (its ending is looked up only then).
ALTER TABLE jobloom_jobs ADD COLUMN dependants boolean NOT NULL DEFAULT false;
CREATE TABLE jobloom_dependencies (
    depends_on bigint  NOT NULL,
    job_id     bigint  NOT NULL,
    done       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (depends_on, job_id)
);
CREATE INDEX jobloom_dependencies_job ON jobloom_dependencies (job_id, depends_on);
CREATE TABLE jobloom_dependency_waits (
    job_id     bigint  PRIMARY KEY,
    pending    integer NOT NULL,
    on_failure text    NOT NULL
);
