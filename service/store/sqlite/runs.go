package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/service/store"
)

// runColumns are what scanRun reads, in its order.
const runColumns = `id, thread_id, exclusive, owner, agent, request_id, status,
	spec, spec IS NULL, checkpoint, checkpoint IS NULL, last_seq, created_at, finished_at,
	holder, epoch, lease_until, wake_at, parent_run_id, parent_call_id, root_run_id, depth`

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
		created, until   int64
		finished, wakeAt sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.ThreadID, &r.Exclusive, &r.Owner, &r.Agent, &r.RequestID, &status,
		&spec.b, &spec.null, &checkpoint.b, &checkpoint.null, &r.LastSeq, &created, &finished,
		&r.Holder, &r.Epoch, &until, &wakeAt, &r.ParentRunID, &r.ParentCallID, &r.RootRunID, &r.Depth); err != nil {
		return store.Run{}, err
	}
	r.Status = store.Status(status)
	r.Spec, r.Checkpoint = spec.bytes(), checkpoint.bytes()
	r.CreatedAt, r.LeaseUntil = fromNanos(created), fromNanos(until)
	if finished.Valid {
		r.FinishedAt = fromNanos(finished.Int64)
	}
	if wakeAt.Valid {
		r.WakeAt = fromNanos(wakeAt.Int64)
	}
	return r, nil
}

// errNoHolder is the error of a CreateRun or Claim that names no holder.
var errNoHolder = errors.New("sqlite: a run's holder must be named")

