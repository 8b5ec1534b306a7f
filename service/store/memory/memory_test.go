package memory_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
	"github.com/agentd/agentd/service/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memory.New(memory.Options{}) })
}

// A run's journal keeps its newest events within MaxRunBytes: reading below them gets
// ErrExpired.
func TestRunJournalIsBounded(t *testing.T) {
	s := memory.New(memory.Options{MaxRunBytes: 1000})
	ctx := t.Context()
	if err := s.CreateRun(ctx, store.Run{ID: "run_1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := s.AppendEvents(ctx, []store.Events{{RunID: "run_1", First: int64(i + 1), Frames: [][]byte{bytes.Repeat([]byte{'x'}, 100)}}}); err != nil {
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
	s.AppendMessages(ctx, "thread_1", "run_0", [][]byte{bytes.Repeat([]byte{'m'}, 3000)})
	for i := range 12 {
		id := fmt.Sprintf("run_%d", i)
		if err := s.CreateRun(ctx, store.Run{ID: id}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, []store.Events{{RunID: id, First: 1, Frames: frame}}); err != nil {
			t.Fatal(err)
		}
		if i < 8 {
			s.UpdateRun(ctx, id, store.Finished, nil)
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
