-- The outbox: every job state change appends one event in the same transaction.
CREATE TABLE jobloom_events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    at       REAL    NOT NULL,
    job_id   INTEGER NOT NULL,
    binding  TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    attempt  INTEGER NOT NULL DEFAULT 0,
    duration REAL
);
