package builtin_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

// saveInRun runs one step of an agent whose model calls save_note n times, for caller
// on thread, and returns the results in call order.
func saveInRun(t *testing.T, notes *builtin.Notes, caller, thread string, n int) []runtime.Output {
	t.Helper()
	var calls []string
	for i := range n {
		calls = append(calls, builtin.SaveNoteName, fmt.Sprintf(`{"title":"%s %d","text":"x"}`, caller, i))
	}
	agent, err := runtime.New(runtime.Config{
		Model: &runtimetest.Model{Steps: []runtimetest.Step{runtimetest.Call(0, calls...), runtimetest.Say("done")}},
		Tools: []runtime.Tool{builtin.SaveNote(notes, builtin.WithClock(clock))},
	})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]runtime.Output{}
	for ev, err := range agent.Run(t.Context(), &runtime.Request{Caller: caller, ThreadID: thread, Messages: []runtime.Message{runtime.UserMessage("save")}}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev, ok := ev.(*runtime.ToolCallResult); ok {
			results[ev.Result.CallID] = ev.Result.Output
		}
	}
	outs := make([]runtime.Output, n)
	for i := range n {
		outs[i] = results[fmt.Sprintf("call_0_%d", i)]
	}
	return outs
}

// TestSaveNoteAfterAThousand saves 1,000 notes as one caller in one thread, then as
// other callers and in another thread: their saves succeed.
func TestSaveNoteAfterAThousand(t *testing.T) {
	notes := new(builtin.Notes)
	saved := 0
	for _, o := range saveInRun(t, notes, "mallory", "t1", 1000) {
		if !o.IsError {
			saved++
		}
	}
	if saved != builtin.DefaultNoteLimit {
		t.Errorf("mallory saved %d notes of 1,000, want %d", saved, builtin.DefaultNoteLimit)
	}
	for _, tt := range []struct{ caller, thread string }{{"alice", "t1"}, {"mallory", "t2"}, {"", "t1"}} {
		if out := saveInRun(t, notes, tt.caller, tt.thread, 1)[0]; out.IsError {
			t.Errorf("save by %q on %s: %s", tt.caller, tt.thread, out.String())
		}
	}
	if _, err := execute(t, builtin.SaveNote(notes), `{"title":"outside","text":"x"}`); err != nil {
		t.Errorf("save outside a run: %v", err)
	}
}

// TestSaveNoteKeepsCallersApart fills one caller's thread and saves as other callers,
// in other threads and outside a run: each scope has its own notes and its own limit.
func TestSaveNoteKeepsCallersApart(t *testing.T) {
	notes := builtin.NewNotes(2)
	outs := saveInRun(t, notes, "mallory", "t1", 3)
	failed := 0
	for _, o := range outs {
		if o.IsError {
			failed++
			if !strings.Contains(o.String(), "no room for another note: this conversation has 2 notes") {
				t.Errorf("mallory's failed save: %s", o.String())
			}
		}
	}
	if failed != 1 {
		t.Errorf("mallory's saves: %d failed, want 1 (the scope holds 2)", failed)
	}
	for _, tt := range []struct{ caller, thread, want string }{
		{"alice", "t1", `{"saved":true,"id":"note_1","title":"alice 0"}`}, // mallory's thread ID, another caller
		{"mallory", "t2", `{"saved":true,"id":"note_1","title":"mallory 0"}`},
		{"", "t1", `{"saved":true,"id":"note_1","title":"0"}`},
		{"", "t1", `{"saved":true,"id":"note_2","title":"0"}`}, // callers unknown: the thread's notes
	} {
		if out := saveInRun(t, notes, tt.caller, tt.thread, 1)[0]; out.IsError || out.String() != tt.want {
			t.Errorf("save by %q on %s: %s, want %s", tt.caller, tt.thread, out.String(), tt.want)
		}
	}
	// Outside a run, saves have a scope of their own.
	out, err := execute(t, builtin.SaveNote(notes), `{"title":"outside","text":"x"}`)
	if err != nil || string(out.JSON) != `{"saved":true,"id":"note_1","title":"outside"}` {
		t.Errorf("save outside a run: %s, %v", out.JSON, err)
	}
	if n := len(notes.List()); n != 7 {
		t.Errorf("%d notes in all, want 7", n)
	}
	for _, tt := range []struct {
		scope builtin.NoteScope
		want  int
	}{
		{builtin.NoteScope{Caller: "mallory", ThreadID: "t1"}, 2},
		{builtin.NoteScope{Caller: "alice", ThreadID: "t1"}, 1},
		{builtin.NoteScope{ThreadID: "t1"}, 2},
		{builtin.NoteScope{}, 1},
		{builtin.NoteScope{Caller: "alice", ThreadID: "t2"}, 0},
	} {
		got := notes.ListIn(tt.scope)
		if len(got) != tt.want {
			t.Errorf("ListIn(%+v): %d notes, want %d", tt.scope, len(got), tt.want)
		}
		for _, n := range got {
			if n.Scope != tt.scope {
				t.Errorf("ListIn(%+v) holds a note of %+v", tt.scope, n.Scope)
			}
		}
	}
}

