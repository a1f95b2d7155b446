-- A key's rate bucket row is kept while its key is in use, and deleted once it has been full for a while
-- (by a dispatch, every few seconds, not every time): saving it is then an update of the row in place.
-- No index holds full_at (the prune reads the binding's rows by the primary key), and each page keeps
-- room for the rows' new versions, so that the update is a HOT one (no new index entry, no dead row
-- left for vacuum to find).
DROP INDEX jobloom_key_buckets_full;
ALTER TABLE jobloom_key_buckets SET (fillfactor = 50);
