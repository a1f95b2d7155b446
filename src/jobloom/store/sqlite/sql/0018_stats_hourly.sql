-- The read model rolled up per binding and hour: the projector adds each fold to its minute's row and
-- to its hour's row, so a chart of a week reads 168 rows per binding, not 10,080. minute: the hour's
-- first minute (epoch seconds // 60, a multiple of 60). Per-minute rows are then kept a day, hourly
-- rows as long as the read model. Existing minutes are rolled up here; their run-time histograms are
-- not (their hours keep counts, run count, run time and longest run, but no percentiles).
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
    PRIMARY KEY (binding, minute)
) WITHOUT ROWID;
CREATE INDEX jobloom_stats_hourly_minute ON jobloom_stats_hourly (minute);
INSERT INTO jobloom_stats_hourly (binding, minute, enqueued, started, succeeded, failed, retried, cancelled,
                                  stalled, runs, run_time, run_max)
SELECT binding, (minute / 60) * 60, sum(enqueued), sum(started), sum(succeeded), sum(failed), sum(retried),
       sum(cancelled), sum(stalled), sum(runs), sum(run_time), max(run_max)
FROM jobloom_stats GROUP BY binding, (minute / 60) * 60;
