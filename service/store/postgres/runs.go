package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
)

// runColumns are what scanRun reads, as a query over the runs table names them: a
// run's last seq is its journal's (lastSeqOf). runFields are the same, by name, for a
// query over a result that has them already.
var runColumns = strings.Replace(runFields, "last_seq", lastSeqOf("runs.id")+" AS last_seq", 1)

const runFields = `id, thread_id, exclusive, owner, agent, request_id, status, spec, checkpoint, last_seq, created_at, finished_at,
	holder, epoch, lease_until, wake_at, parent_run_id, parent_call_id, root_run_id, depth`

func scanRun(row pgx.Row) (store.Run, error) {
	var (
		r                  store.Run
		status             int16
		depth              int32
		finishedAt, wakeAt *time.Time
	)
	err := row.Scan(&r.ID, &r.ThreadID, &r.Exclusive, &r.Owner, &r.Agent, &r.RequestID, &status,
		&r.Spec, &r.Checkpoint, &r.LastSeq, &r.CreatedAt, &finishedAt,
		&r.Holder, &r.Epoch, &r.LeaseUntil, &wakeAt, &r.ParentRunID, &r.ParentCallID, &r.RootRunID, &depth)
	r.Status, r.Depth = store.Status(status), int(depth)
	if finishedAt != nil {
		r.FinishedAt = *finishedAt
	}
	if wakeAt != nil {
		r.WakeAt = *wakeAt
	}
	return r, err
}

// activeRunSQL finds a thread's unfinished exclusive run with runs_active_thread,
// whose predicate it repeats.
const activeRunSQL = `SELECT id FROM runs WHERE thread_id = $1 AND exclusive AND status <> 3 AND thread_id <> ''`

// errNoHolder is the error of a CreateRun or Claim that names no holder.
var errNoHolder = errors.New("postgres: a run's holder must be named")

// CreateRun leaves it to the unique index runs_active_thread to refuse a second active
// run on a thread, and only then looks for the run it collided with.
func (s *Store) CreateRun(ctx context.Context, r store.Run, lease time.Duration) error {
	if r.Holder == "" {
		return errNoHolder
	}
	for {
		_, err := s.pool.Exec(ctx, `INSERT INTO runs (id, thread_id, exclusive, owner, agent, request_id, status, spec,
				holder, epoch, lease_until, parent_run_id, parent_call_id, root_run_id, depth)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, now() + $10::interval, $11, $12, $13, $14)`,
			r.ID, r.ThreadID, r.Exclusive, r.Owner, r.Agent, r.RequestID, int16(store.Running), r.Spec, r.Holder, lease,
			r.ParentRunID, r.ParentCallID, r.RootRunID, int32(r.Depth))
		if err == nil {
			return nil
		}
		code, constraint := pgCode(err)
		switch {
		case code != uniqueViolation:
			return fail(ctx, "create run", err)
		case constraint != "runs_active_thread":
			return store.ErrExists
		}
		var active string
		err = s.pool.QueryRow(ctx, activeRunSQL, r.ThreadID).Scan(&active)
		switch {
		case err == nil:
			return &store.ThreadBusyError{RunID: active}
		case !errors.Is(err, pgx.ErrNoRows):
			return fail(ctx, "create run", err)
		}
		// The run that held the thread finished between the insert and the look-up,
		// so the thread may be free now: insert again.
	}
}

func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Run{}, store.ErrNotFound
	case err != nil:
		return store.Run{}, fail(ctx, "get run", err)
	}
	return r, nil
}

// heldBy is the condition of the run that the lease $1, $2, $3 (run id, holder, epoch)
// holds. A finished run is held by none.
const heldBy = `id = $1 AND holder = $2 AND epoch = $3 AND holder <> '' AND status <> 3`

// updateRunSQL updates the run a lease holds and notifies it, in one statement. A
// release ($7) sets lease_until to now, as every change that clears holder does.
const updateRunSQL = `WITH r AS (
	UPDATE runs SET status = $4::smallint, checkpoint = coalesce($5, checkpoint), wake_at = $6,
		finished_at = CASE WHEN $4::smallint = 3 THEN now() END,
		holder = CASE WHEN $7 THEN '' ELSE holder END,
		lease_until = CASE WHEN $7 THEN now() ELSE lease_until END
	WHERE ` + heldBy + ` RETURNING id
)
SELECT id FROM r WHERE pg_notify($8, id) IS NOT NULL`

