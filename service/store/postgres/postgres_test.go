package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/postgres"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
	"github.com/agentd/agentd/service/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Main(m))
}

// lease is how long the tests' runs are held: longer than any test.
const lease = time.Minute

func held(id string) store.Lease { return store.Lease{RunID: id, Holder: "replica", Epoch: 1} }

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
	if err := s.CreateRun(t.Context(), store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
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
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", ThreadID: "thread_1", Exclusive: true, Owner: "token:a", Spec: []byte("spec"), Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 1, Frames: frames(1, 5)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, held("run_1"), store.Update{Status: store.Parked, Checkpoint: []byte("checkpoint")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k", Digest: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_1", Owner: "token:a", Agent: "demo"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, "thread_1", held("run_1"), [][]byte{[]byte("hello")}); err != nil {
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
	if err := s.CreateRun(ctx, store.Run{ID: "run_2", ThreadID: "thread_1", Exclusive: true, Holder: "replica"}, lease); !errors.As(err, new(*store.ThreadBusyError)) {
		t.Errorf("a second exclusive run on the thread after reopening: %v, want ThreadBusyError", err)
	}
}

// Stores in two schemas of one database see nothing of each other.
func TestSchemasAreApart(t *testing.T) {
	ctx := t.Context()
	dsn, a := pgtest.NewSchema(t)
	_, b := pgtest.NewSchema(t)
	sa, sb := open(t, dsn, a), open(t, dsn, b)
	if err := sa.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.GetRun(ctx, "run_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the other schema's run: %v, want ErrNotFound", err)
	}
	if err := sb.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
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
			if err := s.CreateRun(ctx, store.Run{ID: id, Holder: "replica"}, lease); err != nil {
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
				batches := []store.Events{{Lease: held(a), First: int64(first), Frames: frames(first, per)}}
				if c%2 == 1 {
					// Every other call journals both runs, b first, in one transaction.
					batches = append([]store.Events{{Lease: held(b), First: int64(c/2*per + 1), Frames: frames(c/2*per+1, per)}}, batches...)
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
		if err := s.CreateRun(ctx, store.Run{ID: id, Holder: "replica"}, lease); err != nil {
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
				batches := []store.Events{{Lease: held("run_x"), First: last + 1, Frames: frame}, {Lease: held("run_y"), First: last + 1, Frames: frame}}
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
// rows gone, the oldest seq is the first kept and reads below it get ErrExpired. (Its
// last seq is its last row's, so a journal keeps its last row whatever else goes.)
func TestExpiredBelowOldestRow(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	s := open(t, dsn, schema)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ first, n int }{{1, 3}, {4, 5}, {9, 2}} {
		if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: int64(b.first), Frames: frames(b.first, b.n)}}); err != nil {
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
}

// A read whose limit reaches past the largest seq neither overflows nor loses frames,
// and an empty batch checks its place without writing a row.
func TestReadLimitsAndEmptyBatches(t *testing.T) {
	ctx := t.Context()
	s := pgtest.Open(t)
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 1, Frames: frames(1, 4)}, {Lease: held("run_1"), First: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 7}}); !errors.Is(err, store.ErrSeq) {
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

// calls records what a Watch's func is called with.
type calls struct {
	mu     sync.Mutex
	got    [][]string
	called chan struct{}
}

func record(ctx context.Context, s store.Store) *calls {
	c := &calls{called: make(chan struct{}, 1)}
	s.Watch(ctx, func(ids []string) {
		c.mu.Lock()
		c.got = append(c.got, ids)
		c.mu.Unlock()
		select {
		case c.called <- struct{}{}:
		default:
		}
	})
	return c
}

func (c *calls) since(n int) [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[min(n, len(c.got)):]
}

func (c *calls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// next waits for a call from the nth on that match accepts, and returns the number of
// calls up to it.
func (c *calls) next(t *testing.T, n int, what string, match func(ids []string) bool) int {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for i, ids := range c.since(n) {
			if match(ids) {
				return n + i + 1
			}
		}
		select {
		case <-c.called:
		case <-timeout:
			t.Fatalf("no call for %s: calls %q", what, c.since(0))
		}
	}
}

func anyRun(ids []string) bool { return ids == nil }

func naming(id string) func([]string) bool {
	return func(ids []string) bool { return slices.Contains(ids, id) }
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Two replicas on one schema hear of each other's changes; a store on another schema
// of the same database wakes neither.
func TestWatchAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	_, other := pgtest.NewSchema(t)
	a, b, c := open(t, dsn, schema), open(t, dsn, schema), open(t, dsn, other)
	wa, wb := record(ctx, a), record(ctx, b)
	// Each says when it listens: what changed before, it cannot tell.
	wa.next(t, 0, "a listening", anyRun)
	wb.next(t, 0, "b listening", anyRun)

	// The other schema's changes come before one of b's: a hears b's alone.
	must(t, c.CreateRun(ctx, store.Run{ID: "run_other", Holder: "replica"}, lease))
	must(t, c.UpdateRun(ctx, held("run_other"), store.Update{Status: store.Running, Checkpoint: []byte("cp")}))
	must(t, b.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease))
	must(t, b.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: 1, Frames: frames(1, 2)}}))
	n := wa.next(t, 1, "b's append", naming("run_1"))
	for _, ids := range wa.since(1)[:n-1] {
		if ids == nil || slices.Contains(ids, "run_other") {
			t.Errorf("a was called with %q before b's append", ids)
		}
	}

	// And b hears of a's changes.
	m := wb.count()
	must(t, a.UpdateRun(ctx, held("run_1"), store.Update{Status: store.Parked, Release: true}))
	wb.next(t, m, "a's release", naming("run_1"))
	m = wb.count()
	_, _, err := a.PutInput(ctx, store.Input{RunID: "run_1", Key: "k"})
	must(t, err)
	wb.next(t, m, "a's input", naming(store.InputPrefix+"run_1"))
}

