package demo_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/demo"
	"github.com/agentd/agentd/runtime/tool/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var fixed = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

// newAgent returns an agent on the demo model with the built-in tools and their policy,
// and the store its notes go to.
func newAgent(t *testing.T) (*runtime.Agent, *builtin.Notes) {
	t.Helper()
	notes := new(builtin.Notes)
	agent, err := runtime.New(runtime.Config{
		Model:  demo.New(demo.Config{}),
		Tools:  builtin.Tools(builtin.WithClock(func() time.Time { return fixed }), builtin.WithNotes(notes)),
		Policy: builtin.Policy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return agent, notes
}

// run runs req to the end and returns its events, the last being the RunFinished.
func run(t *testing.T, agent *runtime.Agent, req *runtime.Request) ([]runtime.Event, *runtime.RunFinished) {
	t.Helper()
	var evs []runtime.Event
	var fin *runtime.RunFinished
	for ev, err := range agent.Run(t.Context(), req) {
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		evs = append(evs, ev)
		if f, ok := ev.(*runtime.RunFinished); ok {
			fin = f
		}
	}
	if fin == nil {
		t.Fatal("the run did not finish")
	}
	return evs, fin
}

// toolCalls returns the names of the tools called, and the results, in order.
func toolCalls(evs []runtime.Event) (names []string, results []runtime.Output) {
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *runtime.ToolCallStarted:
			names = append(names, ev.Name)
		case *runtime.ToolCallResult:
			results = append(results, ev.Result.Output)
		}
	}
	return names, results
}

func roles(msgs []runtime.Message) []runtime.Role {
	var rs []runtime.Role
	for _, m := range msgs {
		rs = append(rs, m.Role)
	}
	return rs
}

func approveAll(context.Context, runtime.ApprovalRequest) (runtime.Decision, error) {
	return runtime.Decision{Outcome: runtime.OutcomeApproved}, nil
}

// TestRuns drives the demo model through a real agent with the built-in tools.
func TestRuns(t *testing.T) {
	withTool := []runtime.Role{runtime.RoleAssistant, runtime.RoleTool, runtime.RoleAssistant}
	tests := []struct {
		name      string
		input     string
		approve   func(context.Context, runtime.ApprovalRequest) (runtime.Decision, error)
		wantCalls []string
		wantRoles []runtime.Role
		wantText  []string // substrings of the final text
		wantNotes int
	}{
		{
			name:      "time",
			input:     "What time is it?",
			wantCalls: []string{"current_time"},
			wantRoles: withTool,
			wantText:  []string{"It is 04:00 on Monday, 30 November 2026 in UTC (2026-11-30T04:00:00Z)."},
		},
		{
			name:      "time in a zone",
			input:     "what's the date in Asia/Tokyo?",
			wantCalls: []string{"current_time"},
			wantRoles: withTool,
			wantText:  []string{"2026-11-30T13:00:00+09:00", "Asia/Tokyo"},
		},
		{
			name:      "unknown zone",
			input:     "what time is it in Mars/Olympus",
			wantCalls: []string{"current_time"},
			wantRoles: withTool,
			wantText:  []string{`The current_time tool failed. Its error: “tool current_time failed: unknown time zone "Mars/Olympus"`},
		},
		{
			name:      "arithmetic",
			input:     "what is 12*7",
			wantCalls: []string{"calculate"},
			wantRoles: withTool,
			wantText:  []string{"12*7 = 84"},
		},
		{
			name:      "arithmetic in words",
			input:     "calculate (3+4)/2 times 10",
			wantCalls: []string{"calculate"},
			wantRoles: withTool,
			wantText:  []string{"(3+4)/2 * 10 = 35"},
		},
		{
			name:      "division by zero",
			input:     "what is 1/(2-2)?",
			wantCalls: []string{"calculate"},
			wantRoles: withTool,
			wantText:  []string{"The calculate tool failed. Its error: “tool calculate failed: cannot evaluate \"1/(2-2)\": at position 2: division by zero”."},
		},
		{
			name:      "note approved",
			input:     "save a note: buy milk",
			approve:   approveAll,
			wantCalls: []string{"save_note"},
			wantRoles: withTool,
			wantText:  []string{`Saved your note "Buy milk" (note_1).`},
			wantNotes: 1,
		},
		{
			name:  "note denied",
			input: "save a note: buy milk",
			approve: func(context.Context, runtime.ApprovalRequest) (runtime.Decision, error) {
				return runtime.Decision{Outcome: runtime.OutcomeDenied, Reason: "not now"}, nil
			},
			wantCalls: []string{"save_note"},
			wantRoles: withTool,
			wantText:  []string{"The save_note tool failed. Its error: “the call of save_note was denied: not now”. Nothing was saved."},
		},
		{
			name:      "hello",
			input:     "hello",
			wantRoles: []runtime.Role{runtime.RoleAssistant},
			wantText:  []string{"built-in demo model, not a language model", "--model openai:gpt-4.1-mini", "ANTHROPIC_API_KEY"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, notes := newAgent(t)
			var asked []string
			req := &runtime.Request{Messages: []runtime.Message{runtime.UserMessage(tt.input)}}
			if tt.approve != nil {
				req.Approve = func(ctx context.Context, ar runtime.ApprovalRequest) (runtime.Decision, error) {
					asked = append(asked, ar.Call.Name)
					return tt.approve(ctx, ar)
				}
			}
			evs, fin := run(t, agent, req)
			if fin.Reason != runtime.EndCompleted || fin.Err != nil {
				t.Fatalf("run finished %v (%v), want completed", fin.Reason, fin.Err)
			}
			calls, _ := toolCalls(evs)
			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("tools called (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRoles, roles(fin.NewMessages)); diff != "" {
				t.Errorf("roles of the new messages (-want +got):\n%s", diff)
			}
			for _, want := range tt.wantText {
				if !strings.Contains(fin.FinalText, want) {
					t.Errorf("final text %q does not contain %q", fin.FinalText, want)
				}
			}
			if last := fin.NewMessages[len(fin.NewMessages)-1]; last.Text() != fin.FinalText {
				t.Errorf("final text %q is not the last message's %q", fin.FinalText, last.Text())
			}
			if tt.approve != nil && !slices.Equal(asked, []string{"save_note"}) {
				t.Errorf("approvals asked for %q, want save_note alone", asked)
			}
			if got := len(notes.List()); got != tt.wantNotes {
				t.Errorf("%d notes saved, want %d", got, tt.wantNotes)
			}
			if tt.wantNotes > 0 && notes.List()[0].Text != "buy milk" {
				t.Errorf("note saved = %+v, want the text \"buy milk\"", notes.List()[0])
			}
		})
	}
}

