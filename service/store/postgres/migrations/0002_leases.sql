-- Leases: holder is the replica that holds the run ('' for none), epoch counts the
-- claims (each write is fenced on it), lease_until is when the holder's lease ends by
-- the database's clock. Every change that clears holder sets lease_until to now(), so
-- that a run held by none has a lease_until in the past; runs from before leases are
-- held by none since this migration (a default that is not volatile fills them
-- without rewriting the table). wake_at is when a parked run must be taken up even
-- with no input, NULL for never.
ALTER TABLE runs
	ADD COLUMN holder      text NOT NULL DEFAULT '',
	ADD COLUMN epoch       bigint NOT NULL DEFAULT 0,
	ADD COLUMN lease_until timestamptz NOT NULL DEFAULT now(),
	ADD COLUMN wake_at     timestamptz;

-- Claimable looks for runs that need a holder in three index ranges: running runs
-- whose lease has ended, parked runs whose wake_at has come, and parked runs with an
-- unanswered input (inputs_pending).
CREATE INDEX runs_running_lease ON runs (lease_until) WHERE status = 1;
CREATE INDEX runs_parked_wake ON runs (wake_at) WHERE status = 2;

-- An input keeps the request it carried, for the run's holder to act on, and ord, its
-- place among all inputs: a run's inputs in ord are in the order they came. Inputs
-- from before are numbered as they lie.
ALTER TABLE inputs
	ADD COLUMN request bytea,
	ADD COLUMN ord     bigint GENERATED ALWAYS AS IDENTITY;

-- PendingInputs and Claimable look for the unanswered inputs of runs.
CREATE INDEX inputs_pending ON inputs (run_id, ord) WHERE answer IS NULL;
