-- Leases: holder is the replica that holds the run ('' for none), epoch counts the
-- claims (each write is fenced on it), lease_until is when the holder's lease ends;
-- every change that clears holder sets lease_until to the time it did, so that a
-- run held by none has a lease_until in the past. Runs from before leases are held
-- by none since they were created (or finished). wake_at is when a parked run must be
-- taken up even with no input, NULL for never. Times are unix nanoseconds.
ALTER TABLE runs ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN wake_at INTEGER;
UPDATE runs SET lease_until = coalesce(finished_at, created_at);

-- Claimable reads the unfinished runs whose lease has ended, longest ended first.
CREATE INDEX runs_lease ON runs (lease_until) WHERE status != 3;

-- An input keeps the request it carried, for the run's holder to act on, and its order
-- among its run's inputs. Inputs from before keep the order they were inserted in.
ALTER TABLE inputs ADD COLUMN request BLOB;
ALTER TABLE inputs ADD COLUMN ord INTEGER NOT NULL DEFAULT 0;
UPDATE inputs SET ord = rowid;

-- PendingInputs and Claimable look for the unanswered inputs of runs.
CREATE INDEX inputs_pending ON inputs (run_id, ord) WHERE answer IS NULL;
