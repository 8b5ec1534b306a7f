-- Runs: one row per run. status is store.Status (1 running, 2 parked, 3 finished);
-- finished_at is NULL until the run finishes. ord breaks ties between runs created
-- within the same microsecond, so that UnfinishedRuns has one order.
CREATE TABLE runs (
	id          text PRIMARY KEY,
	ord         bigint GENERATED ALWAYS AS IDENTITY,
	thread_id   text NOT NULL,
	exclusive   boolean NOT NULL,
	owner       text NOT NULL,
	agent       text NOT NULL,
	request_id  text NOT NULL,
	status      smallint NOT NULL,
	spec        bytea,
	checkpoint  bytea,
	last_seq    bigint NOT NULL DEFAULT 0,
	created_at  timestamptz NOT NULL DEFAULT now(),
	finished_at timestamptz
);

-- At most one unfinished exclusive run per thread: the index is what enforces it, so
-- that two CreateRun calls on two replicas cannot both pass a check made before their
-- inserts. Queries that look for a thread's active run repeat its predicate so that
-- they use it.
CREATE UNIQUE INDEX runs_active_thread ON runs (thread_id)
	WHERE exclusive AND status <> 3 AND thread_id <> '';

-- UnfinishedRuns reads these at start-up, oldest first.
CREATE INDEX runs_unfinished ON runs (created_at, ord) WHERE status <> 3;

-- Sweep removes finished runs by when they finished.
CREATE INDEX runs_finished ON runs (finished_at) WHERE status = 3;

-- Journals: one row per appended batch, its frames in one bytea, each frame a uvarint
-- length and its bytes. A batch holds seqs first_seq..last_seq.
CREATE TABLE run_events (
	run_id    text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	first_seq bigint NOT NULL,
	last_seq  bigint NOT NULL,
	frames    bytea NOT NULL,
	PRIMARY KEY (run_id, first_seq)
);

CREATE TABLE inputs (
	run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	key    text NOT NULL,
	digest bytea,
	answer bytea,
	PRIMARY KEY (run_id, key)
);

CREATE TABLE threads (
	id         text PRIMARY KEY,
	owner      text NOT NULL,
	agent      text NOT NULL,
	messages   bigint NOT NULL DEFAULT 0,
	bytes      bigint NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);

-- ListThreads pages an owner's threads, most recently updated first, then by id.
CREATE INDEX threads_owner_updated ON threads (owner, updated_at DESC, id);

-- Sweep removes threads by when they were last updated.
CREATE INDEX threads_updated ON threads (updated_at);

CREATE TABLE thread_messages (
	thread_id text NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
	idx       bigint NOT NULL,
	run_id    text NOT NULL,
	data      bytea,
	PRIMARY KEY (thread_id, idx)
);
