package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/postgres"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
	"github.com/agentd/agentd/service/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.Open(t) })
}

// open opens a store on schema, closed when t ends.
func open(t *testing.T, dsn, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// connect returns a connection whose search_path is schema, for what a test checks or
// changes behind the store's back.
func connect(t *testing.T, dsn, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func frames(first, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "frame %d", first+i)
	}
	return out
}

// Replicas that start at once on a fresh schema all open it, and it is migrated once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), dsn, postgres.WithSchema(schema))
			errs[i] = err
			if err == nil {
				s.Close()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	conn := connect(t, dsn, schema)
	var n, versions, top int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version), max(version) FROM schema_migrations`).Scan(&n, &versions, &top); err != nil {
		t.Fatal(err)
	}
	if n != top || versions != top || top < 1 {
		t.Errorf("schema_migrations has %d rows of %d versions up to %d: want each version once", n, versions, top)
	}
	// The tables are there, once: a store works on them.
	s := open(t, dsn, schema)
	if err := s.CreateRun(t.Context(), store.Run{ID: "run_1"}); err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	open(t, dsn, schema).Close()
	conn := connect(t, dsn, schema)
	if _, err := conn.Exec(t.Context(), `INSERT INTO schema_migrations (version) SELECT max(version) + 1 FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(t.Context(), dsn, postgres.WithSchema(schema))
	if !errors.Is(err, postgres.ErrNewerSchema) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a schema a version ahead: %v, want ErrNewerSchema", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	ctx := t.Context()
	s := open(t, dsn, schema)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", ThreadID: "thread_1", Exclusive: true, Owner: "token:a", Spec: []byte("spec")}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{RunID: "run_1", First: 1, Frames: frames(1, 5)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, "run_1", store.Parked, []byte("checkpoint")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k", Digest: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_1", Owner: "token:a", Agent: "demo"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, "thread_1", "run_1", [][]byte{[]byte("hello")}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, dsn, schema)
	r, err := s.GetRun(ctx, "run_1")
	if err != nil || r.Status != store.Parked || string(r.Checkpoint) != "checkpoint" || string(r.Spec) != "spec" || r.LastSeq != 5 {
		t.Errorf("the run after reopening: %+v, %v", r, err)
	}
	fs, err := s.ReadEvents(ctx, "run_1", 2, 10)
	if err != nil || len(fs) != 3 || string(fs[0]) != "frame 3" {
		t.Errorf("its journal after reopening: %q, %v", fs, err)
	}
	if in, created, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k", Digest: []byte("other")}); err != nil || created || string(in.Digest) != "d" {
		t.Errorf("its input after reopening: %+v, created %v, %v", in, created, err)
	}
	th, err := s.GetThread(ctx, "thread_1")
	if err != nil || th.Messages != 1 || th.ActiveRunID != "run_1" {
		t.Errorf("the thread after reopening: %+v, %v", th, err)
	}
	// The thread is still held by the parked run.
	if err := s.CreateRun(ctx, store.Run{ID: "run_2", ThreadID: "thread_1", Exclusive: true}); !errors.As(err, new(*store.ThreadBusyError)) {
		t.Errorf("a second exclusive run on the thread after reopening: %v, want ThreadBusyError", err)
	}
}

