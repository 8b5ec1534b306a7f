package fence_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/internal/fence"
)

func TestHolds(t *testing.T) {
	l := store.Lease{RunID: "run_1", Holder: "a", Epoch: 2}
	for _, c := range []struct {
		holder string
		epoch  int64
		l      store.Lease
		want   bool
	}{
		{"a", 2, l, true},
		{"a", 3, l, false},
		{"b", 2, l, false},
		{"", 2, store.Lease{RunID: "run_1", Epoch: 2}, false}, // released: no lease holds it
	} {
		if got := fence.Holds(c.holder, c.epoch, c.l); got != c.want {
			t.Errorf("Holds(%q, %d, %+v) = %v, want %v", c.holder, c.epoch, c.l, got, c.want)
		}
	}
}

func TestCheckAppend(t *testing.T) {
	runs := map[string]fence.Run{
		"run_ok":       {Found: true, Holder: "a", Epoch: 1, LastSeq: 4},
		"run_other":    {Found: true, Holder: "b", Epoch: 2, LastSeq: 0},
		"run_other2":   {Found: true, Holder: "b", Epoch: 2, LastSeq: 0},
		"run_finished": {Found: true, Finished: true, LastSeq: 3},
	}
	batch := func(id string, epoch, first int64, n int) store.Events {
		return store.Events{Lease: store.Lease{RunID: id, Holder: "a", Epoch: epoch}, First: first, Frames: make([][]byte, n)}
	}
	asked := map[string]int{}
	check := func(bs ...store.Events) error {
		return fence.CheckAppend(bs, func(id string) (fence.Run, error) {
			asked[id]++
			return runs[id], nil
		})
	}
	if err := check(batch("run_ok", 1, 5, 2), batch("run_ok", 1, 7, 1)); err != nil {
		t.Errorf("batches that follow each other: %v", err)
	}
	if asked["run_ok"] != 1 {
		t.Errorf("the run of two batches was read %d times, want once", asked["run_ok"])
	}
	if err := check(batch("run_ok", 1, 5, 2), batch("run_ok", 1, 8, 1)); !errors.Is(err, store.ErrSeq) {
		t.Errorf("a gap between two batches: %v, want ErrSeq", err)
	}
	// Fenced runs are all named, before a batch out of sequence is told of.
	err := check(batch("run_ok", 1, 9, 1), batch("run_other", 1, 1, 1), batch("run_other2", 1, 1, 1), batch("run_other", 1, 2, 1))
	fe, ok := errors.AsType[*store.FencedError](err)
	if !ok || !slices.Equal(fe.RunIDs, []string{"run_other", "run_other2"}) {
		t.Errorf("fenced batches: %v, want a FencedError naming run_other and run_other2", err)
	}
	// A missing or finished run is told of before any fence.
	if err := check(batch("run_other", 1, 1, 1), batch("run_finished", 1, 4, 1)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("a finished run among fenced ones: %v, want ErrFinished", err)
	}
	if err := check(batch("run_other", 1, 1, 1), batch("run_nope", 1, 1, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing run among fenced ones: %v, want ErrNotFound", err)
	}
}
