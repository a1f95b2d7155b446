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

-- The read model: what happened per binding and minute, folded from the outbox by the projector.
-- histogram: JSON {bucket: count} of attempt run times on a logarithmic scale (see projector.py).
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
    PRIMARY KEY (binding, minute)
) WITHOUT ROWID;
CREATE INDEX jobloom_stats_minute ON jobloom_stats (minute);

-- Each projector's cursor: the last event folded, moved in the transaction that folds the events,
-- so a crash never counts an event twice. last_xid orders PostgreSQL's outbox; here it stays 0.
CREATE TABLE jobloom_projector (
    name       TEXT    PRIMARY KEY,
    last_seq   INTEGER NOT NULL DEFAULT 0,
    last_xid   INTEGER NOT NULL DEFAULT 0,
    updated_at REAL    NOT NULL
);
