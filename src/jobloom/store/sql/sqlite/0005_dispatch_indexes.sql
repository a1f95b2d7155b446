-- Nothing changes on SQLite: on PostgreSQL this migration rebuilds the by-age index of queued jobs
-- so that the by-priority candidate query can never be planned on it (its planner, unlike SQLite's,
-- weighs the two indexes by statistics that lag behind a burst of enqueues).
SELECT 1;
