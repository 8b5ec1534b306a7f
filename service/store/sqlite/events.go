package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/internal/fence"
)

// AppendEvents implements [store.Store]. All the batches go in one transaction, and
// each is one row however many frames it holds.
func (s *Store) AppendEvents(ctx context.Context, batches []store.Events) error {
	if len(batches) == 0 {
		return ctx.Err()
	}
	ids := make([]string, len(batches))
	for i, b := range batches {
		ids[i] = b.Lease.RunID
	}
	return s.change(ctx, "append events", ids, func(tx *sql.Tx) error {
		err := fence.CheckAppend(batches, func(id string) (fence.Run, error) {
			r := fence.Run{Found: true}
			var status int64
			err := tx.QueryRowContext(ctx, `SELECT status, holder, epoch, last_seq FROM runs WHERE id = ?`, id).
				Scan(&status, &r.Holder, &r.Epoch, &r.LastSeq)
			if errors.Is(err, sql.ErrNoRows) {
				return fence.Run{}, nil
			}
			r.Finished = store.Status(status) == store.Finished
			return r, err
		})
		if err != nil {
			return err
		}
		for _, b := range batches {
			if len(b.Frames) == 0 {
				continue
			}
			end := b.First + int64(len(b.Frames)) - 1
			if _, err := tx.ExecContext(ctx, `INSERT INTO run_events (run_id, first_seq, last_seq, frames) VALUES (?, ?, ?, ?)`,
				b.Lease.RunID, b.First, end, encodeFrames(b.Frames)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET last_seq = ? WHERE id = ?`, end, b.Lease.RunID); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadNewEvents implements [store.Store], one run after another: SQLite is in process,
// and a round trip costs nothing.
func (s *Store) ReadNewEvents(ctx context.Context, after map[string]int64, limit int) (map[string][][]byte, error) {
	return store.ReadEach(ctx, after, limit, s.ReadEvents)
}

// ReadEvents implements [store.Store].
func (s *Store) ReadEvents(ctx context.Context, id string, after int64, limit int) ([][]byte, error) {
	// No seq is below 1, so an after below 0 asks for what after 0 does.
	after = max(after, 0)
	var frames [][]byte
	err := s.read(ctx, "read events", func(tx *sql.Tx) error {
		oldest, last, err := bounds(ctx, tx, id)
		if err != nil {
			return err
		}
		if after+1 < oldest {
			return fmt.Errorf("run %q: %w: seqs after %d asked, the oldest kept is %d", id, store.ErrExpired, after, oldest)
		}
		if after >= last || limit <= 0 {
			return nil
		}
		hi := last
		if int64(limit) < last-after {
			hi = after + int64(limit)
		}
		// The rows wanted start at the one holding after+1, found by the primary key,
		// so that reading the end of a long journal does not scan its beginning.
		rows, err := tx.QueryContext(ctx, `SELECT first_seq, frames FROM run_events
			WHERE run_id = ?1 AND first_seq <= ?3 AND first_seq >= (
				SELECT coalesce(max(first_seq), 0) FROM run_events WHERE run_id = ?1 AND first_seq <= ?2
			)
			ORDER BY first_seq`, id, after+1, hi)
		if err != nil {
			return err
		}
		defer rows.Close()
		frames = make([][]byte, 0, hi-after)
		for rows.Next() {
			var (
				seq int64
				b   []byte
			)
			if err := rows.Scan(&seq, &b); err != nil {
				return err
			}
			for len(b) > 0 && seq <= hi {
				f, rest, err := nextFrame(b)
				if err != nil {
					return fmt.Errorf("run %q: events from seq %d: %w", id, seq, err)
				}
				if seq > after {
					frames = append(frames, f)
				}
				seq, b = seq+1, rest
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// The journal is contiguous from oldest to last, so a shortfall means rows
		// this snapshot should hold are missing.
		if n := int64(len(frames)); n != hi-after {
			return fmt.Errorf("run %q: journal has %d frames after seq %d, want %d", id, n, after, hi-after)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return frames, nil
}

// EventBounds implements [store.Store].
func (s *Store) EventBounds(ctx context.Context, id string) (oldest, last int64, err error) {
	err = s.read(ctx, "event bounds", func(tx *sql.Tx) error {
		oldest, last, err = bounds(ctx, tx, id)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return oldest, last, nil
}

// bounds returns the oldest seq kept of run id's journal and its last one. The
// oldest is the first of the first row kept; with no rows it is last+1.
func bounds(ctx context.Context, tx *sql.Tx, id string) (oldest, last int64, err error) {
	var first sql.NullInt64
	err = tx.QueryRowContext(ctx, `SELECT last_seq, (SELECT min(first_seq) FROM run_events WHERE run_id = runs.id)
		FROM runs WHERE id = ?`, id).Scan(&last, &first)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("run %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return 0, 0, err
	}
	if !first.Valid {
		return last + 1, last, nil
	}
	return first.Int64, last, nil
}

// encodeFrames packs a batch's frames in one blob, each a uvarint length and its bytes.
func encodeFrames(frames [][]byte) []byte {
	n := 0
	for _, f := range frames {
		n += binary.MaxVarintLen64 + len(f)
	}
	b := make([]byte, 0, n)
	for _, f := range frames {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

var errCorrupt = errors.New("corrupt frame encoding")

// nextFrame splits the first frame off b. The frame's capacity ends where it does,
// so that appending to it cannot overwrite the next one.
func nextFrame(b []byte) (frame, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > math.MaxInt || n > uint64(len(b)-k) {
		return nil, nil, errCorrupt
	}
	end := k + int(n)
	return b[k:end:end], b[end:], nil
}
