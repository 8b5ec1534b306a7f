package memory_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
	"github.com/agentd/agentd/service/store/storetest"
)

// lease is how long the tests' runs are held: longer than any test.
const lease = time.Minute

func held(id string) store.Lease { return store.Lease{RunID: id, Holder: "replica", Epoch: 1} }

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memory.New(memory.Options{}) })
}

// A run's journal keeps its newest events within MaxRunBytes: reading below them gets
// ErrExpired.
func TestRunJournalIsBounded(t *testing.T) {
	s := memory.New(memory.Options{MaxRunBytes: 1000})
	ctx := t.Context()
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := s.AppendEvents(ctx, []store.Events{{Lease: held("run_1"), First: int64(i + 1), Frames: [][]byte{bytes.Repeat([]byte{'x'}, 100)}}}); err != nil {
			t.Fatal(err)
		}
	}
	oldest, last, err := s.EventBounds(ctx, "run_1")
	if err != nil || last != 100 || oldest != 91 {
		t.Fatalf("EventBounds = %d, %d, %v; want the newest 10 events of 100 bytes kept in 1000 bytes: 91, 100", oldest, last, err)
	}
	if _, err := s.ReadEvents(ctx, "run_1", 89, 10); !errors.Is(err, store.ErrExpired) {
		t.Errorf("reading from seq 90: %v, want ErrExpired", err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 90, 100); err != nil || len(fs) != 10 {
		t.Errorf("reading from seq 91: %d frames, %v", len(fs), err)
	}
}

// Past MaxBytes the store lets go of the runs that finished first, then of the threads
// idle the longest, and never of a run going on.
func TestBytesAreBounded(t *testing.T) {
	s := memory.New(memory.Options{MaxBytes: 10_000})
	ctx := t.Context()
	frame := [][]byte{bytes.Repeat([]byte{'x'}, 1000)}
	s.CreateThread(ctx, store.Thread{ID: "thread_1"})
	for i := range 12 {
		id := fmt.Sprintf("run_%d", i)
		if err := s.CreateRun(ctx, store.Run{ID: id, Holder: "replica"}, lease); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			s.AppendMessages(ctx, "thread_1", held(id), [][]byte{bytes.Repeat([]byte{'m'}, 3000)})
		}
		if err := s.AppendEvents(ctx, []store.Events{{Lease: held(id), First: 1, Frames: frame}}); err != nil {
			t.Fatal(err)
		}
		if i < 8 {
			s.UpdateRun(ctx, held(id), store.Update{Status: store.Finished})
		}
	}
	if n := s.Bytes(); n > 10_000 {
		t.Errorf("the store holds %d bytes, more than its 10000", n)
	}
	for i := 8; i < 12; i++ {
		if _, err := s.GetRun(ctx, fmt.Sprintf("run_%d", i)); err != nil {
			t.Errorf("run_%d, going on, was let go: %v", i, err)
		}
	}
	if _, err := s.GetRun(ctx, "run_0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run_0, the first to finish, is still kept: %v", err)
	}
	if _, err := s.GetRun(ctx, "run_7"); err != nil {
		t.Errorf("run_7, the last to finish, was let go before older ones: %v", err)
	}
}

