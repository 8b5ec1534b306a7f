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
	"github.com/agentd/agentd/service/store/internal/fence"
)

// appendSQL journals one batch: the update moves the run's last seq past the batch
// only if the batch follows it and the lease ($2, $3) holds the run, and the insert
// writes the batch's row only if the update did. The update locks the run's row until
// the transaction ends, so appends to one run follow each other, and one that waited
// re-reads the row before it decides; a claim waits for the append, and an append
// after the claim finds the new epoch.
const appendSQL = `WITH run AS (
	UPDATE runs SET last_seq = $5 WHERE ` + heldBy + ` AND last_seq = $4 - 1 RETURNING id
), ins AS (
	INSERT INTO run_events (run_id, first_seq, last_seq, frames) SELECT id, $4::bigint, $5::bigint, $6::bytea FROM run
)
SELECT id FROM run`

// emptyAppendSQL checks that a batch with no frames follows its run under its lease,
// as appendSQL would, and writes nothing: a row holds one frame at least.
const emptyAppendSQL = `SELECT id FROM runs WHERE ` + heldBy + ` AND last_seq = $4 - 1 FOR NO KEY UPDATE`

// AppendEvents sends one batch as one statement, that notifies its run: one round
// trip. Several go as a transaction in one round trip (its statements pipelined, the
// notification of all their runs last) and a second for the commit. A batch that
// matches no row fails the call; then the runs are read again to tell why (fence,
// sequence, finished). AppendEvents appends to the runs in the order of their ids, so
// that two calls that append to the same runs lock their rows in the same order and
// cannot deadlock.
func (s *Store) AppendEvents(ctx context.Context, batches []store.Events) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch len(batches) {
	case 0:
		return nil
	case 1:
		sql, args := appendArgs(batches[0])
		if len(batches[0].Frames) > 0 {
			sql, args = sql+` WHERE pg_notify($7, id) IS NOT NULL`, append(args, s.channel)
		}
		tag, err := s.pool.Exec(ctx, sql, args...)
		if err != nil {
			return fail(ctx, "append events", err)
		}
		if tag.RowsAffected() == 0 {
			return s.appendError(ctx, batches)
		}
		return nil
	}

	order := make([]int, len(batches))
	for i := range order {
		order[i] = i
	}
	// A stable sort keeps the batches of one run in the order they follow each other.
	slices.SortStableFunc(order, func(i, j int) int { return strings.Compare(batches[i].Lease.RunID, batches[j].Lease.RunID) })
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	var ids []string
	for _, i := range order {
		sql, args := appendArgs(batches[i])
		b.Queue(sql, args...)
		if id := batches[i].Lease.RunID; len(ids) == 0 || ids[len(ids)-1] != id {
			ids = append(ids, id)
		}
	}
	b.Queue(notifySQL, s.channel, payload(ids))
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(ctx)
	// The results: the begin, a batch's each, the notification.
	matched := true
	for i := range b.Len() {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return fail(ctx, "append events", err)
		}
		if i > 0 && i <= len(order) && tag.RowsAffected() == 0 {
			matched = false
		}
	}
	if err := br.Close(); err != nil {
		return fail(ctx, "append events", err)
	}
	if !matched {
		// Nothing commits: the batches that matched are undone with the rest.
		if err := tx.Rollback(ctx); err != nil {
			return fail(ctx, "append events", err)
		}
		return s.appendError(ctx, batches)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(ctx, "append events", err)
	}
	return nil
}

func appendArgs(b store.Events) (string, []any) {
	l := b.Lease
	if len(b.Frames) == 0 {
		return emptyAppendSQL, []any{l.RunID, l.Holder, l.Epoch, b.First}
	}
	return appendSQL, []any{l.RunID, l.Holder, l.Epoch, b.First, b.First + int64(len(b.Frames)) - 1, encodeFrames(b.Frames)}
}

// appendError returns the error of batches, some of which matched no run. It reads
// the runs as they are now, after the failed statements: what failed a batch stays
// (a run does not come back, nor unfinish, nor lower its epoch), so the same rules
// that judge the batches in the stores of one process tell which it was.
func (s *Store) appendError(ctx context.Context, batches []store.Events) error {
	ids := make([]string, len(batches))
	for i, b := range batches {
		ids[i] = b.Lease.RunID
	}
	rows, err := s.pool.Query(ctx, `SELECT id, status, holder, epoch, last_seq FROM runs WHERE id = ANY($1)`, ids)
	if err != nil {
		return fail(ctx, "append events", err)
	}
	runs := map[string]fence.Run{}
	var (
		id     string
		status int16
		r      fence.Run
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &status, &r.Holder, &r.Epoch, &r.LastSeq}, func() error {
		r.Found, r.Finished = true, status == finished
		runs[id] = r
		return nil
	})
	if err != nil {
		return fail(ctx, "append events", err)
	}
	err = fence.CheckAppend(batches, func(id string) (fence.Run, error) { return runs[id], nil })
	if err == nil {
		// A batch that started past its run's end when it failed, and that the run
		// has caught up with since.
		return fmt.Errorf("%w: the runs' journals moved while appending", store.ErrSeq)
	}
	return err
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
