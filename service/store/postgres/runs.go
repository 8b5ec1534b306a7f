package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
)

const runColumns = `id, thread_id, exclusive, owner, agent, request_id, status, spec, checkpoint, last_seq, created_at, finished_at`

func scanRun(row pgx.Row) (store.Run, error) {
	var (
		r          store.Run
		status     int16
		finishedAt *time.Time
	)
	err := row.Scan(&r.ID, &r.ThreadID, &r.Exclusive, &r.Owner, &r.Agent, &r.RequestID, &status,
		&r.Spec, &r.Checkpoint, &r.LastSeq, &r.CreatedAt, &finishedAt)
	r.Status = store.Status(status)
	if finishedAt != nil {
		r.FinishedAt = *finishedAt
	}
	return r, err
}

// activeRunSQL finds a thread's unfinished exclusive run with runs_active_thread,
// whose predicate it repeats.
const activeRunSQL = `SELECT id FROM runs WHERE thread_id = $1 AND exclusive AND status <> 3 AND thread_id <> ''`

// CreateRun leaves it to the unique index runs_active_thread to refuse a second active
// run on a thread, and only then looks for the run it collided with.
func (s *Store) CreateRun(ctx context.Context, r store.Run) error {
	for {
		_, err := s.pool.Exec(ctx, `INSERT INTO runs (id, thread_id, exclusive, owner, agent, request_id, status, spec)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			r.ID, r.ThreadID, r.Exclusive, r.Owner, r.Agent, r.RequestID, int16(store.Running), r.Spec)
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

func (s *Store) UpdateRun(ctx context.Context, id string, st store.Status, checkpoint []byte) error {
	if st < store.Running || st > store.Finished {
		return fmt.Errorf("postgres: update run %s: invalid status %v", id, st)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET status = $2::smallint, checkpoint = coalesce($3, checkpoint),
			finished_at = CASE WHEN $2::smallint = 3 THEN now() END
		WHERE id = $1 AND status <> 3`, id, int16(st), checkpoint)
	if err != nil {
		return fail(ctx, "update run", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	status, _, err := runState(ctx, s.pool, id)
	switch {
	case err != nil:
		return fail(ctx, "update run", err)
	case status == finished:
		return store.ErrFinished
	}
	// The run did not exist when the update ran: it was created since.
	return store.ErrNotFound
}

// runState returns run id's status and last seq, or ErrNotFound. It tells why a change
// to the run that is conditional on them matched no row.
func runState(ctx context.Context, q querier, id string) (status int16, last int64, err error) {
	err = q.QueryRow(ctx, `SELECT status, last_seq FROM runs WHERE id = $1`, id).Scan(&status, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, store.ErrNotFound
	}
	return status, last, err
}

func (s *Store) UnfinishedRuns(ctx context.Context) ([]store.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE status <> 3 ORDER BY created_at, ord`)
	if err != nil {
		return nil, fail(ctx, "unfinished runs", err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fail(ctx, "unfinished runs", err)
	}
	return runs, nil
}

// PutInput inserts unless the key is taken, and then reads what holds it, in a
// statement of its own: one statement's snapshot would not see an input that a
// concurrent PutInput committed while the insert waited for it.
func (s *Store) PutInput(ctx context.Context, in store.Input) (store.Input, bool, error) {
	for {
		tag, err := s.pool.Exec(ctx, `INSERT INTO inputs (run_id, key, digest, answer) VALUES ($1, $2, $3, $4)
			ON CONFLICT (run_id, key) DO NOTHING`, in.RunID, in.Key, in.Digest, in.Answer)
		if code, _ := pgCode(err); code == foreignKeyViolation {
			return store.Input{}, false, store.ErrNotFound
		}
		if err != nil {
			return store.Input{}, false, fail(ctx, "put input", err)
		}
		if tag.RowsAffected() == 1 {
			return in, true, nil
		}
		got := store.Input{RunID: in.RunID, Key: in.Key}
		err = s.pool.QueryRow(ctx, `SELECT digest, answer FROM inputs WHERE run_id = $1 AND key = $2`,
			in.RunID, in.Key).Scan(&got.Digest, &got.Answer)
		switch {
		case err == nil:
			return got, false, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return store.Input{}, false, fail(ctx, "put input", err)
		}
		// The input went with its run, swept since the insert: the next insert finds
		// the run missing.
	}
}

func (s *Store) AnswerInput(ctx context.Context, runID, key string, answer []byte) error {
	tag, err := s.pool.Exec(ctx, `UPDATE inputs SET answer = $3 WHERE run_id = $1 AND key = $2`, runID, key, answer)
	switch {
	case err != nil:
		return fail(ctx, "answer input", err)
	case tag.RowsAffected() == 0:
		return store.ErrNotFound
	}
	return nil
}

// Sweep deletes runs and threads; their journals, inputs and messages go with them by
// their foreign keys' ON DELETE CASCADE.
func (s *Store) Sweep(ctx context.Context, finishedBefore, idleBefore time.Time) (runs, threads int, err error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM runs WHERE status = 3 AND finished_at < $1`, finishedBefore)
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
