package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lease is how long the tests' runs are held: longer than any test.
const lease = time.Minute

func held(id string) store.Lease { return store.Lease{RunID: id, Holder: "replica", Epoch: 1} }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func openTemp(t *testing.T) *Store {
	t.Helper()
	s := open(t, filepath.Join(t.TempDir(), "agentd.db"))
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// rawDB opens the file with no store around it, to look at or tamper with what the
// store wrote.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestOpenSetsPragmas(t *testing.T) {
	s := openTemp(t)
	for _, c := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL
		{"busy_timeout", fmt.Sprint(busyTimeout.Milliseconds())},
	} {
		var got string
		if err := s.w.QueryRowContext(t.Context(), "PRAGMA "+c.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("writer's %s = %s, want %s", c.pragma, got, c.want)
		}
	}
	// The readers cannot write, whatever a bug in the store would ask of them.
	if _, err := s.r.ExecContext(t.Context(), `DELETE FROM runs`); err == nil {
		t.Error("a delete on the read-only pool succeeded")
	}
}

func TestMigrationsAppliedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Name != "0001_init.sql" {
		t.Fatalf("migrations: %+v, want 0001_init.sql first", ms)
	}
	versions := func() map[int64]int64 {
		db := rawDB(t, path)
		rows, err := db.QueryContext(t.Context(), `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[int64]int64{}
		for rows.Next() {
			var v, at int64
			if err := rows.Scan(&v, &at); err != nil {
				t.Fatal(err)
			}
			got[v] = at
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		db.Close()
		return got
	}

	if err := open(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	first := versions()
	if len(first) != len(ms) {
		t.Fatalf("schema_migrations after the first Open: %v, want versions 1 to %d", first, len(ms))
	}
	for v := int64(1); v <= int64(len(ms)); v++ {
		if first[v] == 0 {
			t.Errorf("version %d not recorded: %v", v, first)
		}
	}
	// A second Open finds nothing to do: the versions and when they were applied stay.
	if err := open(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	if second := versions(); fmt.Sprint(second) != fmt.Sprint(first) {
		t.Errorf("schema_migrations after reopening: %v, want %v unchanged", second, first)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	if err := open(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	ms, _ := loadMigrations()
	db := rawDB(t, path)
	if _, err := db.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, len(ms)+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(t.Context(), path)
	if err == nil {
		s.Close()
		t.Fatal("Open of a database a version ahead succeeded")
	}
	if !errors.Is(err, ErrNewerSchema) {
		t.Errorf("Open of a database a version ahead: %v, want ErrNewerSchema", err)
	}
}

// A restart: what one Store wrote, the next one on the file reads.
func TestReopenKeepsState(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentd.db")
	s := open(t, path)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateRun(ctx, store.Run{ID: "run_1", ThreadID: "thread_1", Exclusive: true, Owner: "token:a", Agent: "demo", RequestID: "req", Spec: []byte("spec"), Holder: "replica"}, lease))
	must(s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 1, Frames: [][]byte{[]byte("a"), []byte("b")}}}))
	must(s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 3, Frames: [][]byte{[]byte("c")}}}))
	must(s.UpdateRun(ctx, held("run_1"), store.Update{Status: store.Parked, Checkpoint: []byte("cp")}))
	if _, _, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k", Digest: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	must(s.AnswerInput(ctx, "run_1", "k", []byte("ack")))
	must(s.CreateThread(ctx, store.Thread{ID: "thread_1", Owner: "token:a", Agent: "demo"}))
	must(s.AppendMessages(ctx, "thread_1", held("run_1"), [][]byte{[]byte("hello"), []byte("hi")}))
	wantRun, err := s.GetRun(ctx, "run_1")
	must(err)
	wantThread, err := s.GetThread(ctx, "thread_1")
	must(err)
	must(s.Close())

	s = open(t, path)
	defer s.Close()
	gotRun, err := s.GetRun(ctx, "run_1")
	must(err)
	if fmt.Sprintf("%+v", gotRun) != fmt.Sprintf("%+v", wantRun) {
		t.Errorf("run after reopening:\n%+v\nwant\n%+v", gotRun, wantRun)
	}
	if gotRun.Status != store.Parked || string(gotRun.Checkpoint) != "cp" || gotRun.LastSeq != 3 {
		t.Errorf("run after reopening: %+v", gotRun)
	}
	fs, err := s.ReadEvents(ctx, "run_1", 0, 10)
	if err != nil || !slices.EqualFunc(fs, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, bytes.Equal) {
		t.Errorf("journal after reopening: %q, %v", fs, err)
	}
	in, created, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k", Digest: []byte("d")})
	if err != nil || created || string(in.Answer) != "ack" {
		t.Errorf("input after reopening: %+v, created %v, %v", in, created, err)
	}
	gotThread, err := s.GetThread(ctx, "thread_1")
	must(err)
	if fmt.Sprintf("%+v", gotThread) != fmt.Sprintf("%+v", wantThread) || gotThread.ActiveRunID != "run_1" {
		t.Errorf("thread after reopening:\n%+v\nwant\n%+v", gotThread, wantThread)
	}
	msgs, err := s.ThreadMessages(ctx, "thread_1", 0, 10)
	if err != nil || len(msgs) != 2 || string(msgs[1].Data) != "hi" || msgs[1].RunID != "run_1" {
		t.Errorf("messages after reopening: %+v, %v", msgs, err)
	}
	runs, err := s.UnfinishedRuns(ctx)
	if err != nil || len(runs) != 1 || runs[0].ID != "run_1" {
		t.Errorf("UnfinishedRuns after reopening: %+v, %v", runs, err)
	}
	// The thread is still held by its parked run.
	err = s.CreateRun(ctx, store.Run{ID: "run_2", ThreadID: "thread_1", Exclusive: true, Holder: "replica"}, lease)
	if busy, ok := errors.AsType[*store.ThreadBusyError](err); !ok || busy.RunID != "run_1" {
		t.Errorf("an exclusive run on the thread after reopening: %v, want it busy with run_1", err)
	}
}

// Writers in several goroutines, and a second Store on the same file standing for a
// second process, all get through: their transactions queue for the write lock and
// none sees SQLITE_BUSY.
func TestConcurrentWritersNeverBusy(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentd.db")
	a := open(t, path)
	defer a.Close()
	b := open(t, path)
	defer b.Close()
	const runs, batches, per = 12, 40, 8
	for r := range runs {
		if err := a.CreateRun(ctx, store.Run{ID: fmt.Sprintf("run_%d", r), Holder: "replica"}, lease); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for r := range runs {
		s := a
		if r%3 == 0 {
			s = b
		}
		wg.Go(func() {
			id := fmt.Sprintf("run_%d", r)
			for i := range batches {
				fs := make([][]byte, per)
				for j := range fs {
					fs[j] = fmt.Appendf(nil, "%s %d", id, i*per+j+1)
				}
				if err := s.AppendEvents(ctx, []store.Events{{Lease: held(id), First: int64(i*per + 1), Frames: fs}}); err != nil {
					t.Errorf("%s batch %d: %v", id, i, err)
					return
				}
				// Reads go on beside the writes.
				if _, err := s.ReadEvents(ctx, id, int64(i*per), per); err != nil {
					t.Errorf("%s read after batch %d: %v", id, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for r := range runs {
		id := fmt.Sprintf("run_%d", r)
		fs, err := b.ReadEvents(ctx, id, 0, batches*per)
		if err != nil || len(fs) != batches*per {
			t.Fatalf("%s: %d frames, %v", id, len(fs), err)
		}
		for i, f := range fs {
			if want := fmt.Sprintf("%s %d", id, i+1); string(f) != want {
				t.Fatalf("%s frame %d = %q, want %q", id, i+1, f, want)
			}
		}
	}
}

// A read does not wait for a write in progress: it sees what was committed before it.
// Writes queue behind it, and give up when their context ends.
func TestReadDuringLongWrite(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", ThreadID: "thread_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 1, Frames: [][]byte{[]byte("a")}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_1", Owner: "token:a"}); err != nil {
		t.Fatal(err)
	}

	// The long write holds the writer connection, with changes not yet committed.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 2, last_seq = 99 WHERE id = 'run_1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM threads`); err != nil {
		t.Fatal(err)
	}

	// Were the reads waiting for the write, they would end with the deadline.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := s.GetRun(rctx, "run_1")
	if err != nil || r.Status != store.Running || r.LastSeq != 1 {
		t.Errorf("GetRun during a write: %+v, %v; want it running at seq 1, as committed", r, err)
	}
	if fs, err := s.ReadEvents(rctx, "run_1", 0, 10); err != nil || len(fs) != 1 {
		t.Errorf("ReadEvents during a write: %q, %v", fs, err)
	}
	if ts, err := s.ListThreads(rctx, "token:a", "", 10); err != nil || len(ts) != 1 {
		t.Errorf("ListThreads during a write: %+v, %v", ts, err)
	}

	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer wcancel()
	err = s.AppendEvents(wctx, []store.Events{{Lease: held("run_1"), First: 2, Frames: [][]byte{[]byte("b")}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AppendEvents behind a long write, with a deadline: %v, want DeadlineExceeded", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 2, Frames: [][]byte{[]byte("b")}}}); err != nil {
		t.Errorf("AppendEvents once the write is over: %v", err)
	}
}

// The journal keeps no more than its rows: a read below the oldest row gets
// ErrExpired, and with no rows left the oldest is last+1.
func TestReadBelowKeptExpires(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	for first := int64(1); first <= 10; first += 5 {
		fs := make([][]byte, 5)
		for i := range fs {
			fs[i] = fmt.Appendf(nil, "%d", first+int64(i))
		}
		if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: first, Frames: fs}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM run_events WHERE run_id = 'run_1' AND first_seq = 1`); err != nil {
		t.Fatal(err)
	}
	if oldest, last, err := s.EventBounds(ctx, "run_1"); err != nil || oldest != 6 || last != 10 {
		t.Errorf("EventBounds without the first batch: %d, %d, %v; want 6, 10", oldest, last, err)
	}
	if _, err := s.ReadEvents(ctx, "run_1", 4, 10); !errors.Is(err, store.ErrExpired) {
		t.Errorf("ReadEvents after 4: %v, want ErrExpired", err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 5, 2); err != nil || len(fs) != 2 || string(fs[0]) != "6" || string(fs[1]) != "7" {
		t.Errorf("ReadEvents after 5: %q, %v; want 6, 7", fs, err)
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM run_events WHERE run_id = 'run_1'`); err != nil {
		t.Fatal(err)
	}
	if oldest, last, err := s.EventBounds(ctx, "run_1"); err != nil || oldest != 11 || last != 10 {
		t.Errorf("EventBounds with no rows: %d, %d, %v; want 11, 10", oldest, last, err)
	}
	if _, err := s.ReadEvents(ctx, "run_1", 9, 10); !errors.Is(err, store.ErrExpired) {
		t.Errorf("ReadEvents after 9 with no rows: %v, want ErrExpired", err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 10, 10); err != nil || len(fs) != 0 {
		t.Errorf("ReadEvents after 10 with no rows: %q, %v; want none", fs, err)
	}
}

// Sweep leaves no rows behind: a run's journal and inputs, a thread's messages and
// grants.
func TestSweepRemovesDependentRows(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", ThreadID: "thread_1", Exclusive: true, Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 1, Frames: [][]byte{[]byte("a")}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, "thread_1", held("run_1"), [][]byte{[]byte("m")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGrant(ctx, store.Grant{ID: "grant_1", ThreadID: "thread_1", Tool: "search"}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, held("run_1"), store.Update{Status: store.Finished}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if runs, threads, err := s.Sweep(ctx, later, later); err != nil || runs != 1 || threads != 1 {
		t.Fatalf("Sweep = %d, %d, %v; want 1, 1", runs, threads, err)
	}
	for _, table := range []string{"runs", "run_events", "inputs", "threads", "thread_messages", "thread_grants"} {
		if n := count(t, s.w, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s has %d rows after the sweep, want none", table, n)
		}
	}
	// The zero time sweeps nothing, rather than overflowing into the far future.
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_2"}); err != nil {
		t.Fatal(err)
	}
	if runs, threads, err := s.Sweep(ctx, time.Time{}, time.Time{}); err != nil || runs+threads != 0 {
		t.Errorf("Sweep(zero, zero) = %d, %d, %v; want nothing removed", runs, threads, err)
	}
}