// TestNotesFullScope saves 1,000 notes in one scope: the scope takes its limit and no
// more, and every other scope still saves.
func TestNotesFullScope(t *testing.T) {
	var notes builtin.Notes
	full := builtin.NoteScope{Caller: "mallory", ThreadID: "t1"}
	saved := 0
	for i := range 1000 {
		_, err := notes.AddIn(full, "t", "x", fixed)
		switch {
		case err == nil:
			saved++
		case !errors.Is(err, builtin.ErrNotesFull):
			t.Fatalf("save %d: %v", i, err)
		}
	}
	if saved != builtin.DefaultNoteLimit {
		t.Errorf("%d notes saved in one scope, want %d", saved, builtin.DefaultNoteLimit)
	}
	for _, scope := range []builtin.NoteScope{{Caller: "alice", ThreadID: "t1"}, {Caller: "mallory", ThreadID: "t2"}, {ThreadID: "t1"}, {}} {
		if note, err := notes.AddIn(scope, "t", "x", fixed); err != nil || note.ID != "note_1" || note.Scope != scope {
			t.Errorf("AddIn(%+v): %+v, %v; want note_1", scope, note, err)
		}
	}
	if _, err := notes.Add("t", "x", fixed); err != nil {
		t.Errorf("Add: %v", err)
	}
}

// TestNotesScopeBound fills more scopes than a store holds: it keeps MaxScopes of them,
// dropping the one saved to least recently each time.
func TestNotesScopeBound(t *testing.T) {
	notes := &builtin.Notes{MaxScopes: 3}
	scope := func(thread string) builtin.NoteScope { return builtin.NoteScope{Caller: "c", ThreadID: thread} }
	for _, thread := range []string{"a", "b", "c", "a", "d", "e", "a", "f"} {
		if _, err := notes.AddIn(scope(thread), "t", thread, fixed); err != nil {
			t.Fatalf("save on %s: %v", thread, err)
		}
	}
	// Saved to last: f, a, e, d, c, b. "a", saved to again before each drop, stays.
	for thread, want := range map[string]int{"a": 3, "e": 1, "f": 1, "b": 0, "c": 0, "d": 0} {
		if got := len(notes.ListIn(scope(thread))); got != want {
			t.Errorf("scope %s holds %d notes, want %d", thread, got, want)
		}
	}
	var texts []string
	for _, n := range notes.List() {
		texts = append(texts, n.Text)
	}
	if got, want := strings.Join(texts, " "), "a a e a f"; got != want {
		t.Errorf("List() texts %q, want %q, oldest first", got, want)
	}
	// Listing is no save: e stays the one saved to least recently.
	notes.ListIn(scope("e"))
	if _, err := notes.AddIn(scope("g"), "t", "g", fixed); err != nil {
		t.Fatal(err)
	}
	if len(notes.ListIn(scope("e"))) != 0 || len(notes.ListIn(scope("a"))) != 3 {
		t.Errorf("after g: e %v, a %v; want e dropped, a kept", notes.ListIn(scope("e")), notes.ListIn(scope("a")))
	}

	// One caller filling many threads cannot keep another caller from saving.
	notes = &builtin.Notes{MaxScopes: 10}
	for i := range 1000 {
		if _, err := notes.AddIn(builtin.NoteScope{Caller: "mallory", ThreadID: fmt.Sprint(i)}, "t", "x", fixed); err != nil {
			t.Fatalf("mallory's save %d: %v", i, err)
		}
	}
	if _, err := notes.AddIn(builtin.NoteScope{Caller: "alice", ThreadID: "t"}, "t", "x", fixed); err != nil {
		t.Errorf("alice's save: %v", err)
	}
	scopes := map[builtin.NoteScope]bool{}
	for _, n := range notes.List() {
		scopes[n.Scope] = true
	}
	if len(scopes) != 10 || !scopes[builtin.NoteScope{Caller: "alice", ThreadID: "t"}] {
		t.Errorf("the store holds %d scopes, want 10 with alice's", len(scopes))
	}
}

