-- The baseline: jobloom's whole schema at once, as migrations 0001 to 0027 of jobloom 0.2 built it one
-- change at a time (the same tables, columns in the same order with the same types and defaults, the
-- same indexes; tests/conformance/test_schema.py compares the two catalogs). A new store gets this
-- migration; a store that 0.2 migrated records versions 1 to 27 and so is at this one already; a store
-- that 0.2 migrated part of the way is refused (docs/how-to/upgrades.md). Later changes are new
-- migrations, numbered from 0028 on.
-- Times are epoch seconds (REAL), as everywhere in the engine; JSON is stored as TEXT.

-- == Jobs ===========================================================================================

-- One row per job. attempt counts the attempts started; retries_from is the attempt a retry by hand
-- counted from. lease_owner and lease_expires hold a running job's lease. run_id and node: the flow
-- run and node the job belongs to (a child spawned by a node is '<node>/<child id>'). tags: a JSON
-- array, meta: a JSON object (NULL: none), both written at enqueue only. snoozes: how many times the
-- job was snoozed (a performer's max_snoozes bounds it). batch: while a batch performer's job runs,
-- the lowest job id of its batch (unique among running batches). progress: a running job's latest
-- progress as JSON {"fraction", "message", "at", "attempt"}, written at most once a second per worker.
-- claim_hash: the SHA-256 of the secret a remote claim returned for the current attempt; its heartbeats
-- and report present the secret (jobloom.engine.remote). debounce_key: the enqueues of a binding with
-- the same key collapse into the one job of that key still scheduled (jobloom.engine.debounce).
-- expires_at: the moment after which the job never starts (it ends 'expired'). dependants: some job
-- depends on this one. parent_id: the job whose self.call made this one (jobloom.engine.calls).
-- version: the performer's version that first ran the job.
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
    finished_at      REAL,
    run_id           TEXT,
    node             TEXT,
    tags             TEXT,
    meta             TEXT,
    snoozes          INTEGER NOT NULL DEFAULT 0,
    batch            INTEGER,
    progress         TEXT,
    claim_hash       TEXT,
    debounce_key     TEXT,
    expires_at       REAL,
    dependants       INTEGER NOT NULL DEFAULT 0,
    parent_id        INTEGER,
    version          INTEGER
);