// CreateRun implements [store.Store]. Whatever r says of them, the run starts Running,
// created now, held by r.Holder at epoch 1, with no checkpoint and no events.
func (s *Store) CreateRun(ctx context.Context, r store.Run, lease time.Duration) error {
	if r.Holder == "" {
		return errNoHolder
	}
	now := time.Now()
	return s.write(ctx, "create run", func(tx *sql.Tx) error {
		_, insertErr := tx.ExecContext(ctx, `INSERT INTO runs (id, thread_id, exclusive, owner, agent, request_id,
			status, spec, checkpoint, last_seq, created_at, finished_at, holder, epoch, lease_until, wake_at,
			parent_run_id, parent_call_id, root_run_id, depth)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, ?, NULL, ?, 1, ?, NULL, ?, ?, ?, ?)`,
			r.ID, r.ThreadID, r.Exclusive, r.Owner, r.Agent, r.RequestID, int64(store.Running), r.Spec, nanos(now),
			r.Holder, nanos(now.Add(lease)), r.ParentRunID, r.ParentCallID, r.RootRunID, r.Depth)
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

// heldBy is the condition of a run that lease ?1, ?2, ?3 (id, holder, epoch) holds:
// a finished run is held by none.
const heldBy = `id = ?1 AND holder = ?2 AND epoch = ?3 AND holder != '' AND status != 3`

// UpdateRun implements [store.Store].
func (s *Store) UpdateRun(ctx context.Context, l store.Lease, u store.Update) error {
	switch u.Status {
	case store.Running, store.Parked, store.Finished:
	default:
		return fmt.Errorf("sqlite: update run %q: invalid status %v", l.RunID, u.Status)
	}
	now := nanos(time.Now())
	var finished, wakeAt sql.NullInt64
	if u.Status == store.Finished {
		finished = sql.NullInt64{Int64: now, Valid: true}
	}
	if !u.WakeAt.IsZero() {
		wakeAt = sql.NullInt64{Int64: nanos(u.WakeAt), Valid: true}
	}
	release := u.Release || u.Status == store.Finished
	return s.change(ctx, "update run", []string{l.RunID}, func(tx *sql.Tx) error {
		n, err := changed(tx.ExecContext(ctx, `UPDATE runs
			SET status = ?4, finished_at = ?5, checkpoint = CASE WHEN ?6 THEN ?7 ELSE checkpoint END, wake_at = ?8,
				holder = CASE WHEN ?9 THEN '' ELSE holder END, lease_until = CASE WHEN ?9 THEN ?10 ELSE lease_until END
			WHERE `+heldBy,
			l.RunID, l.Holder, l.Epoch, int64(u.Status), finished, u.Checkpoint != nil, u.Checkpoint, wakeAt, release, now))
		if err != nil || n > 0 {
			return err
		}
		return notHeld(ctx, tx, l.RunID, store.ErrFenced)
	})
}

// notHeld is the error of a write to run id that its conditions kept from the run:
// ErrNotFound or ErrFinished if so, else otherwise (the lease is lost, or another
// holds the run).
func notHeld(ctx context.Context, tx *sql.Tx, id string, otherwise error) error {
	var status int64
	err := tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, id).Scan(&status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	case err != nil:
		return err
	case store.Status(status) == store.Finished:
		return fmt.Errorf("run %q: %w", id, store.ErrFinished)
	}
	return fmt.Errorf("run %q: %w", id, otherwise)
}

// Claim implements [store.Store], in one statement.
func (s *Store) Claim(ctx context.Context, id, holder string, lease time.Duration, force bool) (store.Run, error) {
	if holder == "" {
		return store.Run{}, errNoHolder
	}
	now := time.Now()
	var r store.Run
	err := s.change(ctx, "claim run", []string{id}, func(tx *sql.Tx) error {
		var err error
		r, err = scanRun(tx.QueryRowContext(ctx, `UPDATE runs SET holder = ?2, epoch = epoch + 1, lease_until = ?3
			WHERE id = ?1 AND status != 3 AND (holder = '' OR lease_until < ?4 OR holder = ?2 OR ?5)
			RETURNING `+runColumns, id, holder, nanos(now.Add(lease)), nanos(now), force))
		if errors.Is(err, sql.ErrNoRows) {
			return notHeld(ctx, tx, id, store.ErrHeld)
		}
		return err
	})
	if err != nil {
		return store.Run{}, err
	}
	return r, nil
}

// Renew implements [store.Store], in one transaction.
func (s *Store) Renew(ctx context.Context, held []store.Lease, lease time.Duration) ([]string, error) {
	if len(held) == 0 {
		return nil, ctx.Err()
	}
	until := nanos(time.Now().Add(lease))
	var lost []string
	err := s.write(ctx, "renew leases", func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `UPDATE runs SET lease_until = ?4 WHERE `+heldBy)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, l := range held {
			n, err := changed(stmt.ExecContext(ctx, l.RunID, l.Holder, l.Epoch, until))
			if err != nil {
				return err
			}
			if n == 0 {
				lost = append(lost, l.RunID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lost, nil
}

// claimableIDs selects up to ?4 runs that need a holder at ?1, longest waiting first:
// a parked run due to wake only once due at ?2 (?3 is unused).
const claimableIDs = `SELECT r.id FROM runs r
	WHERE r.status != 3 AND r.lease_until <= ?1 AND (r.holder = '' OR r.lease_until < ?1)
		AND (r.status = 1 OR r.wake_at <= ?2
			OR EXISTS (SELECT 1 FROM inputs i WHERE i.run_id = r.id AND i.answer IS NULL))
	ORDER BY r.lease_until, r.id LIMIT ?4`

// Claimable implements [store.Store]. A run held by none has a lease_until in the
// past, so lease_until bounds the scan of runs_lease.
func (s *Store) Claimable(ctx context.Context, limit int) ([]store.Run, error) {
	now := nanos(time.Now())
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM runs
		WHERE id IN (`+claimableIDs+`) ORDER BY lease_until, id`, now, now, 0, max(limit, 0))
	if err != nil {
		return nil, wrap(ctx, "claimable runs", err)
	}
	return collect(ctx, "claimable runs", rows, scanRun)
}

// Heartbeat implements [store.Store], in one transaction.
func (s *Store) Heartbeat(ctx context.Context, r store.Replica, alive time.Duration) ([]store.Replica, error) {
	now := time.Now()
	var out []store.Replica
	err := s.write(ctx, "heartbeat", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO replicas (id, started_at, seen_at, draining) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (id) DO UPDATE SET started_at = ?2, seen_at = ?3, draining = ?4`, r.ID, nanos(r.StartedAt), nanos(now), r.Draining); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM replicas WHERE seen_at < ?`, nanos(now.Add(-time.Hour))); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, started_at, draining FROM replicas WHERE seen_at >= ? ORDER BY started_at, id`, nanos(now.Add(-alive)))
		if err != nil {
			return err
		}
		out, err = collect(ctx, "heartbeat", rows, func(sc scanner) (store.Replica, error) {
			var rp store.Replica
			var started int64
			err := sc.Scan(&rp.ID, &started, &rp.Draining)
			rp.StartedAt = time.Unix(0, started)
			return rp, err
		})
		return err
	})
	return out, err
}

// ClaimNext implements [store.Store], in one transaction: SQLite writes one at a time,
// so no other claim can take a run it chose.
func (s *Store) ClaimNext(ctx context.Context, holder string, lease time.Duration, limit int, wakeAfter time.Duration) ([]store.Run, error) {
	if holder == "" {
		return nil, errNoHolder
	}
	now := time.Now()
	var out []store.Run
	err := s.write(ctx, "claim runs", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, claimableIDs, nanos(now), nanos(now.Add(-wakeAfter)), 0, max(limit, 0))
		if err != nil {
			return err
		}
		ids, err := collect(ctx, "claim runs", rows, func(sc scanner) (string, error) {
			var id string
			return id, sc.Scan(&id)
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, err := scanRun(tx.QueryRowContext(ctx, `UPDATE runs SET holder = ?2, epoch = epoch + 1, lease_until = ?3
				WHERE id = ?1 RETURNING `+runColumns, id, holder, nanos(now.Add(lease))))
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(out))
	for i, r := range out {
		ids[i] = r.ID
	}
	if len(ids) > 0 {
		s.hub.Notify(ids...)
	}
	return out, nil
}

// collect reads rows with scan, and closes them.
func collect[T any](ctx context.Context, op string, rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, wrap(ctx, op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	return out, nil
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
	return collect(ctx, "unfinished runs", rows, scanRun)
}

// inputColumns are what scanInput reads, in its order.
const inputColumns = `run_id, key, digest, digest IS NULL, request, request IS NULL, ord, answer, answer IS NULL`

func scanInput(sc scanner) (store.Input, error) {
	var (
		in                      store.Input
		digest, request, answer blob
	)
	if err := sc.Scan(&in.RunID, &in.Key, &digest.b, &digest.null, &request.b, &request.null, &in.Order,
		&answer.b, &answer.null); err != nil {
		return store.Input{}, err
	}
	in.Digest, in.Request, in.Answer = digest.bytes(), request.bytes(), answer.bytes()
	return in, nil
}

// PutInput implements [store.Store]. A run's inputs are ordered 1, 2, 3…
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
		var err error
		got, err = scanInput(tx.QueryRowContext(ctx, `INSERT INTO inputs (run_id, key, digest, request, answer, ord)
			VALUES (?1, ?2, ?3, ?4, ?5, (SELECT coalesce(max(ord), 0) + 1 FROM inputs WHERE run_id = ?1))
			ON CONFLICT (run_id, key) DO NOTHING RETURNING `+inputColumns, in.RunID, in.Key, in.Digest, in.Request, in.Answer))
		if err == nil {
			added = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		got, err = scanInput(tx.QueryRowContext(ctx, `SELECT `+inputColumns+` FROM inputs WHERE run_id = ? AND key = ?`,
			in.RunID, in.Key))
		return err
	})
	if err != nil {
		return store.Input{}, false, err
	}
	if added {
		s.hub.Notify(store.InputPrefix + in.RunID)
	}
	return got, added, nil
}

// AnswerInput implements [store.Store].
func (s *Store) AnswerInput(ctx context.Context, runID, key string, answer []byte) error {
	return s.change(ctx, "answer input", []string{runID}, func(tx *sql.Tx) error {
		n, err := changed(tx.ExecContext(ctx, `UPDATE inputs SET answer = ?, request = x'' WHERE run_id = ? AND key = ?`, answer, runID, key))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("input %q of run %q: %w", key, runID, store.ErrNotFound)
		}
		return nil
	})
}

