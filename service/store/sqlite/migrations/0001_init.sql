-- Runs: one row per run. status is store.Status (1 running, 2 parked, 3 finished);
-- times are unix nanoseconds, UTC; finished_at is NULL until the run finishes.
CREATE TABLE runs (
	id          TEXT PRIMARY KEY,
	thread_id   TEXT NOT NULL,
	exclusive   INTEGER NOT NULL,
	owner       TEXT NOT NULL,
	agent       TEXT NOT NULL,
	request_id  TEXT NOT NULL,
	status      INTEGER NOT NULL,
	spec        BLOB,
	checkpoint  BLOB,
	last_seq    INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	finished_at INTEGER
);

-- At most one unfinished exclusive run per thread: the index is what enforces it, so
-- that two CreateRun calls cannot both pass a check made before their inserts.
CREATE UNIQUE INDEX runs_active_thread ON runs (thread_id)
	WHERE exclusive AND status != 3;

-- UnfinishedRuns reads these at start-up, oldest first.
CREATE INDEX runs_unfinished ON runs (created_at) WHERE status != 3;

-- Sweep removes finished runs by when they finished.
CREATE INDEX runs_finished ON runs (finished_at) WHERE status = 3;

-- Journals: one row per appended batch, its frames in one blob, each frame a uvarint
-- length and its bytes. A batch holds seqs first_seq..last_seq.
CREATE TABLE run_events (
	run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	first_seq INTEGER NOT NULL,
	last_seq  INTEGER NOT NULL,
	frames    BLOB NOT NULL,
	PRIMARY KEY (run_id, first_seq)
);

CREATE TABLE inputs (
	run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	key    TEXT NOT NULL,
	digest BLOB,
	answer BLOB,
	PRIMARY KEY (run_id, key)
);

CREATE TABLE threads (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	agent      TEXT NOT NULL,
	messages   INTEGER NOT NULL,
	bytes      INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

-- ListThreads pages an owner's threads, most recently updated first.
CREATE INDEX threads_owner_updated ON threads (owner, updated_at DESC, id);

-- Sweep removes threads by when they were last updated.
CREATE INDEX threads_updated ON threads (updated_at);

CREATE TABLE thread_messages (
	thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
	idx       INTEGER NOT NULL,
	run_id    TEXT NOT NULL,
	data      BLOB,
	PRIMARY KEY (thread_id, idx)
);
