package journal

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
)

// testRun is a run as the writer sees it, run here under lease.
type testRun struct {
	sync.Mutex
	j       *Journal
	lease   store.Lease
	writing Writing
}

func (r *testRun) Journal() *Journal                { return r.j }
func (r *testRun) LeaseLocked() (store.Lease, bool) { return r.lease, true }
func (r *testRun) Writing() *Writing                { return &r.writing }
func (r *testRun) ID() string                       { return r.lease.RunID }

func TestFlushRun_StoresAnOpenTail(t *testing.T) {
	st := memory.New(memory.Options{})
	lease := store.Lease{RunID: "run_1", Holder: "a", Epoch: 1}
	if err := st.CreateRun(t.Context(), store.Run{ID: lease.RunID, Holder: lease.Holder}, time.Minute); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(st, WriterConfig{LeaseTTL: time.Minute, Log: slog.New(slog.DiscardHandler), Wrote: func(bool) {}})
	ss := &testRun{lease: lease, j: New(nil, false)}
	f, err := MarshalFrame(&agentdv1.RunEvent{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	ss.Lock()
	ss.j.Append(f)
	w.Mark(ss)
	openText(ss.j, 2, "m1", "Once ")
	w.Mark(ss)
	ss.Unlock()

	flushed := make(chan error, 1)
	go func() { flushed <- w.Flush(ss) }()
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("flushRun still waits after 5 s: the store never got the open tail")
	}
	frames, err := st.ReadEvents(t.Context(), lease.RunID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 {
		t.Fatalf("the store has %d frames, want 2", len(frames))
	}
	if ev, err := EventOf(frames[1]); err != nil || ev.GetTextDelta().GetDelta() != "Once " {
		t.Errorf("the store's last frame is %v (%v), want the open delta", ev, err)
	}
}
