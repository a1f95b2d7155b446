-- Nothing changes on SQLite. On PostgreSQL this migration gives the by-age index of queued jobs a
-- predicate of its own, so that the two candidate queries cannot be planned on each other's index
-- (PostgreSQL's planner weighs them by statistics that lag behind a burst of enqueues).
SELECT 1;
