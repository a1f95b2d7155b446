-- The SQLite file that jobloom 0.2's migrations 0001 to 0027 built, as SQLite keeps its objects
-- (sqlite_master, in the order they were made: a column added later is appended to its table's
-- text) and the migrations it records. The tests build a store migrated by jobloom 0.2 from it
-- (tests/conformance/test_schema.py checks that it has the catalog of 0.2/sqlite.txt). Never written again.

CREATE TABLE jobloom_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL);
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
, run_id TEXT, node TEXT, tags TEXT, meta TEXT, snoozes integer NOT NULL DEFAULT 0, batch INTEGER, progress TEXT, claim_hash TEXT, debounce_key TEXT, expires_at REAL, dependants INTEGER NOT NULL DEFAULT 0, parent_id INTEGER, version INTEGER);
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
, retention TEXT, paused INTEGER NOT NULL DEFAULT 0, paused_at REAL, batch_size integer, batch_wait REAL, keyed INTEGER, rules TEXT, key_rules TEXT, turn_key TEXT, turn_used INTEGER);
CREATE TABLE jobloom_schedules (
    name          TEXT    PRIMARY KEY,
    origin        TEXT    NOT NULL,              -- 'code' (declared with the app) or 'runtime'
    definition    TEXT    NOT NULL,              -- JSON: timing, target, payload, policies
    paused        INTEGER NOT NULL DEFAULT 0,
    last_tick     REAL,
    next_run      REAL,
    last_run_at   REAL,
    last_job_id   INTEGER,
    last_run_id   TEXT,
    last_error    TEXT,
    last_error_at REAL,
    fired         INTEGER NOT NULL DEFAULT 0,
    skipped       INTEGER NOT NULL DEFAULT 0,
    created_at    REAL    NOT NULL,
    updated_at    REAL    NOT NULL
);
CREATE TABLE jobloom_stats (
    binding   TEXT    NOT NULL,
    minute    INTEGER NOT NULL,                  -- epoch seconds // 60
    enqueued  INTEGER NOT NULL DEFAULT 0,
    started   INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    cancelled INTEGER NOT NULL DEFAULT 0,
    stalled   INTEGER NOT NULL DEFAULT 0,
    runs      INTEGER NOT NULL DEFAULT 0,
    run_time  REAL    NOT NULL DEFAULT 0,
    run_max   REAL,
    histogram TEXT    NOT NULL DEFAULT '{}', expired INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (binding, minute)
) WITHOUT ROWID;
CREATE INDEX jobloom_stats_minute ON jobloom_stats (minute);
CREATE TABLE jobloom_projector (
    name       TEXT    PRIMARY KEY,
    last_seq   INTEGER NOT NULL DEFAULT 0,
    last_xid   INTEGER NOT NULL DEFAULT 0,
    updated_at REAL    NOT NULL
);
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
, deadline_seconds REAL, spec TEXT);
CREATE INDEX jobloom_runs_deadline ON jobloom_runs (deadline) WHERE state = 'running' AND deadline IS NOT NULL;
CREATE INDEX jobloom_runs_flow ON jobloom_runs (flow, created_at);
CREATE TABLE jobloom_steps (
    job_id     INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    result     TEXT,
    created_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;
CREATE TABLE jobloom_signals (
    job_id     INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    data       TEXT,
    created_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;
CREATE UNIQUE INDEX jobloom_jobs_run ON jobloom_jobs (run_id, node) WHERE run_id IS NOT NULL;
CREATE INDEX jobloom_jobs_run_spawned ON jobloom_jobs (run_id, node)
    WHERE run_id IS NOT NULL AND instr(node, '/') > 0;
CREATE INDEX jobloom_jobs_counted ON jobloom_jobs (binding, state)
    WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled');
CREATE INDEX jobloom_jobs_run_active ON jobloom_jobs (run_id, node)
    WHERE run_id IS NOT NULL AND (state = 'waiting' OR state = 'scheduled' OR state = 'queued' OR state = 'running');
CREATE TABLE jobloom_job_tags (
    tag    TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) WITHOUT ROWID;
CREATE INDEX jobloom_job_tags_job ON jobloom_job_tags (job_id);
CREATE TABLE jobloom_workers (
    name        TEXT    PRIMARY KEY,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    bindings    TEXT    NOT NULL,
    concurrency INTEGER NOT NULL,
    beat        REAL    NOT NULL,
    started_at  REAL    NOT NULL,
    seen_at     REAL    NOT NULL
);
CREATE TABLE jobloom_tokens (
    name TEXT PRIMARY KEY,
    prefix TEXT NOT NULL UNIQUE,
    secret_hash TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at REAL
, bindings TEXT);
CREATE TABLE "jobloom_events" (
    seq      INTEGER PRIMARY KEY,
    at       REAL    NOT NULL,
    job_id   INTEGER,
    binding  TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    attempt  INTEGER NOT NULL DEFAULT 0,
    duration REAL,
    n        INTEGER NOT NULL DEFAULT 1,
    top      REAL,
    bucket   INTEGER
);
CREATE TABLE jobloom_stats_hourly (
    binding   TEXT    NOT NULL,
    minute    INTEGER NOT NULL,
    enqueued  INTEGER NOT NULL DEFAULT 0,
    started   INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    cancelled INTEGER NOT NULL DEFAULT 0,
    stalled   INTEGER NOT NULL DEFAULT 0,
    runs      INTEGER NOT NULL DEFAULT 0,
    run_time  REAL    NOT NULL DEFAULT 0,
    run_max   REAL,
    histogram TEXT    NOT NULL DEFAULT '{}', expired INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (binding, minute)
) WITHOUT ROWID;
CREATE INDEX jobloom_stats_hourly_minute ON jobloom_stats_hourly (minute);
CREATE TABLE jobloom_job_notes (
    id     INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    at     REAL    NOT NULL,
    actor  TEXT    NOT NULL,
    what   TEXT    NOT NULL
);
CREATE INDEX jobloom_job_notes_job ON jobloom_job_notes (job_id, id);
CREATE INDEX jobloom_jobs_debounce ON jobloom_jobs (binding, debounce_key)
    WHERE debounce_key IS NOT NULL AND state = 'scheduled';
CREATE INDEX jobloom_jobs_expiring ON jobloom_jobs (expires_at)
    WHERE expires_at IS NOT NULL AND (state = 'scheduled' OR state = 'queued');
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
, batch_id INTEGER);
CREATE INDEX jobloom_jobs_parent ON jobloom_jobs (parent_id) WHERE parent_id IS NOT NULL;
CREATE TABLE jobloom_batches (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    on_complete INTEGER,
    on_success  INTEGER,
    created_at  REAL    NOT NULL
);
CREATE TABLE jobloom_batch_jobs (
    batch_id INTEGER NOT NULL,
    job_id   INTEGER NOT NULL,
    PRIMARY KEY (batch_id, job_id)
) WITHOUT ROWID;
CREATE INDEX jobloom_batch_jobs_job ON jobloom_batch_jobs (job_id);
CREATE TABLE jobloom_key_buckets (
    binding         TEXT NOT NULL,
    concurrency_key TEXT NOT NULL,
    tokens          REAL NOT NULL,
    tokens_at       REAL NOT NULL,
    full_at         REAL NOT NULL,
    PRIMARY KEY (binding, concurrency_key)
);
CREATE INDEX jobloom_key_buckets_full ON jobloom_key_buckets (binding, full_at);
CREATE INDEX jobloom_jobs_queued_key ON jobloom_jobs (binding, concurrency_key, priority DESC, run_at, id)
    WHERE state = 'queued';
INSERT INTO jobloom_migrations (version, name, applied_at) VALUES
    (1, '0001_engine', 0),
    (2, '0002_outbox', 0),
    (3, '0003_schedules_stats', 0),
    (4, '0004_flows_steps', 0),
    (5, '0005_dispatch_indexes', 0),
    (6, '0006_outbox_rowid', 0),
    (7, '0007_binding_retention', 0),
    (8, '0008_outbox_plain', 0),
    (9, '0009_flow_scale', 0),
    (10, '0010_run_children', 0),
    (11, '0011_cheap_partial_indexes', 0),
    (12, '0012_tags_search', 0),
    (13, '0013_binding_control', 0),
    (14, '0014_progress', 0),
    (15, '0015_api_tokens', 0),
    (16, '0016_binding_keyed', 0),
    (17, '0017_outbox_counted', 0),
    (18, '0018_stats_hourly', 0),
    (19, '0019_job_notes', 0),
    (20, '0020_binding_rules', 0),
    (21, '0021_worker_claims', 0),
    (22, '0022_debounce_expiry', 0),
    (23, '0023_run_spec', 0),
    (24, '0024_dependencies', 0),
    (25, '0025_job_calls', 0),
    (26, '0026_batches', 0),
    (27, '0027_key_turns', 0);