// TestResumeApproval parks a run on the approval of save_note and resumes it in a second
// run, as a client that decides later would: the model needs nothing but the transcript.
func TestResumeApproval(t *testing.T) {
	agent, notes := newAgent(t)
	msgs := []runtime.Message{runtime.UserMessage("please remember to call mom")}
	_, fin := run(t, agent, &runtime.Request{Messages: msgs})
	if fin.Reason != runtime.EndAwaitingInput || len(fin.Pending.AwaitingApproval()) != 1 {
		t.Fatalf("first run finished %v with pending %+v, want awaiting one approval", fin.Reason, fin.Pending)
	}
	if got := fin.Pending.Calls[0].Call.Arguments; got != `{"title":"Call mom","text":"call mom"}` {
		t.Errorf("pending call arguments = %s", got)
	}
	msgs = append(msgs, fin.NewMessages...)
	_, fin = run(t, agent, &runtime.Request{Messages: msgs, Resume: fin.Pending, Approve: approveAll})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("resumed run finished %v (%v), want completed", fin.Reason, fin.Err)
	}
	want := []runtime.Role{runtime.RoleAssistant, runtime.RoleTool, runtime.RoleAssistant}
	if diff := cmp.Diff(want, roles(fin.NewMessages)); diff != "" {
		t.Errorf("roles of the resumed run's new messages (-want +got):\n%s", diff)
	}
	if want := `Saved your note "Call mom" (note_1).`; fin.FinalText != want {
		t.Errorf("final text = %q, want %q", fin.FinalText, want)
	}
	if len(notes.List()) != 1 {
		t.Errorf("notes = %+v, want one", notes.List())
	}
}

// TestToolNotOffered checks that the model calls no tool that the request does not
// offer, here because the run's policy disables it.
func TestToolNotOffered(t *testing.T) {
	agent, _ := newAgent(t)
	req := &runtime.Request{
		Messages: []runtime.Message{runtime.UserMessage("what time is it")},
		Policy:   runtime.Policy{Tools: map[string]runtime.ToolPolicy{builtin.CurrentTimeName: {Disabled: true}}},
	}
	evs, fin := run(t, agent, req)
	if calls, _ := toolCalls(evs); len(calls) > 0 {
		t.Errorf("tools called: %q, want none", calls)
	}
	if want := "The current_time tool is not available in this run"; !strings.Contains(fin.FinalText, want) {
		t.Errorf("final text %q does not contain %q", fin.FinalText, want)
	}
}

