package providertest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// Recording is a recorded stream, under the adapter's testdata, and the events the
// adapter makes of it, less the report of the served model, which [TestServedModel]
// checks.
type Recording struct {
	File   string
	Events []runtime.ModelEvent
}

// TestStream streams each recording from a server, in one call, and compares the
// events.
func TestStream(t *testing.T, a Adapter, recordings []Recording) {
	for _, tc := range recordings {
		t.Run(testName(tc.File), func(t *testing.T) {
			m, srv, _ := a.model(t, Config{}, sse(tc.File))
			got, err := ssetest.Collect(t, t.Context(), m, Hello)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.Events, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// Assembly is a recorded stream, under the adapter's testdata, and the assistant
// message the runtime assembles from the adapter's events: its text, its reasoning,
// and its tool calls.
type Assembly struct {
	File            string
	Text, Reasoning string
	Calls           []Call
}

// Call is an assembled tool call.
type Call struct{ ID, Name, Args string }

// TestAssemble runs one step of an agent on each assembly's stream, with tools of the
// calls' names, and checks that the runtime joins the adapter's fragments into the
// message the server meant, whatever its way of numbering tool calls, and that no
// delta event carries a broken character, however the server split one.
func TestAssemble(t *testing.T, a Adapter, assemblies []Assembly) {
	for _, tc := range assemblies {
		t.Run(testName(tc.File), func(t *testing.T) {
			var tools []string
			for _, c := range tc.Calls {
				tools = append(tools, c.Name)
			}
			slices.Sort(tools)
			m, _, _ := a.model(t, Config{}, sse(tc.File))
			msg, evs := Assemble(t, m, slices.Compact(tools)...)
			got := Assembly{File: tc.File, Text: msg.Text()}
			var reasoning strings.Builder
			for _, p := range msg.Parts {
				if p.Kind == runtime.PartReasoning {
					reasoning.WriteString(p.Text)
				}
			}
			got.Reasoning = reasoning.String()
			for _, c := range msg.ToolCalls() {
				got.Calls = append(got.Calls, Call{c.ID, c.Name, c.Arguments})
			}
			if diff := cmp.Diff(tc, got); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			for _, ev := range evs {
				var delta string
				switch ev := ev.(type) {
				case *runtime.TextDelta:
					delta = ev.Delta
				case *runtime.ReasoningDelta:
					delta = ev.Delta
				case *runtime.ToolCallArgsDelta:
					delta = ev.Delta
				}
				if !utf8.ValidString(delta) {
					t.Errorf("event %s carries a broken character", rt.RenderEvent(ev))
				}
			}
		})
	}
}

// Assemble runs one step of an agent on m, with tools that answer "ok", and returns
// the assistant message the runtime assembled and the run's events.
func Assemble(t *testing.T, m runtime.Model, tools ...string) (runtime.Message, []runtime.Event) {
	t.Helper()
	var ts []runtime.Tool
	for _, name := range tools {
		ts = append(ts, rt.Tool(name, func(context.Context, runtime.ToolCall) (runtime.Output, error) {
			return runtime.Output{Text: "ok"}, nil
		}))
	}
	a, err := runtime.New(runtime.Config{Model: m, Tools: ts, MaxSteps: 1, NewID: rt.SequentialIDs()})
	if err != nil {
		t.Fatal(err)
	}
	var evs []runtime.Event
	for ev, err := range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("Weather?")}}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if fin, ok := ev.(*runtime.RunFinished); ok {
			for _, msg := range fin.NewMessages {
				if msg.Role == runtime.RoleAssistant {
					return msg, evs
				}
			}
			t.Fatalf("no assistant message; run finished %v: %v", fin.Reason, fin.Err)
		}
	}
	t.Fatal("no run_finished")
	return runtime.Message{}, nil
}
