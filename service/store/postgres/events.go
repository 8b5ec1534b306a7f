package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
)

// appendSQL journals one batch: the update moves the run's last seq past the batch
// only if the batch follows it and the run goes on, and the insert writes the batch's
// row only if the update did. The update locks the run's row until the transaction
// ends, so appends to one run follow each other, and one that waited re-reads last_seq
// before it decides.
const appendSQL = `WITH run AS (
	UPDATE runs SET last_seq = $3 WHERE id = $1 AND last_seq = $2 - 1 AND status <> 3 RETURNING id
)
INSERT INTO run_events (run_id, first_seq, last_seq, frames) SELECT id, $2::bigint, $3::bigint, $4::bytea FROM run`

// emptyAppendSQL checks that a batch with no frames follows its run, as appendSQL
// would, and writes nothing: a row holds one frame at least.
const emptyAppendSQL = `UPDATE runs SET last_seq = last_seq WHERE id = $1 AND last_seq = $2 - 1 AND status <> 3`

// AppendEvents sends one batch as one statement, and several as a transaction in one
// round trip (and a second for the commit). It appends to the runs in the order of
// their ids, so that two calls that append to the same runs lock their rows in the
// same order and cannot deadlock.
func (s *Store) AppendEvents(ctx context.Context, batches []store.Events) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch len(batches) {
	case 0:
		return nil
	case 1:
		sql, args := appendArgs(batches[0])
		tag, err := s.pool.Exec(ctx, sql, args...)
		if err != nil {
			return fail(ctx, "append events", err)
		}
		if tag.RowsAffected() == 0 {
			return appendError(ctx, s.pool, batches[0])
		}
		return nil
	}

	order := make([]int, len(batches))
	for i := range order {
		order[i] = i
	}
	// A stable sort keeps the batches of one run in the order they follow each other.
	slices.SortStableFunc(order, func(i, j int) int { return strings.Compare(batches[i].RunID, batches[j].RunID) })
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	for _, i := range order {
		sql, args := appendArgs(batches[i])
		b.Queue(sql, args...)
	}
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(ctx)
	failed := -1
	if _, err := br.Exec(); err != nil {
		br.Close()
		return fail(ctx, "append events", err)
	}
	for _, i := range order {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return fail(ctx, "append events", err)
		}
		if tag.RowsAffected() == 0 {
			failed = i
			break
		}
	}
	if err := br.Close(); err != nil {
		return fail(ctx, "append events", err)
	}
	if failed >= 0 {
		// The batches after the one that failed ran too, but nothing commits, and
		// none of them can change whether the failed batch's run exists or has
		// finished.
		return appendError(ctx, tx, batches[failed])
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(ctx, "append events", err)
	}
	return nil
}

func appendArgs(b store.Events) (string, []any) {
	if len(b.Frames) == 0 {
		return emptyAppendSQL, []any{b.RunID, b.First}
	}
	return appendSQL, []any{b.RunID, b.First, b.First + int64(len(b.Frames)) - 1, encodeFrames(b.Frames)}
}

// appendError returns the error of batch b, whose append matched no run.
func appendError(ctx context.Context, q querier, b store.Events) error {
	status, last, err := runState(ctx, q, b.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return err
	case err != nil:
		return fail(ctx, "append events", err)
	case status == finished:
		return store.ErrFinished
	}
	return fmt.Errorf("%w: run %s is at seq %d, a batch starts at %d", store.ErrSeq, b.RunID, last, b.First)
}

// readEventsSQL reads, in one snapshot, run $1's last seq, the oldest seq its journal
// keeps, and the rows of the seqs in ($2, $3]. The rows start at the one that holds
// seq $2+1, found by a backward step of the primary key, so that reading the end of a
// long journal does not scan its beginning.
const readEventsSQL = `SELECT r.last_seq, o.oldest, e.first_seq, e.last_seq, e.frames
FROM runs r
CROSS JOIN LATERAL (SELECT min(first_seq) AS oldest FROM run_events WHERE run_id = r.id) o
LEFT JOIN LATERAL (
	SELECT first_seq, last_seq, frames FROM run_events
	WHERE run_id = r.id AND first_seq <= $3 AND last_seq > $2
		AND first_seq >= coalesce((SELECT max(first_seq) FROM run_events WHERE run_id = r.id AND first_seq <= $2 + 1), 0)
) e ON true
WHERE r.id = $1
ORDER BY e.first_seq`

func (s *Store) ReadEvents(ctx context.Context, id string, after int64, limit int) ([][]byte, error) {
	after, limit = max(after, 0), max(limit, 0)
	upTo := after + int64(limit)
	if upTo < after {
		upTo = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, readEventsSQL, id, after, upTo)
	if err != nil {
		return nil, fail(ctx, "read events", err)
	}
	defer rows.Close()
	var (
		found        bool
		last         int64
		oldest       *int64
		first, until *int64
		buf          []byte
		out          [][]byte
	)
	for rows.Next() {
		if err := rows.Scan(&last, &oldest, &first, &until, &buf); err != nil {
			return nil, fail(ctx, "read events", err)
		}
		found = true
		if first == nil {
			continue
		}
		if out, err = appendFrames(out, buf, *first, *until, after, upTo); err != nil {
			return nil, fmt.Errorf("%w: run %s, seq %d", err, id, *first)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, "read events", err)
	}
	if !found {
		return nil, store.ErrNotFound
	}
	if after+1 < keptFrom(oldest, last) {
		return nil, store.ErrExpired
	}
	return out, nil
}

// keptFrom returns the oldest seq kept of a journal whose oldest row starts at oldest
// (nil with no row) and whose last seq is last.
func keptFrom(oldest *int64, last int64) int64 {
	if oldest == nil {
		return last + 1
	}
	return *oldest
}

func (s *Store) EventBounds(ctx context.Context, id string) (oldest, last int64, err error) {
	var first *int64
	err = s.pool.QueryRow(ctx, `SELECT r.last_seq, (SELECT min(first_seq) FROM run_events WHERE run_id = r.id)
		FROM runs r WHERE r.id = $1`, id).Scan(&last, &first)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, 0, store.ErrNotFound
	case err != nil:
		return 0, 0, fail(ctx, "event bounds", err)
	}
	return keptFrom(first, last), last, nil
}