// Nil and empty bytes stay apart where the contract gives nil a meaning: a checkpoint
// not yet taken, an answer not yet given.
func TestNilAndEmptyBytes(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetRun(ctx, "run_1"); r.Checkpoint != nil || r.Spec != nil {
		t.Errorf("a run with no spec nor checkpoint: spec %#v, checkpoint %#v; want nil", r.Spec, r.Checkpoint)
	}
	if err := s.UpdateRun(ctx, held("run_1"), store.Update{Status: store.Parked, Checkpoint: []byte{}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetRun(ctx, "run_1"); r.Checkpoint == nil || len(r.Checkpoint) != 0 {
		t.Errorf("an empty checkpoint came back as %#v", r.Checkpoint)
	}
	if _, _, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k", Digest: []byte{}}); err != nil {
		t.Fatal(err)
	}
	in, _, _ := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k"})
	if in.Digest == nil || in.Answer != nil {
		t.Errorf("an unanswered input with an empty digest came back as %+v", in)
	}
	if err := s.AnswerInput(ctx, "run_1", "k", []byte{}); err != nil {
		t.Fatal(err)
	}
	if in, _, _ := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k"}); in.Answer == nil {
		t.Errorf("an empty answer came back as nil")
	}
}

func TestFrames(t *testing.T) {
	in := [][]byte{{}, []byte("a"), bytes.Repeat([]byte{0x80}, 300), nil, []byte("end")}
	b := encodeFrames(in)
	var out [][]byte
	for rest := b; len(rest) > 0; {
		f, r, err := nextFrame(rest)
		if err != nil {
			t.Fatalf("nextFrame after %d frames: %v", len(out), err)
		}
		out, rest = append(out, f), r
	}
	if !slices.EqualFunc(in, out, bytes.Equal) {
		t.Fatalf("frames came back as %q, want %q", out, in)
	}
	// A frame's capacity ends with it: appending to one leaves the next as it is.
	_ = append(out[1], 'X')
	if string(out[2][:1]) != "\x80" {
		t.Errorf("appending to a frame overwrote the next one")
	}
	// A blob cut anywhere inside a frame is corrupt, not a short frame.
	for _, cut := range []int{2, 4, len(b) - 1} { // in "a", in the varint of the 300 bytes, in "end"
		rest := b[:cut]
		var err error
		for len(rest) > 0 && err == nil {
			_, rest, err = nextFrame(rest)
		}
		if !errors.Is(err, errCorrupt) {
			t.Errorf("a blob cut at %d of %d: %v, want errCorrupt", cut, len(b), err)
		}
	}
}