// GetInput implements [store.Store].
func (s *Store) GetInput(ctx context.Context, runID, key string) (store.Input, error) {
	in, err := scanInput(s.r.QueryRowContext(ctx, `SELECT `+inputColumns+` FROM inputs WHERE run_id = ? AND key = ?`, runID, key))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Input{}, fmt.Errorf("input %q of run %q: %w", key, runID, store.ErrNotFound)
	}
	if err != nil {
		return store.Input{}, wrap(ctx, "get input", err)
	}
	return in, nil
}

// PendingInputs implements [store.Store]. The ids go as one JSON array, whatever
// their number.
func (s *Store) PendingInputs(ctx context.Context, ids []string) ([]store.Input, error) {
	if len(ids) == 0 {
		return nil, ctx.Err()
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending inputs: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+inputColumns+` FROM inputs
		WHERE run_id IN (SELECT value FROM json_each(?)) AND answer IS NULL ORDER BY run_id, ord`, string(list))
	if err != nil {
		return nil, wrap(ctx, "pending inputs", err)
	}
	return collect(ctx, "pending inputs", rows, scanInput)
}

// ChildRuns implements [store.Store].
func (s *Store) ChildRuns(ctx context.Context, parentID string) ([]store.Run, error) {
	if parentID == "" {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM runs
		WHERE parent_run_id = ? ORDER BY created_at, id`, parentID)
	if err != nil {
		return nil, wrap(ctx, "child runs", err)
	}
	return collect(ctx, "child runs", rows, scanRun)
}

// Sweep implements [store.Store]. Removing a run removes its journal and inputs with
// it (the foreign keys cascade); removing a thread, its messages and grants.
func (s *Store) Sweep(ctx context.Context, finishedBefore, idleBefore time.Time) (runs, threads int, err error) {
	err = s.write(ctx, "sweep", func(tx *sql.Tx) error {
		// A child goes with its root: not while the root is unfinished, or finished since.
		n, err := changed(tx.ExecContext(ctx, `DELETE FROM runs WHERE status = 3 AND finished_at < ?1
			AND NOT EXISTS (SELECT 1 FROM runs AS root WHERE root.id = runs.root_run_id
				AND (root.status != 3 OR root.finished_at >= ?1))`, nanos(finishedBefore)))
		if err != nil {
			return err
		}
		runs = int(n)
		n, err = changed(tx.ExecContext(ctx, `DELETE FROM threads WHERE updated_at < ?`, nanos(idleBefore)))
		threads = int(n)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return runs, threads, nil
}
