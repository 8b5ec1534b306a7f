package journal

import (
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// openText journals a text delta of block id with seq seq, as sendLocked does: merged
// into the open tail when it can be, else as a new open tail. It reports whether it
// merged.
func openText(j *Journal, seq int64, id, text string) bool {
	if j.MergeDelta(TextDelta, id, text) {
		return true
	}
	ev := &agentdv1.RunEvent{Seq: seq, Kind: &agentdv1.RunEvent_TextDelta{TextDelta: &agentdv1.TextDelta{MessageId: id, Delta: text}}}
	j.OpenDelta(ev, TextDelta, id, text)
	return false
}

// readAll reads every frame of j after seq after, decoded.
func readAll(t *testing.T, j *Journal, after int64) []*agentdv1.RunEvent {
	t.Helper()
	fs, _, _, err := j.Read(t.Context(), after, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*agentdv1.RunEvent
	for _, f := range fs {
		ev, err := EventOf(f)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// Deltas of one block merge while nobody took the last one: the reader then gets one
// event with all their text, under the first one's seq. Once it was read, the next
// delta is an event of its own.
func TestJournal_DeltasMergeUntilTaken(t *testing.T) {
	j := New(nil, false)
	if openText(j, 1, "m1", "Once ") || !openText(j, 0, "m1", "upon ") || !openText(j, 0, "m1", "a ") {
		t.Fatal("the second and third deltas of the block did not merge into the first")
	}
	if j.last.Load() != 1 {
		t.Fatalf("last = %d after three merged deltas, want 1", j.last.Load())
	}
	evs := readAll(t, j, 0)
	if len(evs) != 1 || evs[0].GetSeq() != 1 || evs[0].GetTextDelta().GetDelta() != "Once upon a " {
		t.Fatalf("read %v, want one delta, seq 1, of the three texts", evs)
	}
	if openText(j, 2, "m1", "time.") {
		t.Fatal("a delta merged into one a reader had taken")
	}
	if evs := readAll(t, j, 1); len(evs) != 1 || evs[0].GetSeq() != 2 || evs[0].GetTextDelta().GetDelta() != "time." {
		t.Fatalf("read %v, want the fourth delta alone, seq 2", evs)
	}
}

// Only deltas of the same kind and block merge, never past coalesceMax, and never
// across another event. The store's copy (unstored) leaves the open tail, which still
// merges (see TestJournal_StoreLeavesTheOpenTail).
func TestJournal_WhatDoesNotMerge(t *testing.T) {
	j := New(nil, false)
	openText(j, 1, "m1", "a")
	if openText(j, 2, "m2", "b") {
		t.Error("deltas of two blocks merged")
	}
	if j.MergeDelta(ReasoningDelta, "m2", "c") {
		t.Error("a reasoning delta merged into a text delta")
	}
	big := strings.Repeat("x", coalesceMax)
	if openText(j, 3, "m2", big) {
		t.Error("a delta merged past coalesceMax")
	}
	if openText(j, 4, "m2", "y") {
		t.Error("a delta merged into a full one")
	}
	f, err := MarshalFrame(&agentdv1.RunEvent{Seq: 5})
	if err != nil {
		t.Fatal(err)
	}
	j.Append(f)
	if j.MergeDelta(TextDelta, "m2", "z") {
		t.Error("a delta merged across another event")
	}
	openText(j, 6, "m2", "z")
	j.Seal()
	if j.MergeDelta(TextDelta, "m2", "!") {
		t.Error("a delta merged into a sealed one")
	}
	var texts []string
	for _, ev := range readAll(t, j, 0) {
		texts = append(texts, ev.GetTextDelta().GetDelta())
	}
	if got := strings.Join(texts, "|"); got != "a|b|"+big+"|y||z" {
		t.Errorf("the journal's deltas are %.40q…, want each as journaled", got)
	}
}

// The store's copy leaves the open tail of a journal that is not gated, so that deltas
// still merge for a stream behind however often the store is written to; it takes the
// tail once sealed. A gated journal's store takes the tail at once: its readers wait
// for the store.
func TestJournal_StoreLeavesTheOpenTail(t *testing.T) {
	j := New(nil, false)
	openText(j, 1, "m1", "Once ")
	if first, frames := j.Unstored(); first != 1 || len(frames) != 0 {
		t.Fatalf("unstored = %d frames from %d with only an open tail, want none from 1", len(frames), first)
	}
	if !openText(j, 0, "m1", "upon ") {
		t.Fatal("a delta did not merge into the tail the store left")
	}
	j.Seal()
	first, frames := j.Unstored()
	if first != 1 || len(frames) != 1 {
		t.Fatalf("unstored = %d frames from %d after seal, want 1 from 1", len(frames), first)
	}
	if ev, err := EventOf(frames[0]); err != nil || ev.GetTextDelta().GetDelta() != "Once upon " {
		t.Fatalf("the store got %v (%v), want the merged delta", ev, err)
	}

	g := New(nil, true)
	openText(g, 1, "m1", "Once ")
	if _, frames := g.Unstored(); len(frames) != 1 {
		t.Fatalf("a gated journal's unstored = %d frames with an open tail, want 1", len(frames))
	}
	if openText(g, 0, "m1", "upon ") {
		t.Error("a delta merged into a gated journal's tail the store took")
	}
}

// A run that ends with its last delta still open, unsent (its stream failed as the
// model streamed), has its journal flushed: flushRun seals the tail for the store rather
// than wait for a frame the store never gets (storeTimeout).