// A thread's grants count toward MaxBytes: revoked, or gone with their thread, they
// count no more, and past the bound the thread idle the longest goes with its grants.
func TestGrantsCountTowardTheBound(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New(memory.Options{MaxBytes: 1000, Now: func() time.Time { return now }})
	ctx := t.Context()
	for _, id := range []string{"thread_old", "thread_new"} {
		if err := s.CreateThread(ctx, store.Thread{ID: id}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	grant := func(id, thread string, size int) store.Grant {
		return store.Grant{ID: id, ThreadID: thread, Tool: "shell", Arguments: strings.Repeat("a", size)}
	}
	if err := s.PutGrant(ctx, grant("grant_1", "thread_new", 300)); err != nil {
		t.Fatal(err)
	}
	one := s.Bytes()
	if one < 300 {
		t.Fatalf("a grant of 300 bytes of arguments counts %d bytes", one)
	}
	if err := s.PutGrant(ctx, grant("grant_2", "thread_new", 100)); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeGrant(ctx, "thread_new", "grant_2"); err != nil {
		t.Fatal(err)
	}
	if n := s.Bytes(); n != one {
		t.Errorf("after the second grant was revoked the store holds %d bytes, want %d", n, one)
	}
	// thread_old, idle the longest, goes with the grant that took the store past its
	// bound.
	if err := s.PutGrant(ctx, grant("grant_3", "thread_old", 800)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetThread(ctx, "thread_old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("thread_old past the bound: %v, want it let go", err)
	}
	if n := s.Bytes(); n != one {
		t.Errorf("after thread_old was let go the store holds %d bytes, want %d", n, one)
	}
	if gs, err := s.Grants(ctx, "thread_new"); err != nil || len(gs) != 1 {
		t.Errorf("thread_new's grants: %+v, %v; want grant_1", gs, err)
	}
	if err := s.DeleteThread(ctx, "thread_new"); err != nil {
		t.Fatal(err)
	}
	if n := s.Bytes(); n != 0 {
		t.Errorf("with no thread left the store holds %d bytes, want 0", n)
	}
}

// An append that takes the store past its bound is counted whole before anything is
// let go: the thread it appends to, if it goes, takes all of it along.
func TestAppendPastTheBound(t *testing.T) {
	s := memory.New(memory.Options{MaxBytes: 100})
	ctx := t.Context()
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_1"}); err != nil {
		t.Fatal(err)
	}
	msgs := [][]byte{bytes.Repeat([]byte{'m'}, 60), bytes.Repeat([]byte{'m'}, 60), []byte("last")}
	if err := s.AppendMessages(ctx, "thread_1", held("run_1"), msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetThread(ctx, "thread_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a thread of 124 bytes in a store of 100: %v, want it let go", err)
	}
	if n := s.Bytes(); n != 0 {
		t.Errorf("with the thread let go the store holds %d bytes, want 0", n)
	}
}

// Leases are timed by Options.Now: a lease runs out when that clock says so.
func TestLeasesUseTheClock(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New(memory.Options{Now: func() time.Time { return now }})
	ctx := t.Context()
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", Holder: "replica"}, lease); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetRun(ctx, "run_1"); !r.LeaseUntil.Equal(now.Add(lease)) {
		t.Errorf("LeaseUntil %v, want %v", r.LeaseUntil, now.Add(lease))
	}
	if _, err := s.Claim(ctx, "run_1", "other", lease, false); !errors.Is(err, store.ErrHeld) {
		t.Fatalf("Claim within the lease: %v, want ErrHeld", err)
	}
	if runs, _ := s.Claimable(ctx, 10); len(runs) != 0 {
		t.Errorf("Claimable within the lease: %d runs", len(runs))
	}
	now = now.Add(lease + time.Nanosecond)
	if runs, _ := s.Claimable(ctx, 10); len(runs) != 1 {
		t.Errorf("Claimable past the lease: %d runs, want 1", len(runs))
	}
	r, err := s.Claim(ctx, "run_1", "other", lease, false)
	if err != nil || r.Epoch != 2 || !r.LeaseUntil.Equal(now.Add(lease)) {
		t.Errorf("Claim past the lease: epoch %d until %v, %v", r.Epoch, r.LeaseUntil, err)
	}
}

// A store past its bound lets go of finished runs until it is an eighth under it, so
// that a store at its bound under load does not look through its runs at every append.
func TestBoundLeavesRoom(t *testing.T) {
	s := memory.New(memory.Options{MaxBytes: 80_000})
	ctx := t.Context()
	frame := [][]byte{bytes.Repeat([]byte{'x'}, 1000)}
	crossed := 0
	for i := range 200 {
		id := fmt.Sprintf("run_%d", i)
		if err := s.CreateRun(ctx, store.Run{ID: id, Holder: "replica"}, lease); err != nil {
			t.Fatal(err)
		}
		before := s.Bytes()
		if err := s.AppendEvents(ctx, []store.Events{{Lease: held(id), First: 1, Frames: frame}}); err != nil {
			t.Fatal(err)
		}
		if after := s.Bytes(); after < before {
			crossed++
			if after > 70_000 {
				t.Fatalf("past its bound the store went down to %d bytes, want at most 70000 (7/8 of 80000)", after)
			}
		}
		s.UpdateRun(ctx, held(id), store.Update{Status: store.Finished})
	}
	// About 200 KB went through an 80 KB store: it let go of runs a few times, not at
	// every append once full.
	if crossed == 0 || crossed > 30 {
		t.Errorf("the store let go of runs at %d appends of 200, want a few", crossed)
	}
}

// Past MaxBytes the owner holding the most lets go of its own data first: a caller that
// writes thread after thread loses its oldest threads and runs, not another caller's
// thread and finished run, however long that one was idle or finished.
func TestChurnEvictsTheChurnersOwn(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const maxBytes = 8 << 20
	s := memory.New(memory.Options{MaxBytes: maxBytes, Now: func() time.Time { now = now.Add(time.Millisecond); return now }})
	ctx := t.Context()
	// write starts a run of owner's with events, appends a message to a new thread of
	// owner's under it, and finishes the run.
	write := func(owner, run, thread string, events, message int) {
		t.Helper()
		if err := s.CreateRun(ctx, store.Run{ID: run, ThreadID: thread, Owner: owner, Holder: "replica"}, lease); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, []store.Events{{Lease: held(run), First: 1, Frames: [][]byte{bytes.Repeat([]byte{'e'}, events)}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateThread(ctx, store.Thread{ID: thread, Owner: owner}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendMessages(ctx, thread, held(run), [][]byte{bytes.Repeat([]byte{'m'}, message)}); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateRun(ctx, held(run), store.Update{Status: store.Finished}); err != nil {
			t.Fatal(err)
		}
	}
	write("token:a", "run_a", "thread_a", 1<<10, 1<<10)
	for i := range 80 {
		write("token:b", fmt.Sprintf("run_b%d", i), fmt.Sprintf("thread_b%d", i), 64<<10, 512<<10)
	}
	if _, err := s.GetThread(ctx, "thread_a"); err != nil {
		t.Errorf("token:a's thread, after token:b's churn: %v", err)
	}
	if msgs, err := s.ThreadMessages(ctx, "thread_a", 0, 10); err != nil || len(msgs) != 1 {
		t.Errorf("token:a's thread's messages: %d, %v; want 1", len(msgs), err)
	}
	if r, err := s.GetRun(ctx, "run_a"); err != nil || r.Status != store.Finished {
		t.Errorf("token:a's finished run, after token:b's churn: %v, %v", r.Status, err)
	}
	if n := s.Bytes(); n > maxBytes {
		t.Errorf("the store holds %d bytes, more than its %d", n, maxBytes)
	}
	if _, err := s.GetThread(ctx, "thread_b0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("token:b's oldest thread: %v, want it let go", err)
	}
	if _, err := s.GetRun(ctx, "run_b0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("token:b's first finished run: %v, want it let go", err)
	}
	if _, err := s.GetThread(ctx, "thread_b79"); err != nil {
		t.Errorf("token:b's newest thread: %v", err)
	}
}
