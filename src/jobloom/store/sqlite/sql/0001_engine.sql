-- The engine's tables: jobs, finished attempts, and the coordinator's per-binding state.
CREATE TABLE jobloom_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,  -- an id names one job for ever, even after pruning
    binding          TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    run_at           REAL    NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    retries_from     INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    delivery         TEXT    NOT NULL,
    timeout          REAL,
    unique_key       TEXT,
    unique_until     REAL,
    concurrency_key  TEXT,
    lease_owner      TEXT,
    lease_expires    REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    result           TEXT,
    error            TEXT,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    finished_at      REAL
);
-- Indexes cover active states only: finished history never slows dispatch.
CREATE INDEX jobloom_jobs_queued ON jobloom_jobs (binding, priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobloom_jobs_queued_age ON jobloom_jobs (binding, run_at, id) WHERE state = 'queued';
CREATE INDEX jobloom_jobs_scheduled ON jobloom_jobs (run_at) WHERE state = 'scheduled';
CREATE INDEX jobloom_jobs_running ON jobloom_jobs (binding, concurrency_key) WHERE state = 'running';
CREATE INDEX jobloom_jobs_leases ON jobloom_jobs (lease_expires) WHERE state = 'running';
CREATE INDEX jobloom_jobs_unique ON jobloom_jobs (binding, unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX jobloom_jobs_finished ON jobloom_jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE jobloom_attempts (
    job_id           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL,
    worker           TEXT,
    started_at       REAL    NOT NULL,
    finished_at      REAL,
    outcome          TEXT,
    error            TEXT,
    traceback        TEXT,
    reported_outcome TEXT,
    reported_at      REAL,
    PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;

CREATE TABLE jobloom_bindings (
    binding         TEXT PRIMARY KEY,
    concurrency     INTEGER,
    key_concurrency INTEGER NOT NULL DEFAULT 1,
    rate            REAL,
    burst           REAL,
    priority_aging  REAL,
    backoff         TEXT,
    overrides       TEXT,
    tokens          REAL,
    tokens_at       REAL,
    updated_at      REAL NOT NULL
);