-- Indexes cover active states only: finished history never slows dispatch. A partial index that holds
-- a set of states names each with an equality joined by OR, not with IN (...): SQLite evaluates the
-- predicate on every UPDATE of a column it reads (a job's state changes at every claim and finish),
-- and an IN list costs much more than a few equalities. The queries that read these indexes repeat the
-- same OR expression, so that the planner can prove that the index covers them. An index's entries
-- end with the rowid, the job id: a search by state walks jobloom_jobs_counted in id order.
CREATE INDEX jobloom_jobs_queued ON jobloom_jobs (binding, priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobloom_jobs_queued_age ON jobloom_jobs (binding, run_at, id) WHERE state = 'queued';
-- The queued jobs of a binding by key, then by priority within the key: the walk over keys in turn.
CREATE INDEX jobloom_jobs_queued_key ON jobloom_jobs (binding, concurrency_key, priority DESC, run_at, id)
    WHERE state = 'queued';
CREATE INDEX jobloom_jobs_scheduled ON jobloom_jobs (run_at) WHERE state = 'scheduled';
CREATE INDEX jobloom_jobs_running ON jobloom_jobs (binding, concurrency_key) WHERE state = 'running';
CREATE INDEX jobloom_jobs_leases ON jobloom_jobs (lease_expires) WHERE state = 'running';
CREATE INDEX jobloom_jobs_unique ON jobloom_jobs (binding, unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX jobloom_jobs_finished ON jobloom_jobs (finished_at) WHERE finished_at IS NOT NULL;
-- Counts of waiting, failed, stalled and cancelled jobs per binding read this index, not the table.
CREATE INDEX jobloom_jobs_counted ON jobloom_jobs (binding, state)
    WHERE (state = 'waiting' OR state = 'failed' OR state = 'stalled' OR state = 'cancelled');
CREATE INDEX jobloom_jobs_debounce ON jobloom_jobs (binding, debounce_key)
    WHERE debounce_key IS NOT NULL AND state = 'scheduled';
CREATE INDEX jobloom_jobs_expiring ON jobloom_jobs (expires_at)
    WHERE expires_at IS NOT NULL AND (state = 'scheduled' OR state = 'queued');
CREATE INDEX jobloom_jobs_parent ON jobloom_jobs (parent_id) WHERE parent_id IS NOT NULL;
-- A node is unique within its run: fan-out children are inserted set-based with ON CONFLICT DO NOTHING.
CREATE UNIQUE INDEX jobloom_jobs_run ON jobloom_jobs (run_id, node) WHERE run_id IS NOT NULL;
-- The active jobs of runs: a finishing child asks whether a sibling is still active without reading
-- the whole fan-out (a range of 'name:' .. 'name;' holds exactly the children of 'name').
CREATE INDEX jobloom_jobs_run_active ON jobloom_jobs (run_id, node)
    WHERE run_id IS NOT NULL AND (state = 'waiting' OR state = 'scheduled' OR state = 'queued' OR state = 'running');
-- The jobs spawned by flow nodes only (a range of '<node>/' .. '<node>0' holds what '<node>' spawned).
CREATE INDEX jobloom_jobs_run_spawned ON jobloom_jobs (run_id, node)
    WHERE run_id IS NOT NULL AND instr(node, '/') > 0;

-- Each attempt of a job, from its start to its outcome.
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

-- One row per (tag, job), for the jobs enqueued with tags: search by tag walks the primary key
-- backwards from its cursor, so its cost follows the tagged jobs, never the history. Deleted with
-- their job.
CREATE TABLE jobloom_job_tags (
    tag    TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) WITHOUT ROWID;
CREATE INDEX jobloom_job_tags_job ON jobloom_job_tags (job_id);

-- What people did to a job by hand, and who (the API token's name): enqueued it from the dashboard,
-- started its run, sent it an event, triggered the schedule that made it, retried, cancelled it. A
-- job's page shows these in its timeline; they go with the job's other history.
CREATE TABLE jobloom_job_notes (
    id     INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    at     REAL    NOT NULL,
    actor  TEXT    NOT NULL,
    what   TEXT    NOT NULL
);
CREATE INDEX jobloom_job_notes_job ON jobloom_job_notes (job_id, id);

-- A durable step's remembered result, or a sleep's wake-up time, or an event wait's deadline.
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

-- Dependencies between jobs. A job enqueued with depends_on is inserted waiting, with one edge per
-- dependency (done: the dependency's ending was counted) and a countdown of the edges still open;
-- when the countdown reaches zero in the transaction that ended its last dependency, the job is queued
-- (or skipped when a dependency did not succeed, unless on_failure is 'run'). batch_id: the batch whose
-- counts are merged into a callback's payload when it is released.
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
    on_failure TEXT    NOT NULL,
    batch_id   INTEGER
);

-- Batches of jobs with callbacks: a batch's jobs are rows of jobloom_batch_jobs; its callbacks
-- (on_complete, on_success) are jobs that depend on every job of the batch, inserted waiting with it.
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

-- == Bindings, workers, tokens ======================================================================

-- The coordinator's state per binding: its limits and token bucket, and what the app that performs
-- it stores when its workers start, for the apps and commands that lack its performer. retention:
-- JSON state -> seconds (NULL: the default). paused: its queued jobs wait; running ones finish.
-- batch_size, batch_wait: a batch performer's (its concurrency counts batches). keyed: whether the
-- performer has a concurrency_key function (NULL: not known). rules: the enqueue rules as JSON
-- (priority, max_attempts, delivery, timeout, unique_for, the payload's JSON Schema...). key_rules:
-- the limits between concurrency keys in the code (JSON: fairness, key_weights, key_rate, key_burst).
-- turn_key, turn_used: whose turn it is under round-robin fairness and how many starts it has had.
CREATE TABLE jobloom_bindings (
    binding         TEXT    PRIMARY KEY,
    concurrency     INTEGER,
    key_concurrency INTEGER NOT NULL DEFAULT 1,
    rate            REAL,
    burst           REAL,
    priority_aging  REAL,
    backoff         TEXT,
    overrides       TEXT,
    tokens          REAL,
    tokens_at       REAL,
    updated_at      REAL    NOT NULL,
    retention       TEXT,
    paused          INTEGER NOT NULL DEFAULT 0,
    paused_at       REAL,
    batch_size      INTEGER,
    batch_wait      REAL,
    keyed           INTEGER,
    rules           TEXT,
    key_rules       TEXT,
    turn_key        TEXT,
    turn_used       INTEGER
);

-- One token bucket per concurrency key of a binding with a key_rate_limit, only while it is not full:
-- full_at is when it will be, and a dispatch deletes the rows past it (a missing row is a full bucket).
CREATE TABLE jobloom_key_buckets (
    binding         TEXT NOT NULL,
    concurrency_key TEXT NOT NULL,
    tokens          REAL NOT NULL,
    tokens_at       REAL NOT NULL,
    full_at         REAL NOT NULL,
    PRIMARY KEY (binding, concurrency_key)
);
CREATE INDEX jobloom_key_buckets_full ON jobloom_key_buckets (binding, full_at);

-- One row per worker process and the bindings it serves, renewed with its heartbeats (seen_at, every
-- `beat` seconds) and deleted when it stops; a row not renewed for long is pruned by the others.
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

-- Tokens of the HTTP API (`jobloom tokens create|list|revoke`). A token reads `jlt_<prefix>_<secret>`:
-- the prefix finds the row, and only the SHA-256 of the secret is kept, compared in constant time. A
-- revoked token keeps its row (revoked_at set). bindings: a worker token's bindings (comma-separated),
-- the only ones it may claim, heartbeat and complete; NULL: every binding.
CREATE TABLE jobloom_tokens (
    name        TEXT PRIMARY KEY,
    prefix      TEXT NOT NULL UNIQUE,
    secret_hash TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    revoked_at  REAL,
    bindings    TEXT
);

-- == Flows and schedules ============================================================================

-- Runs of flows (DAGs of jobs). A run owns what its nodes spawn. deadline_seconds: the deadline's
-- length, so that resuming the run arms it again. spec: the run's definition as data
-- (jobloom.flows.spec), so that any worker carries the run on with the graph it started with.
CREATE TABLE jobloom_runs (
    id               TEXT    PRIMARY KEY,
    flow             TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    input            TEXT    NOT NULL,
    graph            TEXT    NOT NULL,
    deadline         REAL,
    parent_job_id    INTEGER,
    depth            INTEGER NOT NULL DEFAULT 0,
    error            TEXT,
    created_at       REAL    NOT NULL,
    finished_at      REAL,
    deadline_seconds REAL,
    spec             TEXT
);
CREATE INDEX jobloom_runs_deadline ON jobloom_runs (deadline) WHERE state = 'running' AND deadline IS NOT NULL;
CREATE INDEX jobloom_runs_flow ON jobloom_runs (flow, created_at);

-- Schedules: one row per schedule, the authority on which ticks were handled (a worker moves
-- last_tick on under the row's lock, in the transaction that enqueues the tick's job); run-time
-- definitions are stored here too. next_run is informational (workers compute it from last_tick).
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

-- == The outbox and the read model ==================================================================

-- The outbox: every job state change appends an event in the same transaction. seq is a plain rowid
-- (no AUTOINCREMENT, which would read and rewrite sqlite_sequence for every event): it restarts once
-- the projector has folded and deleted every event, so the projector reads the oldest events in the
-- table, each one not counted yet. A row may count several events of one kind, binding and moment (a
-- cycle's claims or outcomes, a batch enqueue): n of them, their run times' sum (duration), the
-- longest (top) and their shared histogram bucket (bucket); such a row names no job (job_id NULL).
CREATE TABLE jobloom_events (
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

-- Each projector's cursor, moved in the transaction that folds the events, so a crash never counts an
-- event twice. last_xid is unused and stays 0 (the stores that jobloom 0.2 migrated have it too).
CREATE TABLE jobloom_projector (
    name       TEXT    PRIMARY KEY,
    last_seq   INTEGER NOT NULL DEFAULT 0,
    last_xid   INTEGER NOT NULL DEFAULT 0,
    updated_at REAL    NOT NULL
);

-- The read model: what happened per binding and minute, folded from the outbox by the projector, kept
-- a day. histogram: JSON {bucket: count} of attempt run times on a logarithmic scale (see
-- core/histogram.py).
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
    histogram TEXT    NOT NULL DEFAULT '{}',
    expired   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (binding, minute)
) WITHOUT ROWID;
CREATE INDEX jobloom_stats_minute ON jobloom_stats (minute);

-- The read model per binding and hour, kept as long as the read model: the projector adds each fold
-- to its minute's row and to its hour's, so a chart of a week reads 168 rows per binding, not 10,080.
-- minute: the hour's first minute (a multiple of 60).
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
    histogram TEXT    NOT NULL DEFAULT '{}',
    expired   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (binding, minute)
) WITHOUT ROWID;
CREATE INDEX jobloom_stats_hourly_minute ON jobloom_stats_hourly (minute);
