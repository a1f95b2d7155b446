-- Schedules: one row per schedule, the authority on which ticks were handled (a worker moves
-- last_tick on under the row's lock, in the transaction that enqueues the tick's job); run-time
-- definitions are stored here too. next_run is informational (workers compute it from last_tick).
CREATE TABLE jobloom_schedules (
    name          text             PRIMARY KEY,
    origin        text             NOT NULL,     -- 'code' (declared with the app) or 'runtime'
    definition    text             NOT NULL,     -- JSON: timing, target, payload, policies
    paused        boolean          NOT NULL DEFAULT false,
    last_tick     double precision,
    next_run      double precision,
    last_run_at   double precision,
    last_job_id   bigint,
    last_run_id   text,
    last_error    text,
    last_error_at double precision,
    fired         bigint           NOT NULL DEFAULT 0,
    skipped       bigint           NOT NULL DEFAULT 0,
    created_at    double precision NOT NULL,
    updated_at    double precision NOT NULL
);

-- The read model: what happened per binding and minute, folded from the outbox by the projector.
-- histogram: JSON {bucket: count} of attempt run times on a logarithmic scale (see projector.py).
CREATE TABLE jobloom_stats (
    binding   text             NOT NULL,
    minute    bigint           NOT NULL,         -- epoch seconds // 60
    enqueued  bigint           NOT NULL DEFAULT 0,
    started   bigint           NOT NULL DEFAULT 0,
    succeeded bigint           NOT NULL DEFAULT 0,
    failed    bigint           NOT NULL DEFAULT 0,
    retried   bigint           NOT NULL DEFAULT 0,
    cancelled bigint           NOT NULL DEFAULT 0,
    stalled   bigint           NOT NULL DEFAULT 0,
    runs      bigint           NOT NULL DEFAULT 0,
    run_time  double precision NOT NULL DEFAULT 0,
    run_max   double precision,
    histogram text             NOT NULL DEFAULT '{}',
    PRIMARY KEY (binding, minute)
);
CREATE INDEX jobloom_stats_minute ON jobloom_stats (minute);

-- Each projector's cursor, moved in the transaction that folds the events, so a crash never counts
-- an event twice. Events are read in (xid, seq) order and only from transactions older than every
-- running one: all events at or before the cursor are final, none can appear behind it later.
CREATE TABLE jobloom_projector (
    name       text             PRIMARY KEY,
    last_seq   bigint           NOT NULL DEFAULT 0,
    last_xid   bigint           NOT NULL DEFAULT 0,
    updated_at double precision NOT NULL
);
CREATE INDEX jobloom_events_xid_seq ON jobloom_events (xid, seq);