// BenchmarkAppendEvents appends batches of 64 frames of 40 bytes to one run, one
// transaction each, as the service's journal does under a busy stream.
func BenchmarkAppendEvents(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "agentd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateRun(b.Context(), store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		b.Fatal(err)
	}
	const per, size = 64, 40
	fs := make([][]byte, per)
	for i := range fs {
		fs[i] = bytes.Repeat([]byte{'x'}, size)
	}
	b.SetBytes(per * size)
	first := int64(1)
	for b.Loop() {
		if err := s.AppendEvents(b.Context(), []store.Events{{Lease: held("run_1"), First: first, Frames: fs}}); err != nil {
			b.Fatal(err)
		}
		first += per
	}
	b.ReportMetric(float64(first-1)/b.Elapsed().Seconds(), "frames/s")
}

// A database from before leases keeps its runs and inputs: the runs held by none since
// they were created.
func TestMigrateFromBeforeLeases(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agentd.db")
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	if err := migrate(ctx, db, ms[:1]); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO runs (id, thread_id, exclusive, owner, agent, request_id, status, spec, checkpoint, last_seq, created_at)
			VALUES ('run_1', 'thread_1', 1, '', '', '', 2, NULL, x'6370', 0, 1000)`,
		`INSERT INTO inputs (run_id, key) VALUES ('run_1', 'b'), ('run_1', 'a')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := open(t, path)
	defer s.Close()
	if r := storetest.Upgraded(t, s); !r.LeaseUntil.Equal(time.Unix(0, 1000)) {
		t.Errorf("the run's lease ended %v, want when it was created", r.LeaseUntil)
	}
}
