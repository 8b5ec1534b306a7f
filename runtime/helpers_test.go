package runtime_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newAgent returns an agent on model with sequential ids.
func newAgent(t *testing.T, model runtime.Model, cfg runtime.Config) *runtime.Agent {
	t.Helper()
	cfg.Model = model
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.NewID == nil {
		cfg.NewID = rt.SequentialIDs()
	}
	a, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run consumes a whole run and returns its events and its RunFinished.
func run(t *testing.T, a *runtime.Agent, ctx context.Context, req *runtime.Request) ([]runtime.Event, *runtime.RunFinished) {
	t.Helper()
	if req.Messages == nil {
		req.Messages = []runtime.Message{runtime.UserMessage("hi")}
	}
	var evs []runtime.Event
	var fin *runtime.RunFinished
	for ev, err := range a.Run(ctx, req) {
		if err != nil {
			t.Fatalf("Run error: %v", err)
		}
		if fin != nil {
			t.Fatalf("event %s after run_finished", rt.RenderEvent(ev))
		}
		evs = append(evs, ev)
		if f, ok := ev.(*runtime.RunFinished); ok {
			fin = f
		}
	}
	checkEventRules(t, evs)
	if fin == nil {
		t.Fatalf("no run_finished; events:\n%s", rt.Render(evs))
	}
	return evs, fin
}

// checkEventRules checks the invariants every run's events obey: run_started first,
// run_finished last, and no event for a tool call or block after its terminal event.
func checkEventRules(t *testing.T, evs []runtime.Event) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	if _, ok := evs[0].(*runtime.RunStarted); !ok {
		t.Errorf("first event is %T, want *RunStarted", evs[0])
	}
	if _, ok := evs[len(evs)-1].(*runtime.RunFinished); !ok {
		t.Errorf("last event is %T, want *RunFinished", evs[len(evs)-1])
	}
	ended := map[string]bool{}
	defer func() {
		// Every call the model made ends with a result or a cancel, unless the run parked.
		fin, _ := evs[len(evs)-1].(*runtime.RunFinished)
		if fin == nil || fin.Reason == runtime.EndAwaitingInput || fin.Reason == runtime.EndShutdown {
			return
		}
		for _, ev := range evs {
			if s, ok := ev.(*runtime.ToolCallStarted); ok && !ended[s.CallID] {
				t.Errorf("call %s never got a result or a cancel", s.CallID)
			}
		}
	}()
	see := func(id string, ev runtime.Event) {
		if ended[id] {
			t.Errorf("event after the end of %s: %s", id, rt.RenderEvent(ev))
		}
	}
	for _, ev := range evs {
		switch e := ev.(type) {
		case *runtime.TextDelta:
			see(e.MessageID, ev)
		case *runtime.ReasoningDelta:
			see(e.MessageID, ev)
		case *runtime.MessageFinished:
			see(e.MessageID, ev)
			ended[e.MessageID] = true
		case *runtime.ToolCallArgsDelta:
			see(e.CallID, ev)
		case *runtime.ToolCallArgsDone:
			see(e.CallID, ev)
		case *runtime.ToolExecutionStarted:
			see(e.CallID, ev)
		case *runtime.ToolCallResult:
			see(e.Result.CallID, ev)
			ended[e.Result.CallID] = true
		case *runtime.ToolCallsCancelled:
			for _, id := range e.CallIDs {
				see(id, ev)
				ended[id] = true
			}
		}
	}
}

// golden compares got with testdata/<TestName>.golden, rewriting it with -update.
func golden(t *testing.T, got string) {
	t.Helper()
	path := filepath.Join("testdata", strings.ReplaceAll(t.Name(), "/", "__")+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("events differ from %s (-want +got):\n%s", path, diff)
	}
}

// eventsOf returns the events of type T.
func eventsOf[T runtime.Event](evs []runtime.Event) []T {
	var out []T
	for _, ev := range evs {
		if e, ok := ev.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

// recorder is a tool that records the arguments of its calls.
type recorder struct {
	calls chan string
}

func newRecorder() *recorder { return &recorder{calls: make(chan string, 100)} }

func (r *recorder) tool(name string) runtime.Tool {
	return rt.Tool(name, func(_ context.Context, c runtime.ToolCall) (runtime.Output, error) {
		r.calls <- c.Arguments
		return runtime.Output{Text: "ok " + c.Arguments}, nil
	})
}

func (r *recorder) got() []string {
	var out []string
	for {
		select {
		case s := <-r.calls:
			out = append(out, s)
		default:
			return out
		}
	}
}

// schemaTool returns a tool with a real schema: {"a": integer, required, no other keys}.
func schemaTool(name string, fn runtime.ToolFunc) runtime.Tool {
	return runtime.NewTool(runtime.ToolSpec{
		Name:       name,
		Parameters: []byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`),
	}, fn)
}