// Stores in two schemas of one database see nothing of each other.
func TestSchemasAreApart(t *testing.T) {
	ctx := t.Context()
	dsn, a := pgtest.NewSchema(t)
	_, b := pgtest.NewSchema(t)
	sa, sb := open(t, dsn, a), open(t, dsn, b)
	if err := sa.CreateRun(ctx, store.Run{ID: "run_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.GetRun(ctx, "run_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the other schema's run: %v, want ErrNotFound", err)
	}
	if err := sb.CreateRun(ctx, store.Run{ID: "run_1"}); err != nil {
		t.Errorf("a run of the same id in the other schema: %v", err)
	}
}

// A DSN from pgtest.DSN opens a store with no option: its search_path is the schema.
func TestDSNWithSearchPath(t *testing.T) {
	dsn := pgtest.DSN(t)
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateThread(t.Context(), store.Thread{ID: "thread_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetThread(t.Context(), "thread_1"); err != nil {
		t.Fatal(err)
	}
}

// Many writers, each on runs of its own, appending one batch or several runs' at a
// time, lose nothing and mix nothing up.
func TestConcurrentAppendsOnDifferentRuns(t *testing.T) {
	s := pgtest.Open(t)
	ctx := t.Context()
	const writers, calls, per = 8, 30, 10
	for w := range writers {
		for _, id := range []string{fmt.Sprintf("run_%d_a", w), fmt.Sprintf("run_%d_b", w)} {
			if err := s.CreateRun(ctx, store.Run{ID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			a, b := fmt.Sprintf("run_%d_a", w), fmt.Sprintf("run_%d_b", w)
			for c := range calls {
				first := c*per + 1
				batches := []store.Events{{RunID: a, First: int64(first), Frames: frames(first, per)}}
				if c%2 == 1 {
					// Every other call journals both runs, b first, in one transaction.
					batches = append([]store.Events{{RunID: b, First: int64(c/2*per + 1), Frames: frames(c/2*per+1, per)}}, batches...)
				}
				if err := s.AppendEvents(ctx, batches); err != nil {
					t.Errorf("writer %d call %d: %v", w, c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range writers {
		for id, n := range map[string]int{fmt.Sprintf("run_%d_a", w): calls * per, fmt.Sprintf("run_%d_b", w): calls / 2 * per} {
			fs, err := s.ReadEvents(ctx, id, 0, math.MaxInt)
			if err != nil || len(fs) != n {
				t.Fatalf("%s: %d frames, %v; want %d", id, len(fs), err, n)
			}
			for i, f := range fs {
				if string(f) != fmt.Sprintf("frame %d", i+1) {
					t.Fatalf("%s frame %d = %q", id, i+1, f)
				}
			}
		}
	}
}

// Writers that append to the same two runs, in either order, race for seqs but never
// deadlock, and every call is all or nothing: both journals end the same.
func TestCrossedAppendsAreAllOrNothing(t *testing.T) {
	s := pgtest.Open(t)
	ctx := t.Context()
	for _, id := range []string{"run_x", "run_y"} {
		if err := s.CreateRun(ctx, store.Run{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	const writers, calls = 6, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for c := range calls {
				_, last, err := s.EventBounds(ctx, "run_x")
				if err != nil {
					t.Error(err)
					return
				}
				frame := [][]byte{fmt.Appendf(nil, "writer %d call %d", w, c)}
				batches := []store.Events{{RunID: "run_x", First: last + 1, Frames: frame}, {RunID: "run_y", First: last + 1, Frames: frame}}
				if (w+c)%2 == 1 {
					batches[0], batches[1] = batches[1], batches[0]
				}
				if err := s.AppendEvents(ctx, batches); err != nil && !errors.Is(err, store.ErrSeq) {
					t.Errorf("writer %d call %d: %v", w, c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	x, err := s.ReadEvents(ctx, "run_x", 0, math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	y, err := s.ReadEvents(ctx, "run_y", 0, math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if len(x) == 0 || fmt.Sprintf("%q", x) != fmt.Sprintf("%q", y) {
		t.Errorf("the journals differ or are empty:\nrun_x %q\nrun_y %q", x, y)
	}
}

// The store keeps a journal whole, but it reads what the table holds: with its first
// rows gone, the oldest seq is the first kept and reads below it get ErrExpired.
func TestExpiredBelowOldestRow(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	s := open(t, dsn, schema)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1"}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ first, n int }{{1, 3}, {4, 5}, {9, 2}} {
		if err := s.AppendEvents(ctx, []store.Events{{RunID: "run_1", First: int64(b.first), Frames: frames(b.first, b.n)}}); err != nil {
			t.Fatal(err)
		}
	}
	conn := connect(t, dsn, schema)
	if _, err := conn.Exec(ctx, `DELETE FROM run_events WHERE run_id = 'run_1' AND first_seq = 1`); err != nil {
		t.Fatal(err)
	}
	if oldest, last, err := s.EventBounds(ctx, "run_1"); oldest != 4 || last != 10 || err != nil {
		t.Errorf("EventBounds = %d, %d, %v; want 4, 10", oldest, last, err)
	}
	if _, err := s.ReadEvents(ctx, "run_1", 2, 10); !errors.Is(err, store.ErrExpired) {
		t.Errorf("ReadEvents after 2: %v, want ErrExpired", err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 3, 3); err != nil || len(fs) != 3 || string(fs[0]) != "frame 4" || string(fs[2]) != "frame 6" {
		t.Errorf("ReadEvents after 3: %q, %v", fs, err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM run_events WHERE run_id = 'run_1'`); err != nil {
		t.Fatal(err)
	}
	if oldest, last, err := s.EventBounds(ctx, "run_1"); oldest != 11 || last != 10 || err != nil {
		t.Errorf("EventBounds with no rows = %d, %d, %v; want 11, 10", oldest, last, err)
	}
	if _, err := s.ReadEvents(ctx, "run_1", 9, 10); !errors.Is(err, store.ErrExpired) {
		t.Errorf("ReadEvents after 9 with no rows: %v, want ErrExpired", err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 10, 10); err != nil || len(fs) != 0 {
		t.Errorf("ReadEvents after 10 with no rows: %q, %v; want none", fs, err)
	}
}

// A read whose limit reaches past the largest seq neither overflows nor loses frames,
// and an empty batch checks its place without writing a row.
func TestReadLimitsAndEmptyBatches(t *testing.T) {
	ctx := t.Context()
	s := pgtest.Open(t)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{RunID: "run_1", First: 1, Frames: frames(1, 4)}, {RunID: "run_1", First: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{RunID: "run_1", First: 7}}); !errors.Is(err, store.ErrSeq) {
		t.Errorf("an empty batch out of sequence: %v, want ErrSeq", err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 1, math.MaxInt); err != nil || len(fs) != 3 {
		t.Errorf("ReadEvents(after 1, MaxInt) = %d frames, %v; want 3", len(fs), err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 0, 0); err != nil || len(fs) != 0 {
		t.Errorf("ReadEvents(limit 0) = %d frames, %v; want none", len(fs), err)
	}
	if oldest, last, err := s.EventBounds(ctx, "run_1"); oldest != 1 || last != 4 || err != nil {
		t.Errorf("EventBounds = %d, %d, %v; want 1, 4", oldest, last, err)
	}
}

// BenchmarkAppendEvents journals batches of 64 frames of 40 bytes to one run, as a
// busy run's event loop does.
func BenchmarkAppendEvents(b *testing.B) {
	s := pgtest.Open(b)
	ctx := b.Context()
	if err := s.CreateRun(ctx, store.Run{ID: "run_1"}); err != nil {
		b.Fatal(err)
	}
	const per = 64
	batch := make([][]byte, per)
	for i := range batch {
		batch[i] = make([]byte, 40)
	}
	next, calls := int64(1), 0
	for b.Loop() {
		if err := s.AppendEvents(ctx, []store.Events{{RunID: "run_1", First: next, Frames: batch}}); err != nil {
			b.Fatal(err)
		}
		next += per
		calls++
	}
	b.ReportMetric(float64(calls*per)/b.Elapsed().Seconds(), "frames/s")
}