// A Watch whose connection is cut listens again, says so, and hears what follows.
func TestWatchReconnects(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	s := open(t, dsn, schema)
	w := record(ctx, s)
	n := w.next(t, 0, "listening", anyRun)
	conn := connect(t, dsn, schema)
	listen := `LISTEN ` + pgx.Identifier{postgres.ChannelFor(schema)}.Sanitize()
	var killed bool
	must(t, conn.QueryRow(ctx, `SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1`, listen).Scan(&killed))
	if !killed {
		t.Fatalf("no backend ran %q", listen)
	}
	n = w.next(t, n, "listening again", anyRun)
	must(t, s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease))
	must(t, s.UpdateRun(ctx, held("run_1"), store.Update{Status: store.Parked}))
	w.next(t, n, "an update after the reconnect", naming("run_1"))
}

// A transaction sends one notification, naming its runs, or none if it rolls back; past
// what a payload holds, it names none, which means any run.
func TestOneNotificationPerCommit(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	s := open(t, dsn, schema)
	conn := connect(t, dsn, schema)
	_, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{postgres.ChannelFor(schema)}.Sanitize())
	must(t, err)
	heard := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		must(t, err)
		return n.Payload
	}
	var batches []store.Events
	for i := range 120 {
		id := fmt.Sprintf("run_%02d_%s", i, strings.Repeat("x", 60))
		must(t, s.CreateRun(ctx, store.Run{ID: id, Holder: "replica"}, lease))
		batches = append(batches, store.Events{Lease: held(id), First: 1, Frames: frames(1, 1)})
	}
	ids := []string{batches[0].Lease.RunID, batches[1].Lease.RunID, batches[2].Lease.RunID}
	must(t, s.AppendEvents(ctx, []store.Events{batches[2], batches[0], batches[1]}))
	// A fenced append rolls back, and sends nothing.
	stale := batches[0]
	stale.First, stale.Lease.Epoch = 2, 7
	if err := s.AppendEvents(ctx, []store.Events{batches[3], stale}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a fenced append: %v", err)
	}
	must(t, s.AppendEvents(ctx, batches[3:]))
	must(t, s.UpdateRun(ctx, held(ids[0]), store.Update{Status: store.Running}))
	for _, want := range []string{strings.Join(ids, ","), "", ids[0]} {
		if got := heard(); got != want {
			t.Errorf("heard %q, want %q", got, want)
		}
	}
}

// Claimable reads indexes, whatever the number of runs: with sequential scans priced
// out, the plan has none.
func TestClaimableUsesIndexes(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	open(t, dsn, schema)
	conn := connect(t, dsn, schema)
	_, err := conn.Exec(ctx, `SET enable_seqscan = off`)
	must(t, err)
	rows, err := conn.Query(ctx, `EXPLAIN `+strings.ReplaceAll(postgres.ClaimableSQL, "$1", "100"))
	must(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(t, err)
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Seq Scan") {
		t.Errorf("Claimable scans a table:\n%s", plan)
	}
	for _, index := range []string{"runs_running_lease", "runs_parked_wake", "inputs_pending"} {
		if !strings.Contains(plan, index) {
			t.Errorf("Claimable does not use %s:\n%s", index, plan)
		}
	}
}