func stream(t *testing.T, ctx context.Context, m runtime.Model, req *runtime.ModelRequest) ([]runtime.ModelEvent, error) {
	t.Helper()
	var evs []runtime.ModelEvent
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

var allTools = []runtime.ToolSpec{{Name: builtin.CurrentTimeName}, {Name: builtin.CalculateName}, {Name: builtin.SaveNoteName}}

// TestStreamToolCall checks the events of a tool call: the id and name on the first
// fragment only, every fragment at index 0, then usage, then the finish.
func TestStreamToolCall(t *testing.T) {
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("save a note: Grüße an 日本 🎉")}, Tools: allTools}
	evs, err := stream(t, t.Context(), demo.New(demo.Config{}), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 4 {
		t.Fatalf("%d events, want the arguments in fragments, usage and finish: %+v", len(evs), evs)
	}
	var args strings.Builder
	for i, ev := range evs[:len(evs)-2] {
		want := runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: 0, Text: ev.Text}
		if i == 0 {
			want.ID, want.Name = "call_demo_1", builtin.SaveNoteName
		}
		if diff := cmp.Diff(want, ev); diff != "" || ev.Text == "" {
			t.Errorf("event %d, want a fragment (-want +got):\n%s", i, diff)
		}
		args.WriteString(ev.Text)
	}
	if want := `{"title":"Grüße an 日本 🎉","text":"Grüße an 日本 🎉"}`; args.String() != want {
		t.Errorf("arguments = %s, want %s", args.String(), want)
	}
	usage, finish := evs[len(evs)-2], evs[len(evs)-1]
	if usage.Kind != runtime.ModelUsage || usage.Index != -1 || usage.Usage.InputTokens <= 0 || usage.Usage.OutputTokens <= 0 {
		t.Errorf("usage event = %+v", usage)
	}
	if diff := cmp.Diff(runtime.ModelEvent{Kind: runtime.ModelFinish, Index: -1, Reason: runtime.FinishToolCalls}, finish); diff != "" {
		t.Errorf("finish event (-want +got):\n%s", diff)
	}
}

func TestStreamText(t *testing.T) {
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("hello")}, Tools: allTools}
	m := demo.New(demo.Config{})
	evs, err := stream(t, t.Context(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	deltas := 0
	for _, ev := range evs {
		if ev.Index != -1 {
			t.Errorf("event %+v: index %d, want -1", ev, ev.Index)
		}
		if ev.Kind == runtime.ModelTextDelta {
			deltas++
			text.WriteString(ev.Text)
			if n := len(strings.Fields(ev.Text)); n > 3 {
				t.Errorf("delta %q has %d words, want at most 3", ev.Text, n)
			}
		}
	}
	if deltas < 10 {
		t.Errorf("%d text deltas, want the answer in small pieces", deltas)
	}
	if !strings.HasPrefix(text.String(), "Hello! I am agentd's built-in demo model") {
		t.Errorf("text = %q", text.String())
	}
	if n := len(evs); evs[n-2].Kind != runtime.ModelUsage || evs[n-1].Kind != runtime.ModelFinish || evs[n-1].Reason != runtime.FinishStop {
		t.Errorf("last events = %+v, want usage then finish stop", evs[n-2:])
	}
	// The model is deterministic.
	again, err := stream(t, t.Context(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(evs, again); diff != "" {
		t.Errorf("a second call streamed other events (-first +second):\n%s", diff)
	}
}

func TestStreamCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("hello")}}
	evs, err := stream(t, ctx, demo.New(demo.Config{}), req)
	if len(evs) != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("stream on a cancelled context = %d events, %v; want context.Canceled alone", len(evs), err)
	}
}

// TestStreamBreak checks that the model stops when the consumer does: calling yield
// again would panic.
func TestStreamBreak(t *testing.T) {
	for _, input := range []string{"hello", "save a note: a long enough note to need fragments"} {
		req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage(input)}, Tools: allTools}
		for stop := range 3 {
			n := 0
			for _, err := range demo.New(demo.Config{}).Stream(t.Context(), req) {
				if err != nil {
					t.Fatal(err)
				}
				if n == stop {
					break
				}
				n++
			}
		}
	}
}

// TestStreamDelay checks the pacing in a synctest bubble: Delay between deltas, none
// before the first, and a cancel during a pause ends the stream at once.
func TestStreamDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	req := &runtime.ModelRequest{Messages: []runtime.Message{runtime.UserMessage("what is 12*7")}, Tools: allTools}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		for ev, err := range demo.New(demo.Config{Delay: delay}).Stream(t.Context(), req) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind == runtime.ModelToolCallDelta {
				at = append(at, time.Since(start))
			}
		}
		if len(at) < 2 {
			t.Fatalf("%d deltas, want several", len(at))
		}
		for i, d := range at {
			if want := time.Duration(i) * delay; d != want {
				t.Errorf("delta %d came after %v, want %v", i, d, want)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		go func() {
			time.Sleep(delay / 2)
			cancel()
		}()
		var errs []error
		n := 0
		for _, err := range demo.New(demo.Config{Delay: time.Hour}).Stream(ctx, req) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
		if n != 1 || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			t.Errorf("got %d events and errors %v, want the first delta, then context.Canceled", n, errs)
		}
		if d := time.Since(start); d != delay/2 {
			t.Errorf("the stream ended after %v, want %v", d, delay/2)
		}
	})
}

func TestName(t *testing.T) {
	if got := demo.New(demo.Config{}).Name(); got != "demo:agentd-demo" {
		t.Errorf("Name() = %q", got)
	}
}
