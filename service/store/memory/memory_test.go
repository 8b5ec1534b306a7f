package memory_test

import (
	"bytes"
	"errors"
	"fmt"
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
