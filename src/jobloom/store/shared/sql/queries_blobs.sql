-- Blob references (core/blobref.py): a payload, result or step result offloaded to the app's blob
-- store is stored as 'jobloom-blob:1:<id>:<size>'; its first 47 characters name the blob.

-- row: BlobRefRow
-- A blob reference as a row stores it (or its first 47 characters, which name the blob).
--   ref: str

-- name: blob_refs_of_jobs
-- returns: BlobRefRow
-- The blob references of jobs about to be deleted (payloads, results and step results).
SELECT payload AS ref FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) AND substr(payload, 1, 13) = 'jobloom-blob:'
UNION ALL
SELECT result FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) AND substr(result, 1, 13) = 'jobloom-blob:'
UNION ALL
SELECT result FROM jobloom_steps WHERE job_id = ANY(:ids::bigint[]) AND substr(result, 1, 13) = 'jobloom-blob:'

-- name: blob_refs_among
-- returns: BlobRefRow
-- Which of the references ``refs`` (each 'jobloom-blob:1:<id>') some row still holds: the sweeper's
-- check before it deletes a blob. It reads every job and step (no index holds references), which is why
-- the sweeper runs it once per pass over a page of old blobs, not per blob.
SELECT substr(payload, 1, 47) AS ref FROM jobloom_jobs WHERE substr(payload, 1, 47) = ANY(:refs::text[])
UNION ALL
SELECT substr(result, 1, 47) FROM jobloom_jobs WHERE substr(result, 1, 47) = ANY(:refs::text[])
UNION ALL
SELECT substr(result, 1, 47) FROM jobloom_steps WHERE substr(result, 1, 47) = ANY(:refs::text[])
