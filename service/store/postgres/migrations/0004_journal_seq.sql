-- A run's last seq is its journal's: the last seq of its last run_events row. Appends
-- lock the run's row to fence it, and no longer write a new version of it for every
-- event, which filled the table with dead rows at a provider's pace. An agentd from
-- before this migration reads and writes runs.last_seq as it journals and reads a run, so
-- dropping it makes one that still runs beside this schema fail each of them rather
-- than append at a seq the journal has passed: stop older replicas before starting
-- this version.
ALTER TABLE runs DROP COLUMN last_seq;
