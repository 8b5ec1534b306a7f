package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/internal/fence"
)

// appendSQL journals batches $1..$6 (run ids, holders, epochs, first seqs, last seqs,
// frames), of one run or several, in one statement, all or none: it writes the rows of
// the batches only if every one of them ($7) follows its run's journal (or the batch of
// the same run before it) and is under the lease that holds its run, and then sends one
// notification ($8) of the runs it wrote to (the empty payload when they are too many
// to name in $9 bytes). It returns how many batches qualified and how many rows it
// wrote.
//
// The run's row is locked FOR SHARE, not updated: appends write no new version of it,
// so that a run streaming deltas does not fill the runs table with dead rows. The lock
// is enough to fence: a claim's update of the epoch waits for the appends that hold it,
// and an append that waited for a claim reads the run again and finds the new epoch.
// The rows are locked in the order of their ids, as Renew locks them, so the two
// cannot deadlock. A run's last seq is its journal's last row, found by a backward step
// of the primary key.
var appendSQL = `WITH l AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[])
		WITH ORDINALITY AS l(id, holder, epoch, first, last, frames, i)
), locked AS MATERIALIZED (
	SELECT r.id, r.holder, r.epoch FROM runs r
	WHERE r.id = ANY($1) AND r.holder <> '' AND r.status <> 3
	ORDER BY r.id
	FOR SHARE OF r
), prev AS (
	SELECT l.*, lag(l.last) OVER (PARTITION BY l.id ORDER BY l.i) AS before FROM l
), ok AS MATERIALIZED (
	SELECT p.* FROM prev p JOIN locked k ON k.id = p.id AND k.holder = p.holder AND k.epoch = p.epoch
	WHERE p.first = 1 + coalesce(p.before, (` + lastSeqOf("p.id") + `))
), ins AS (
	INSERT INTO run_events (run_id, first_seq, last_seq, frames)
	SELECT id, first, last, frames FROM ok WHERE last >= first AND (SELECT count(*) FROM ok) = $7
	RETURNING run_id
)
SELECT (SELECT count(*) FROM ok), count(*), (
	SELECT count(pg_notify($8, CASE WHEN length(x.p) <= $9 THEN x.p ELSE '' END))
	FROM (SELECT string_agg(DISTINCT run_id, ',') AS p FROM ins) x WHERE x.p IS NOT NULL
) FROM ins`

// lastSeqOf is the seq of the last event journaled of the run whose id is the SQL id
// (0 with none): the last seq of the journal's last row, one step back on the primary
// key.
func lastSeqOf(id string) string {
	return `coalesce((SELECT e.last_seq FROM run_events e WHERE e.run_id = ` + id + ` ORDER BY e.first_seq DESC LIMIT 1), 0)`
}

// AppendEvents is one statement, one round trip, whatever the number of batches. A
// call that does not write them all reads the runs again to tell why (fence,
// sequence, finished).
func (s *Store) AppendEvents(ctx context.Context, batches []store.Events) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batches) == 0 {
		return nil
	}
	n := len(batches)
	ids, holders := make([]string, n), make([]string, n)
	epochs, firsts, lasts := make([]int64, n), make([]int64, n), make([]int64, n)
	frames := make([][]byte, n)
	for i, b := range batches {
		ids[i], holders[i], epochs[i] = b.Lease.RunID, b.Lease.Holder, b.Lease.Epoch
		firsts[i], lasts[i] = b.First, b.First+int64(len(b.Frames))-1
		frames[i] = encodeFrames(b.Frames)
	}
	var matched, written, notified int64
	err := s.pool.QueryRow(ctx, appendSQL, ids, holders, epochs, firsts, lasts, frames, n, s.channel, maxPayload).
		Scan(&matched, &written, &notified)
	if code, constraint := pgCode(err); code == uniqueViolation && constraint == "run_events_pkey" {
		// An append under the same lease took the seqs first: nothing of this one was
		// written.
		return fmt.Errorf("%w: another append took the seqs", store.ErrSeq)
	}
	if err != nil {
		return fail(ctx, "append events", err)
	}
	if matched != int64(n) {
		return s.appendError(ctx, batches)
	}
	return nil
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
	rows, err := s.pool.Query(ctx, `SELECT id, status, holder, epoch, `+lastSeqOf("runs.id")+` FROM runs WHERE id = ANY($1)`, ids)
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
var readEventsSQL = `SELECT ` + lastSeqOf("r.id") + `, o.oldest, e.first_seq, e.last_seq, e.frames
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

// readNewEventsSQL reads, for each run of $1 after its seq in $2, up to $3 of its rows
// that hold seqs past it, starting at the row that holds the seq after it, found as
// readEventsSQL finds it. Runs with none are left out.
const readNewEventsSQL = `SELECT c.id, e.first_seq, e.last_seq, e.frames
FROM unnest($1::text[], $2::bigint[]) AS c(id, after)
CROSS JOIN LATERAL (
	SELECT first_seq, last_seq, frames FROM run_events
	WHERE run_id = c.id AND last_seq > c.after
		AND first_seq >= coalesce((SELECT max(first_seq) FROM run_events WHERE run_id = c.id AND first_seq <= c.after + 1), 0)
	ORDER BY first_seq LIMIT $3
) e
ORDER BY c.id, e.first_seq`

// ReadNewEvents is one statement for all the runs. A run whose first row starts past
// the seq after its cursor (the rows below it are gone) is left out, as its ReadEvents
// would get ErrExpired.
func (s *Store) ReadNewEvents(ctx context.Context, after map[string]int64, limit int) (map[string][][]byte, error) {
	if len(after) == 0 || limit <= 0 {
		return map[string][][]byte{}, ctx.Err()
	}
	ids, seqs := make([]string, 0, len(after)), make([]int64, 0, len(after))
	for id, seq := range after {
		ids, seqs = append(ids, id), append(seqs, max(seq, 0))
	}
	rows, err := s.pool.Query(ctx, readNewEventsSQL, ids, seqs, limit)
	if err != nil {
		return nil, fail(ctx, "read new events", err)
	}
	defer rows.Close()
	out := map[string][][]byte{}
	var (
		id           string
		first, until int64
		buf          []byte
	)
	for rows.Next() {
		if err := rows.Scan(&id, &first, &until, &buf); err != nil {
			return nil, fail(ctx, "read new events", err)
		}
		from := max(after[id], 0)
		if len(out[id]) == 0 && first > from+1 {
			continue // expired below the cursor
		}
		upTo := from + int64(limit)
		fs, err := appendFrames(out[id], buf, first, until, from, upTo)
		if err != nil {
			return nil, fmt.Errorf("%w: run %s, seq %d", err, id, first)
		}
		if len(fs) > 0 {
			out[id] = fs
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, "read new events", err)
	}
	return out, nil
}

func (s *Store) EventBounds(ctx context.Context, id string) (oldest, last int64, err error) {
	var first *int64
	err = s.pool.QueryRow(ctx, `SELECT `+lastSeqOf("r.id")+`, (SELECT min(first_seq) FROM run_events WHERE run_id = r.id)
		FROM runs r WHERE r.id = $1`, id).Scan(&last, &first)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, 0, store.ErrNotFound
	case err != nil:
		return 0, 0, fail(ctx, "event bounds", err)
	}
	return keptFrom(first, last), last, nil
}
