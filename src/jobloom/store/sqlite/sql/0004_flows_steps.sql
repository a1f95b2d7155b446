-- Flows (runs of DAGs of jobs) and durable steps inside jobs.
ALTER TABLE jobloom_jobs ADD COLUMN run_id TEXT;
ALTER TABLE jobloom_jobs ADD COLUMN node TEXT;
CREATE INDEX jobloom_jobs_run ON jobloom_jobs (run_id, node) WHERE run_id IS NOT NULL;

CREATE TABLE jobloom_runs (
    id            TEXT    PRIMARY KEY,
    flow          TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    input         TEXT    NOT NULL,
    graph         TEXT    NOT NULL,
    deadline      REAL,
    parent_job_id INTEGER,
    depth         INTEGER NOT NULL DEFAULT 0,
    error         TEXT,
    created_at    REAL    NOT NULL,
    finished_at   REAL
);
CREATE INDEX jobloom_runs_deadline ON jobloom_runs (deadline) WHERE state = 'running' AND deadline IS NOT NULL;
CREATE INDEX jobloom_runs_flow ON jobloom_runs (flow, created_at);

-- A step's remembered result, or a sleep's wake-up time, or an event wait's deadline.
CREATE TABLE jobloom_steps (
    job_id     INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    result     TEXT,
    created_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;

-- Data delivered to a job by send_event, waiting for wait_for_event.
CREATE TABLE jobloom_signals (
    job_id     INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    data       TEXT,
    created_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;
