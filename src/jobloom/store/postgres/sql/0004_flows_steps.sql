-- Flows (runs of DAGs of jobs) and durable steps inside jobs.
ALTER TABLE jobloom_jobs ADD COLUMN run_id text;
ALTER TABLE jobloom_jobs ADD COLUMN node text;
CREATE INDEX jobloom_jobs_run ON jobloom_jobs (run_id, node) WHERE run_id IS NOT NULL;

CREATE TABLE jobloom_runs (
    id            text             PRIMARY KEY,
    flow          text             NOT NULL,
    state         text             NOT NULL,
    input         text             NOT NULL,
    graph         text             NOT NULL,
    deadline      double precision,
    parent_job_id bigint,
    depth         integer          NOT NULL DEFAULT 0,
    error         text,
    created_at    double precision NOT NULL,
    finished_at   double precision
);
CREATE INDEX jobloom_runs_deadline ON jobloom_runs (deadline) WHERE state = 'running' AND deadline IS NOT NULL;
CREATE INDEX jobloom_runs_flow ON jobloom_runs (flow, created_at);

-- A step's remembered result, or a sleep's wake-up time, or an event wait's deadline.
CREATE TABLE jobloom_steps (
    job_id     bigint           NOT NULL,
    name       text             NOT NULL,
    result     text,
    created_at double precision NOT NULL,
    PRIMARY KEY (job_id, name)
);

-- Data delivered to a job by send_event, waiting for wait_for_event.
CREATE TABLE jobloom_signals (
    job_id     bigint           NOT NULL,
    name       text             NOT NULL,
    data       text,
    created_at double precision NOT NULL,
    PRIMARY KEY (job_id, name)
);
