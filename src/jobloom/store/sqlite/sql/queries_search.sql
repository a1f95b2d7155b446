-- Named queries of job search (App.list_jobs and the bulk actions): a page of jobs, newest first, with
-- the ids below :before (the cursor). Every query takes the same filters (:states, :binding,
-- :unique_key, :text, :payload_text, :created_after, :created_before, :tags, each NULL when not given) and differs only
-- in the index that drives it, chosen by app/search.py:
--   search_tagged     the first tag's rows of jobloom_job_tags (its primary key, walked from the cursor down)
--   search_unique     a binding's unique key (jobloom_jobs_unique)
--   search_counted    one waiting, failed, stalled or cancelled state of one binding (jobloom_jobs_counted)
--   search_queued     the queued jobs of one binding (jobloom_jobs_queued)
--   search_scheduled  scheduled jobs (jobloom_jobs_scheduled); search_running: running jobs (jobloom_jobs_running)
--   search_all        the primary key from the cursor down to :floor (no index filter applies: it reads until the
--                     page is full or it reaches :floor, SCAN_BUDGET ids below the cursor or the newest job)
-- A state-driven query names its state as the partial index's predicate does, so the planner can prove
-- the index covers it; search_bindings_* list the bindings present in such an index (a loose index scan,
-- one probe per binding) for a search of that state without a binding.

-- name: search_in_id_order
-- Nothing to do on SQLite: its planner walks the index in id order (PostgreSQL's needs telling).
SELECT 1
