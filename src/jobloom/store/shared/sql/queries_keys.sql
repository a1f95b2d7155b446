-- Limits between the concurrency keys of a binding: turns (round-robin fairness) and a token bucket per
-- key. The walk over keys in turn differs by dialect (store/<dialect>/sql/queries_keys.sql).

-- row: TurnCandidateRow
-- A runnable job read key by key in turn (round-robin fairness), with its key's share of the read (a
-- key with as many jobs read as its share may have more queued) and its key's rate bucket (tokens and
-- tokens_at None: no row, a full bucket).
--   id: int, priority: int, run_at: float, concurrency_key: str | None, share: int
--   tokens: float | None = None, tokens_at: float | None = None

-- name: candidates_keyless
-- returns: CandidateRow
-- Under round-robin fairness: the binding's first queued jobs without a key, by priority. Read from the
-- by-key index, where they follow the keyed jobs; on PostgreSQL the key (NULL in every row) leads the order
-- so that this index alone yields it. Ordered by priority alone, the planner may choose the by-priority
-- index and filter the key; with statistics older than a backlog of keyed jobs it does, and every
-- dispatch then reads the whole backlog (5 ms for 10,000 keyed jobs, against 0.03 ms).
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_queued_key}
WHERE binding = :binding AND state = 'queued' AND concurrency_key IS NULL
ORDER BY {postgres: concurrency_key COLLATE "C", }priority DESC, run_at, id LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: peek_keyless
-- returns: CandidateRow
-- The jobs of candidates_keyless, read without claiming them: why a job waits.
SELECT id, priority, run_at, concurrency_key FROM jobloom_jobs {sqlite: INDEXED BY jobloom_jobs_queued_key}
WHERE binding = :binding AND state = 'queued' AND concurrency_key IS NULL
ORDER BY {postgres: concurrency_key COLLATE "C", }priority DESC, run_at, id LIMIT :limit

-- name: save_turn
-- The turn between keys, and (unless None) when the last key's bucket this dispatch did not save is full.
UPDATE jobloom_bindings SET turn_key = :turn_key, turn_used = :turn_used,
    key_full_at = COALESCE(:key_full_at, key_full_at)
WHERE binding = :binding

-- name: save_key_full_at
-- Without turns: when the last key's bucket a dispatch did not save is full (no later dispatch of the
-- binding records its starts before then).
UPDATE jobloom_bindings SET key_full_at = :key_full_at WHERE binding = :binding

-- row: KeyBucketRow
-- The token bucket of one concurrency key (``key_rate_limit``).
--   concurrency_key: str, tokens: float, tokens_at: float

-- name: key_buckets
-- returns: KeyBucketRow
-- The buckets of :keys that have a row (a key without a row has a full bucket; a row may be full too).
SELECT concurrency_key, tokens, tokens_at FROM jobloom_key_buckets
WHERE binding = :binding AND concurrency_key = ANY(:keys::text[])

-- name: save_key_bucket
INSERT INTO jobloom_key_buckets (binding, concurrency_key, tokens, tokens_at, full_at)
VALUES (:binding, :key, :tokens, :tokens_at, :full_at)
ON CONFLICT (binding, concurrency_key) DO UPDATE SET
    tokens = excluded.tokens, tokens_at = excluded.tokens_at, full_at = excluded.full_at

-- name: prune_key_buckets
-- The buckets due full :keep seconds before :now or earlier (full_at: by the rate when saved), and full
-- by the rate in force (:rate, :burst): no row is a full bucket. No index serves full_at (saving a row
-- is then a HOT update on PostgreSQL): the binding's rows are read by the primary key.
DELETE FROM jobloom_key_buckets
WHERE binding = :binding AND full_at <= :now::float8 - :keep::float8
  AND tokens + (:now::float8 - tokens_at) * :rate >= :burst - 1e-9

-- name: drop_key_buckets
-- A binding's key rate is lifted at run time: every key's bucket starts full again.
DELETE FROM jobloom_key_buckets WHERE binding = :binding
