package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/service/store"
)

// runColumns are what scanRun reads, in its order.
const runColumns = `id, thread_id, exclusive, owner, agent, request_id, status,
	spec, spec IS NULL, checkpoint, checkpoint IS NULL, last_seq, created_at, finished_at`

// activeRunQuery finds a thread's unfinished exclusive run; its conditions are those
// of the runs_active_thread index, so that SQLite answers it from the index.
const activeRunQuery = `SELECT id FROM runs
	WHERE thread_id = ? AND exclusive AND status != 3`

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner) (store.Run, error) {
	var (
		r                store.Run
		status           int64
		spec, checkpoint blob
		created          int64
		finished         sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.ThreadID, &r.Exclusive, &r.Owner, &r.Agent, &r.RequestID, &status,
		&spec.b, &spec.null, &checkpoint.b, &checkpoint.null, &r.LastSeq, &created, &finished); err != nil {
		return store.Run{}, err
	}
	r.Status = store.Status(status)
	r.Spec, r.Checkpoint = spec.bytes(), checkpoint.bytes()
	r.CreatedAt = fromNanos(created)
	if finished.Valid {
		r.FinishedAt = fromNanos(finished.Int64)
	}
	return r, nil
}

// CreateRun implements [store.Store]. Whatever r says of them, the run starts Running,
// created now, with no checkpoint and no events.
func (s *Store) CreateRun(ctx context.Context, r store.Run) error {
	created := nanos(time.Now())
	return s.write(ctx, "create run", func(tx *sql.Tx) error {
		_, insertErr := tx.ExecContext(ctx, `INSERT INTO runs (id, thread_id, exclusive, owner, agent, request_id,
			status, spec, checkpoint, last_seq, created_at, finished_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, ?, NULL)`,
			r.ID, r.ThreadID, r.Exclusive, r.Owner, r.Agent, r.RequestID, int64(store.Running), r.Spec, created)
		if insertErr == nil || !isUniqueViolation(insertErr) {
			return insertErr
		}
		// The conflict is the run's id or its thread's active run; the transaction
		// still holds the write lock, so what it reads now is what the insert met.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, r.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("run %q: %w", r.ID, store.ErrExists)
		}
		var active string
		switch err := tx.QueryRowContext(ctx, activeRunQuery, r.ThreadID).Scan(&active); {
		case err == nil:
			return &store.ThreadBusyError{RunID: active}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		return insertErr
	})
}

// GetRun implements [store.Store].
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Run{}, wrap(ctx, "get run", err)
	}
	return r, nil
}

// UpdateRun implements [store.Store].
func (s *Store) UpdateRun(ctx context.Context, id string, st store.Status, checkpoint []byte) error {
	switch st {
	case store.Running, store.Parked, store.Finished:
	default:
		return fmt.Errorf("sqlite: update run %q: invalid status %v", id, st)
	}
	var finished sql.NullInt64
	if st == store.Finished {
		finished = sql.NullInt64{Int64: nanos(time.Now()), Valid: true}
	}
	return s.write(ctx, "update run", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs
			SET status = ?, finished_at = ?, checkpoint = CASE WHEN ? THEN ? ELSE checkpoint END
			WHERE id = ? AND status != 3`,
			int64(st), finished, checkpoint != nil, checkpoint, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		return runMissingOrFinished(ctx, tx, id)
	})
}

// runMissingOrFinished is the error for a write that found no unfinished run of id.
func runMissingOrFinished(ctx context.Context, tx *sql.Tx, id string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	return fmt.Errorf("run %q: %w", id, store.ErrFinished)
}

// UnfinishedRuns implements [store.Store].
func (s *Store) UnfinishedRuns(ctx context.Context) ([]store.Run, error) {
	// rowid breaks ties between runs created in the same nanosecond in the order they
	// were inserted.
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM runs
		WHERE status != 3 ORDER BY created_at, rowid`)
	if err != nil {
		return nil, wrap(ctx, "unfinished runs", err)
	}
	defer rows.Close()
	var runs []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, wrap(ctx, "unfinished runs", err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "unfinished runs", err)
	}
	return runs, nil
}

// PutInput implements [store.Store].
func (s *Store) PutInput(ctx context.Context, in store.Input) (store.Input, bool, error) {
	var (
		got   store.Input
		added bool
	)
	err := s.write(ctx, "put input", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, in.RunID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("run %q: %w", in.RunID, store.ErrNotFound)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO inputs (run_id, key, digest, answer) VALUES (?, ?, ?, ?)
			ON CONFLICT (run_id, key) DO NOTHING`, in.RunID, in.Key, in.Digest, in.Answer)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			got, added = in, true
			return err
		}
		var digest, answer blob
		if err := tx.QueryRowContext(ctx, `SELECT digest, digest IS NULL, answer, answer IS NULL
			FROM inputs WHERE run_id = ? AND key = ?`, in.RunID, in.Key).
			Scan(&digest.b, &digest.null, &answer.b, &answer.null); err != nil {
			return err
		}
		got = store.Input{RunID: in.RunID, Key: in.Key, Digest: digest.bytes(), Answer: answer.bytes()}
		return nil
	})
	if err != nil {
		return store.Input{}, false, err
	}
	return got, added, nil
}

// AnswerInput implements [store.Store].
func (s *Store) AnswerInput(ctx context.Context, runID, key string, answer []byte) error {
	return s.write(ctx, "answer input", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE inputs SET answer = ? WHERE run_id = ? AND key = ?`, answer, runID, key)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("input %q of run %q: %w", key, runID, store.ErrNotFound)
		}
		return nil
	})
}

// Sweep implements [store.Store]. Removing a run removes its journal and inputs with
// it (the foreign keys cascade); removing a thread, its messages.
func (s *Store) Sweep(ctx context.Context, finishedBefore, idleBefore time.Time) (runs, threads int, err error) {
	err = s.write(ctx, "sweep", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE status = 3 AND finished_at < ?`, nanos(finishedBefore))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		runs = int(n)
		res, err = tx.ExecContext(ctx, `DELETE FROM threads WHERE updated_at < ?`, nanos(idleBefore))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		threads = int(n)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return runs, threads, nil
}
