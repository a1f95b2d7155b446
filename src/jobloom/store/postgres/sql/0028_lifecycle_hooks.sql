-- The performers' lifecycle hooks still to run (on_success, on_failure, on_retry): a row is written in
-- the transaction that stores the outcome, and deleted once the hook ran. A row whose due_at has passed
-- is run again by any worker of its binding (the lease of the worker that wrote it ran out).
CREATE TABLE jobloom_hooks (
    job_id  bigint           NOT NULL,
    attempt integer          NOT NULL,
    kind    text             NOT NULL,
    binding text             NOT NULL,
    error   text,
    due_at  double precision NOT NULL,
    PRIMARY KEY (job_id, attempt, kind)
);

CREATE INDEX jobloom_hooks_due ON jobloom_hooks (due_at);