// A schema from before leases keeps its runs and inputs: the runs held by none since
// it was migrated.
func TestMigrateFromBeforeLeases(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	conn := connect(t, dsn, schema)
	init, err := os.ReadFile("migrations/0001_init.sql")
	must(t, err)
	for _, q := range []string{
		`CREATE SCHEMA ` + pgx.Identifier{schema}.Sanitize(),
		string(init),
		`CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO schema_migrations (version) VALUES (1)`,
		`INSERT INTO runs (id, thread_id, exclusive, owner, agent, request_id, status, checkpoint)
			VALUES ('run_1', 'thread_1', true, '', '', '', 2, 'cp')`,
		`INSERT INTO inputs (run_id, key) VALUES ('run_1', 'b'), ('run_1', 'a')`,
	} {
		_, err := conn.Exec(ctx, q)
		must(t, err)
	}
	if r := storetest.Upgraded(t, open(t, dsn, schema)); r.LeaseUntil.IsZero() {
		t.Errorf("the run's lease ends at the zero time, want when the schema was migrated")
	}
}

// Renewals and appends of several runs, which both lock the runs' rows, go on beside
// each other without a deadlock, whatever the order of the runs they are given.
func TestRenewBesideAppends(t *testing.T) {
	ctx := t.Context()
	s := pgtest.Open(t)
	ids := []string{"run_a", "run_b", "run_c", "run_d"}
	var leases []store.Lease
	for _, id := range ids {
		must(t, s.CreateRun(ctx, store.Run{ID: id, Holder: "replica"}, lease))
		leases = append(leases, held(id))
	}
	const rounds = 40
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range rounds {
			batches := make([]store.Events, len(ids))
			for j, id := range ids {
				batches[len(ids)-1-j] = store.Events{Lease: held(id), First: int64(i + 1), Frames: frames(i+1, 1)}
			}
			if err := s.AppendEvents(ctx, batches); err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
		}
	})
	for w := range 2 {
		wg.Go(func() {
			for i := range rounds {
				ls := slices.Clone(leases)
				if (i+w)%2 == 0 {
					slices.Reverse(ls)
				}
				if lost, err := s.Renew(ctx, ls, lease); err != nil || len(lost) > 0 {
					t.Errorf("renewal %d: lost %v, %v", i, lost, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkAppendEvents journals batches of 64 frames of 40 bytes to one run, as a
// busy run's event loop does.
func BenchmarkAppendEvents(b *testing.B) {
	s := pgtest.Open(b)
	ctx := b.Context()
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		b.Fatal(err)
	}
	const per = 64
	batch := make([][]byte, per)
	for i := range batch {
		batch[i] = make([]byte, 40)
	}
	next, calls := int64(1), 0
	for b.Loop() {
		if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: next, Frames: batch}}); err != nil {
			b.Fatal(err)
		}
		next += per
		calls++
	}
	b.ReportMetric(float64(calls*per)/b.Elapsed().Seconds(), "frames/s")
}

// A search_path that names no schema of the database fails Open naming the schema and
// the fix, not with PostgreSQL's "no schema has been selected to create in".
func TestOpenNamesAMissingSchema(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Skipf("AGENTD_TEST_POSTGRES is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	s, err := postgres.Open(t.Context(), u.String())
	if err == nil {
		s.Close()
		t.Fatal("Open with a search_path of no schema succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, schema) || !strings.Contains(msg, "CREATE SCHEMA "+schema) {
		t.Errorf("Open: %v; want the error to name schema %s and how to create it", err, schema)
	}
}

// Appending a run's events writes no new version of the run's row: at a provider's pace
// every event is an append, and a version each would fill the runs table with dead
// rows. The row's ctid (where its version lies) stays as it was across appends.
func TestAppendsLeaveTheRunsRowAlone(t *testing.T) {
	ctx := t.Context()
	dsn, schema := pgtest.NewSchema(t)
	s := open(t, dsn, schema)
	conn := connect(t, dsn, schema)
	must(t, s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease))
	version := func() string {
		t.Helper()
		var ctid, xmin string
		must(t, conn.QueryRow(ctx, `SELECT ctid::text, xmin::text FROM runs WHERE id = 'run_1'`).Scan(&ctid, &xmin))
		return ctid + "/" + xmin
	}
	before := version()
	for i := range 20 {
		must(t, s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: int64(i + 1), Frames: frames(i+1, 1)}}))
	}
	if after := version(); after != before {
		t.Errorf("the run's row moved from version %s to %s over 20 appends", before, after)
	}
	if r, err := s.GetRun(ctx, "run_1"); err != nil || r.LastSeq != 20 {
		t.Errorf("GetRun = last seq %d, %v; want 20", r.LastSeq, err)
	}
}
