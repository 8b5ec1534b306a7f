package service

import (
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
)

// openText journals a text delta of block id with seq seq, as sendLocked does: merged
// into the open tail when it can be, else as a new open tail. It reports whether it
// merged.
func openText(j *journal.Journal, seq int64, id, text string) bool {
	if j.MergeDelta(journal.TextDelta, id, text) {
		return true
	}
	ev := &agentdv1.RunEvent{Seq: seq, Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: id, Delta: text}}}
	j.OpenDelta(ev, journal.TextDelta, id, text)
	return false
}

func TestFlushRun_StoresAnOpenTail(t *testing.T) {
	st := memory.New(memory.Options{})
	lease := store.Lease{RunID: "run_1", Holder: "a", Epoch: 1}
	if err := st.CreateRun(t.Context(), store.Run{ID: lease.RunID, Holder: lease.Holder}, time.Minute); err != nil {
		t.Fatal(err)
	}
	w := newJournalWriter(&Server{}, st)
	ss := &session{runID: lease.RunID, lease: lease, journal: journal.New(nil, false)}
	f, err := journal.MarshalFrame(&agentdv1.RunEvent{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	ss.mu.Lock()
	ss.journal.Append(f)
	w.mark(ss)
	openText(ss.journal, 2, "m1", "Once ")
	w.mark(ss)
	ss.mu.Unlock()

	flushed := make(chan error, 1)
	go func() { flushed <- w.flushRun(ss) }()
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
	if ev, err := journal.EventOf(frames[1]); err != nil || ev.GetTextDelta().GetDelta() != "Once " {
		t.Errorf("the store's last frame is %v (%v), want the open delta", ev, err)
	}
}