func (s *Store) UpdateRun(ctx context.Context, l store.Lease, u store.Update) error {
	if u.Status < store.Running || u.Status > store.Finished {
		return fmt.Errorf("postgres: update run %s: invalid status %v", l.RunID, u.Status)
	}
	var wakeAt *time.Time
	if !u.WakeAt.IsZero() {
		wakeAt = &u.WakeAt
	}
	release := u.Release || u.Status == store.Finished
	tag, err := s.pool.Exec(ctx, updateRunSQL, l.RunID, l.Holder, l.Epoch, int16(u.Status), u.Checkpoint, wakeAt, release, s.channel)
	if err != nil {
		return fail(ctx, "update run", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return notHeld(ctx, s.pool, l.RunID, store.ErrFenced)
}

// notHeld is the error of a change to run id that matched no row: ErrNotFound or
// ErrFinished if so, else otherwise (the lease was lost, another replica holds the run).
func notHeld(ctx context.Context, q querier, id string, otherwise error) error {
	var status int16
	err := q.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, id).Scan(&status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return fail(ctx, "run state", err)
	case status == finished:
		return store.ErrFinished
	}
	return otherwise
}

// ChildRuns implements [store.Store].
func (s *Store) ChildRuns(ctx context.Context, parentID string) ([]store.Run, error) {
	if parentID == "" {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE parent_run_id = $1 ORDER BY created_at, ord`, parentID)
	return collect(ctx, "child runs", rows, err, scanRun)
}

func (s *Store) UnfinishedRuns(ctx context.Context) ([]store.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE status <> 3 ORDER BY created_at, ord`)
	return collect(ctx, "unfinished runs", rows, err, scanRun)
}

const inputColumns = `run_id, key, digest, request, ord, answer`

func scanInput(row pgx.Row) (store.Input, error) {
	var in store.Input
	err := row.Scan(&in.RunID, &in.Key, &in.Digest, &in.Request, &in.Order, &in.Answer)
	return in, err
}

// putInputSQL inserts an input unless its key is taken, and notifies its run if it did.
const putInputSQL = `WITH i AS (
	INSERT INTO inputs (run_id, key, digest, request, answer) VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (run_id, key) DO NOTHING RETURNING run_id, ord
)
SELECT ord FROM i WHERE pg_notify($6, '` + store.InputPrefix + `' || run_id) IS NOT NULL`

// PutInput inserts unless the key is taken, and then reads what holds it, in a
// statement of its own: one statement's snapshot would not see an input that a
// concurrent PutInput committed while the insert waited for it. Order comes from one
// sequence for every run's inputs.
func (s *Store) PutInput(ctx context.Context, in store.Input) (store.Input, bool, error) {
	for {
		err := s.pool.QueryRow(ctx, putInputSQL, in.RunID, in.Key, in.Digest, in.Request, in.Answer, s.channel).Scan(&in.Order)
		if code, _ := pgCode(err); code == foreignKeyViolation {
			return store.Input{}, false, store.ErrNotFound
		}
		switch {
		case err == nil:
			return in, true, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return store.Input{}, false, fail(ctx, "put input", err)
		}
		got, err := s.GetInput(ctx, in.RunID, in.Key)
		if !errors.Is(err, store.ErrNotFound) {
			return got, false, err
		}
		// The input went with its run, swept since the insert: the next insert finds
		// the run missing.
	}
}

func (s *Store) AnswerInput(ctx context.Context, runID, key string, answer []byte) error {
	tag, err := s.pool.Exec(ctx, `WITH a AS (
			UPDATE inputs SET answer = $3, request = ''::bytea WHERE run_id = $1 AND key = $2 RETURNING run_id
		)
		SELECT run_id FROM a WHERE pg_notify($4, run_id) IS NOT NULL`, runID, key, answer, s.channel)
	switch {
	case err != nil:
		return fail(ctx, "answer input", err)
	case tag.RowsAffected() == 0:
		return store.ErrNotFound
	}
	return nil
}

func (s *Store) GetInput(ctx context.Context, runID, key string) (store.Input, error) {
	in, err := scanInput(s.pool.QueryRow(ctx, `SELECT `+inputColumns+` FROM inputs WHERE run_id = $1 AND key = $2`, runID, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Input{}, store.ErrNotFound
	case err != nil:
		return store.Input{}, fail(ctx, "get input", err)
	}
	return in, nil
}

// PendingInputs reads the inputs of all the runs in one query, from inputs_pending.
func (s *Store) PendingInputs(ctx context.Context, ids []string) ([]store.Input, error) {
	if len(ids) == 0 {
		return nil, ctx.Err()
	}
	rows, err := s.pool.Query(ctx, `SELECT `+inputColumns+` FROM inputs
		WHERE run_id = ANY($1) AND answer IS NULL ORDER BY run_id, ord`, ids)
	return collect(ctx, "pending inputs", rows, err, scanInput)
}

// Sweep deletes runs and threads; their journals, inputs, messages and grants go with
// them by their foreign keys' ON DELETE CASCADE.
func (s *Store) Sweep(ctx context.Context, finishedBefore, idleBefore time.Time) (runs, threads int, err error) {
	// A child goes with its root: not while the root is unfinished, or finished since.
	tag, err := s.pool.Exec(ctx, `DELETE FROM runs WHERE status = 3 AND finished_at < $1
		AND NOT EXISTS (SELECT 1 FROM runs AS root WHERE root.id = runs.root_run_id
			AND (root.status <> 3 OR root.finished_at >= $1))`, finishedBefore)
	if err != nil {
		return 0, 0, fail(ctx, "sweep runs", err)
	}
	runs = int(tag.RowsAffected())
	tag, err = s.pool.Exec(ctx, `DELETE FROM threads WHERE updated_at < $1`, idleBefore)
	if err != nil {
		return runs, 0, fail(ctx, "sweep threads", err)
	}
	return runs, int(tag.RowsAffected()), nil
}