// TestNotesByteBound fills a store's bytes: the scopes saved to least recently make
// room, and a scope that alone would pass the bound is refused.
func TestNotesByteBound(t *testing.T) {
	// Each scope counts 40 bytes: its thread ID (1) and one note (1 + 38).
	notes := &builtin.Notes{MaxBytes: 100}
	text := strings.Repeat("x", 38)
	for _, thread := range []string{"a", "b", "c"} {
		if _, err := notes.AddIn(builtin.NoteScope{ThreadID: thread}, "t", text, fixed); err != nil {
			t.Fatalf("save on %s: %v", thread, err)
		}
	}
	for thread, want := range map[string]int{"a": 0, "b": 1, "c": 1} {
		if got := len(notes.ListIn(builtin.NoteScope{ThreadID: thread})); got != want {
			t.Errorf("scope %s holds %d notes, want %d", thread, got, want)
		}
	}
	// c's second note needs 39 more bytes: b makes room. Its third would need 117 in all.
	c := builtin.NoteScope{ThreadID: "c"}
	if _, err := notes.AddIn(c, "t", text, fixed); err != nil {
		t.Fatal(err)
	}
	if len(notes.ListIn(builtin.NoteScope{ThreadID: "b"})) != 0 {
		t.Error("b kept; want it dropped to make room for c")
	}
	_, err := notes.AddIn(c, "t", text, fixed)
	if want := "no room for another note: the notes of this conversation fill the store"; err == nil || err.Error() != want || !errors.Is(err, builtin.ErrNotesFull) {
		t.Errorf("c's third note: %v, want %q", err, want)
	}
	if got := len(notes.ListIn(c)); got != 2 {
		t.Errorf("c holds %d notes, want 2", got)
	}
}

// TestNotesConcurrent saves and lists from many goroutines, in one scope shared by all
// and in scopes of their own, some dropped as others come; run it with -race.
func TestNotesConcurrent(t *testing.T) {
	var notes builtin.Notes
	shared, sharedNotes := builtin.NoteScope{Caller: "c", ThreadID: "shared"}, &builtin.Notes{Limit: 150}
	bounded := &builtin.Notes{MaxScopes: 5}
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		saved, refused int
	)
	for g := range 20 {
		wg.Go(func() {
			own := builtin.NoteScope{Caller: "c", ThreadID: fmt.Sprint(g)}
			for range 10 {
				if _, err := notes.AddIn(own, "t", "x", fixed); err != nil {
					t.Error(err)
				}
				_, err := sharedNotes.AddIn(shared, "t", "x", fixed)
				mu.Lock()
				if errors.Is(err, builtin.ErrNotesFull) {
					refused++
				} else if err == nil {
					saved++
				}
				mu.Unlock()
				if _, err := bounded.AddIn(own, "t", "x", fixed); err != nil {
					t.Error(err)
				}
				_ = notes.List()
				_ = sharedNotes.ListIn(shared)
				_ = bounded.List()
			}
		})
	}
	wg.Wait()
	if saved != 150 || refused != 50 {
		t.Errorf("shared scope: %d saved, %d refused; want 150 and 50", saved, refused)
	}
	seen := map[string]bool{}
	for _, n := range sharedNotes.ListIn(shared) {
		if seen[n.ID] {
			t.Errorf("duplicate id %s", n.ID)
		}
		seen[n.ID] = true
	}
	if len(seen) != 150 {
		t.Errorf("the shared scope holds %d notes, want 150", len(seen))
	}
	scopes := map[builtin.NoteScope]bool{}
	for _, n := range bounded.List() {
		scopes[n.Scope] = true
	}
	if len(scopes) > 5 {
		t.Errorf("the bounded store holds %d scopes, want at most 5", len(scopes))
	}
	if got := len(notes.List()); got != 200 {
		t.Errorf("%d notes, want 200", got)
	}
	for g := range 20 {
		if got := notes.ListIn(builtin.NoteScope{Caller: "c", ThreadID: fmt.Sprint(g)}); len(got) != 10 || got[9].ID != "note_10" {
			t.Errorf("scope %d: %d notes, want note_1 to note_10", g, len(got))
		}
	}
}
