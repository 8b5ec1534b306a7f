package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/runtime"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// specFigures are the figures workload.json states, copied by hand so that a parsing
// mistake cannot agree with itself.
var specFigures = []struct {
	name               string
	S, R, T, A         int
	deltas             int
	in, out, reasoning int64
}{
	{"small", 3, 10, 50, 10, 260, 4600, 260, 30},
	{"medium", 10, 40, 200, 20, 2800, 16500, 2800, 400},
	{"large", 50, 100, 500, 50, 33000, 178500, 33000, 5000},
}

func TestWorkloadSizes(t *testing.T) {
	if _, err := loadWorkloadSpec(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sz := range Sizes() {
		names = append(names, sz.Name)
	}
	if got, want := strings.Join(names, ","), "small,medium,large"; got != want {
		t.Errorf("Sizes() = %s, want %s", got, want)
	}
	for _, f := range specFigures {
		sz, err := Lookup(f.name)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Size{f.name, f.S, f.R, f.T, f.A}); sz != want {
			t.Errorf("Lookup(%q) = %+v, want %+v", f.name, sz, want)
		}
		if sz.Deltas() != f.deltas {
			t.Errorf("%s: Deltas() = %d, want %d", f.name, sz.Deltas(), f.deltas)
		}
		want := runtime.Usage{InputTokens: f.in, OutputTokens: f.out, ReasoningTokens: f.reasoning, ModelCalls: int64(f.S + 1), ToolCalls: int64(f.S)}
		if got := sz.Totals(); got != want {
			t.Errorf("%s: Totals() = %+v, want %+v", f.name, got, want)
		}
	}
	if _, err := Lookup("huge"); err == nil {
		t.Error(`Lookup("huge") succeeded, want an error`)
	}
	if got, want := Request().Messages[0].Text(), "Run the scripted workload."; got != want {
		t.Errorf("user message %q, want %q", got, want)
	}
	if got, want := Config(Size{Name: "x"}).System, "You are a scripted benchmark agent."; got != want {
		t.Errorf("system prompt %q, want %q", got, want)
	}
}

// wantArgs builds tool step i's arguments the way a peer would: encoding/json on a
// struct whose fields are in the spec's key order.
func wantArgs(i, a int) string {
	var p []byte
	for k := range 4 * a {
		p = append(p, byte('a'+k%26))
	}
	var v any = struct {
		Step int    `json:"step"`
		Text string `json:"text"`
	}{i, string(p)}
	if i%2 == 1 {
		v = struct {
			Step int    `json:"step"`
			A    int    `json:"a"`
			B    int    `json:"b"`
			Note string `json:"note"`
		}{i, i, 1000 + i, string(p)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// wantDeltas is the concatenation of n deltas with the given prefix.
func wantDeltas(prefix string, n int) string {
	var b strings.Builder
	for j := range n {
		fmt.Fprintf(&b, "%s%03d ", prefix, j%1000)
	}
	return b.String()
}

func TestWorkloadRun(t *testing.T) {
	spec, err := loadWorkloadSpec()
	if err != nil {
		t.Fatal(err)
	}
	for _, sz := range Sizes() {
		t.Run(sz.Name, func(t *testing.T) {
			agent, err := runtime.New(runtime.Config{
				Model:    New(sz),
				Tools:    Tools(),
				System:   spec.Input.System,
				MaxSteps: sz.S + 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			var (
				text, reasoning, argDeltas int
				texts, reasonings          strings.Builder
				args                       = map[string]*strings.Builder{}
				fragments                  = map[string][]string{}
				started, executed, results []string
				steps                      int
				fin                        *runtime.RunFinished
				want                       = sz.Totals()
				stepUsage                  runtime.Usage
			)
			req := &runtime.Request{Messages: []runtime.Message{runtime.UserMessage(spec.Input.User)}}
			for ev, err := range agent.Run(t.Context(), req) {
				if err != nil {
					t.Fatal(err)
				}
				switch e := ev.(type) {
				case *runtime.TextDelta:
					text++
					texts.WriteString(e.Delta)
				case *runtime.ReasoningDelta:
					reasoning++
					reasonings.WriteString(e.Delta)
				case *runtime.ToolCallStarted:
					started = append(started, e.Name+" "+e.CallID)
					args[e.CallID] = &strings.Builder{}
				case *runtime.ToolCallArgsDelta:
					argDeltas++
					args[e.CallID].WriteString(e.Delta)
					fragments[e.CallID] = append(fragments[e.CallID], e.Delta)
				case *runtime.ToolCallArgsDone:
					if got := args[e.CallID].String(); got != e.Arguments {
						t.Errorf("%s: deltas join to %s, ToolCallArgsDone says %s", e.CallID, got, e.Arguments)
					}
				case *runtime.ToolExecutionStarted:
					executed = append(executed, e.Name+" "+e.CallID+" "+e.Arguments)
				case *runtime.ToolCallResult:
					results = append(results, e.Result.CallID+" "+e.Result.Output.String())
				case *runtime.StepFinished:
					// Usage is cumulative: a snapshot of the run so far.
					i := steps
					stepUsage.InputTokens += int64(1000 + 100*i)
					stepUsage.ModelCalls++
					if i < sz.S {
						stepUsage.OutputTokens += int64(sz.R + sz.T + sz.A)
						stepUsage.ReasoningTokens += int64(sz.R)
						stepUsage.ToolCalls++
					} else {
						stepUsage.OutputTokens += int64(sz.T)
					}
					if e.Usage != stepUsage {
						t.Errorf("step %d: usage %+v, want %+v", i, e.Usage, stepUsage)
					}
					steps++
				case *runtime.RunFinished:
					fin = e
				}
			}
			if fin == nil {
				t.Fatal("no RunFinished")
			}
			if fin.Reason != runtime.EndCompleted {
				t.Fatalf("run ended %s: %v", fin.Reason, fin.Err)
			}

			if got := text + reasoning + argDeltas; got != sz.Deltas() {
				t.Errorf("%d deltas (%d text, %d reasoning, %d arguments), want deltas_per_run %d", got, text, reasoning, argDeltas, sz.Deltas())
			}
			if text != (sz.S+1)*sz.T || reasoning != sz.S*sz.R || argDeltas != sz.S*sz.A {
				t.Errorf("%d text, %d reasoning, %d argument deltas, want %d, %d, %d", text, reasoning, argDeltas, (sz.S+1)*sz.T, sz.S*sz.R, sz.S*sz.A)
			}
			if got, want := texts.String(), strings.Repeat(wantDeltas("t", sz.T), sz.S+1); got != want {
				t.Errorf("text deltas join to %q, want %q", got, want)
			}
			if got, want := reasonings.String(), strings.Repeat(wantDeltas("r", sz.R), sz.S); got != want {
				t.Errorf("reasoning deltas join to %q, want %q", got, want)
			}
			if steps != sz.S+1 || fin.Usage.ModelCalls != int64(sz.S+1) {
				t.Errorf("%d steps, %d model calls, want %d", steps, fin.Usage.ModelCalls, sz.S+1)
			}
			if len(started) != sz.S || len(executed) != sz.S || len(results) != sz.S {
				t.Fatalf("%d calls started, %d executed, %d results, want %d each", len(started), len(executed), len(results), sz.S)
			}
			for i := range sz.S {
				id, name := fmt.Sprint("call_", i), "echo"
				if i%2 == 1 {
					name = "add"
				}
				wantArgs := wantArgs(i, sz.A)
				if got, want := started[i], name+" "+id; got != want {
					t.Errorf("call %d started as %s, want %s", i, got, want)
				}
				if got := args[id].String(); got != wantArgs {
					t.Errorf("%s: argument deltas join to %s, want %s", id, got, wantArgs)
				}
				fs := fragments[id]
				if len(fs) != sz.A {
					t.Errorf("%s: %d argument fragments, want %d", id, len(fs), sz.A)
				}
				for k, f := range fs {
					n := len(wantArgs)
					if want := wantArgs[k*n/sz.A : (k+1)*n/sz.A]; f != want {
						t.Errorf("%s: fragment %d is %q, want %q", id, k, f, want)
					}
				}
				if got, want := executed[i], name+" "+id+" "+wantArgs; got != want {
					t.Errorf("execution %d: %s, want %s", i, got, want)
				}
				wantResult := fmt.Sprintf(`{"sum":%d}`, 1000+2*i)
				if i%2 == 0 {
					var p struct{ Text string }
					if err := json.Unmarshal([]byte(wantArgs), &p); err != nil {
						t.Fatal(err)
					}
					wantResult = `{"text":"` + p.Text + `"}`
				}
				if got, want := results[i], id+" "+wantResult; got != want {
					t.Errorf("result %d: %s, want %s", i, got, want)
				}
			}
			if got, want := fin.FinalText, wantDeltas("t", sz.T); got != want {
				t.Errorf("final text %q, want %q", got, want)
			}
			if fin.Usage != want {
				t.Errorf("usage %+v, want %+v", fin.Usage, want)
			}
			totals := spec.Usage.ExpectedTotals[sz.Name]
			if fin.Usage.InputTokens != totals.InputTokens || fin.Usage.OutputTokens != totals.OutputTokens || fin.Usage.ReasoningTokens != totals.ReasoningTokens {
				t.Errorf("usage %+v, want expected_totals %+v", fin.Usage, totals)
			}
			if err := Check(sz, fin); err != nil {
				t.Error(err)
			}
		})
	}
}

// historyOf returns a transcript holding n tool results of the workload.
func historyOf(sz Size, n int) []runtime.Message {
	msgs := []runtime.Message{runtime.UserMessage("Run the scripted workload.")}
	for i := range n {
		id := fmt.Sprint("call_", i)
		name := workloadTool(i)
		msgs = append(msgs,
			runtime.Message{Role: runtime.RoleAssistant, Parts: []runtime.Part{{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: id, Name: name, Arguments: wantArgs(i, sz.A)}}}},
			runtime.Message{Role: runtime.RoleTool, Parts: []runtime.Part{{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{CallID: id, Name: name, Output: runtime.Output{JSON: []byte(workloadResult(i, sz.A))}}}}},
		)
	}
	return msgs
}

func TestWorkloadModelSteps(t *testing.T) {
	sz, err := Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	m := New(sz)
	if got, want := m.Name(), "workload:small"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	for i := range sz.S + 1 {
		var evs []runtime.ModelEvent
		for ev, err := range m.Stream(t.Context(), &runtime.ModelRequest{Messages: historyOf(sz, i)}) {
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			evs = append(evs, ev)
		}
		var want []runtime.ModelEvent
		if i < sz.S {
			for j := range sz.R {
				want = append(want, runtime.ModelEvent{Kind: runtime.ModelReasoningDelta, Text: fmt.Sprintf("r%03d ", j), Index: -1})
			}
		}
		for j := range sz.T {
			want = append(want, runtime.ModelEvent{Kind: runtime.ModelTextDelta, Text: fmt.Sprintf("t%03d ", j), Index: -1})
		}
		usage := runtime.Usage{InputTokens: int64(1000 + 100*i), OutputTokens: int64(sz.T)}
		reason := runtime.FinishStop
		if i < sz.S {
			args := wantArgs(i, sz.A)
			for k := range sz.A {
				ev := runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Text: args[k*len(args)/sz.A : (k+1)*len(args)/sz.A]}
				if k == 0 {
					ev.ID, ev.Name = fmt.Sprint("call_", i), workloadTool(i)
				}
				want = append(want, ev)
			}
			usage = runtime.Usage{InputTokens: int64(1000 + 100*i), OutputTokens: int64(sz.R + sz.T + sz.A), ReasoningTokens: int64(sz.R)}
			reason = runtime.FinishToolCalls
		}
		want = append(want,
			runtime.ModelEvent{Kind: runtime.ModelUsage, Usage: usage, Index: -1},
			runtime.ModelEvent{Kind: runtime.ModelFinish, Reason: reason, Index: -1})
		if len(evs) != len(want) {
			t.Fatalf("step %d: %d events, want %d", i, len(evs), len(want))
		}
		for k := range want {
			g, w := evs[k], want[k]
			if g.Kind != w.Kind || g.Text != w.Text || g.Index != w.Index || g.ID != w.ID || g.Name != w.Name || g.Usage != w.Usage || g.Reason != w.Reason || g.State != nil {
				t.Errorf("step %d, event %d: %+v, want %+v", i, k, g, w)
			}
		}
	}
}

func TestWorkloadModelTooManyToolResults(t *testing.T) {
	sz, err := Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	history := historyOf(sz, sz.S+1)

	n := 0
	for _, err := range New(sz).Stream(t.Context(), &runtime.ModelRequest{Messages: history}) {
		n++
		if !errors.Is(err, ErrTooManyToolResults) {
			t.Errorf("Stream with %d tool results yielded %v, want an error wrapping ErrTooManyToolResults", sz.S+1, err)
		}
	}
	if n != 1 {
		t.Errorf("Stream yielded %d times, want once", n)
	}

	agent, err := runtime.New(Config(sz))
	if err != nil {
		t.Fatal(err)
	}
	var fin *runtime.RunFinished
	for ev, err := range agent.Run(t.Context(), &runtime.Request{Messages: history}) {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := ev.(*runtime.RunFinished); ok {
			fin = e
		}
	}
	if fin == nil || fin.Reason != runtime.EndFailed || !errors.Is(fin.Err, ErrTooManyToolResults) {
		t.Errorf("run over a transcript with %d tool results finished with %+v, want failed with ErrTooManyToolResults", sz.S+1, fin)
	}
}

func TestWorkloadModelStops(t *testing.T) {
	sz, err := Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	m := New(sz)
	req := &runtime.ModelRequest{Messages: historyOf(sz, 0)}

	// Breaking out must stop the stream: the range loop panics if it yields again.
	n := 0
	for range m.Stream(t.Context(), req) {
		n++
		if n == 3 {
			break
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n = 0
	for ev, err := range m.Stream(ctx, req) {
		n++
		if n <= 2 {
			if err != nil || ev.Kind != runtime.ModelReasoningDelta {
				t.Fatalf("event %d: %+v, %v", n, ev, err)
			}
			if n == 2 {
				cancel()
			}
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after the cancel: %+v, %v, want context.Canceled", ev, err)
		}
	}
	if n != 3 {
		t.Errorf("the stream yielded %d times, want 3 (two deltas, then the context's error)", n)
	}
}

func TestWorkloadModelAllocs(t *testing.T) {
	sz, err := Lookup("large")
	if err != nil {
		t.Fatal(err)
	}
	m := New(sz)
	req := &runtime.ModelRequest{Messages: historyOf(sz, 1)}
	ctx := t.Context()
	allocs := testing.AllocsPerRun(10, func() {
		for _, err := range m.Stream(ctx, req) {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	// At most the stream's closure is allocated; no event is.
	if allocs > 2 {
		t.Errorf("a step of %d deltas allocated %v times, want at most 2", sz.R+sz.T+sz.A, allocs)
	}
}

func TestCheckWorkloadRun(t *testing.T) {
	sz, err := Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := runtime.New(Config(sz))
	if err != nil {
		t.Fatal(err)
	}
	var good *runtime.RunFinished
	for ev, err := range agent.Run(t.Context(), Request()) {
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := ev.(*runtime.RunFinished); ok {
			good = e
		}
	}
	if err := Check(sz, good); err != nil {
		t.Fatal(err)
	}

	// withMessage returns a copy of good whose message i is changed by edit.
	withMessage := func(i int, edit func(*runtime.Message)) *runtime.RunFinished {
		fin := *good
		fin.NewMessages = append([]runtime.Message(nil), good.NewMessages...)
		m := fin.NewMessages[i]
		m.Parts = append([]runtime.Part(nil), m.Parts...)
		edit(&m)
		fin.NewMessages[i] = m
		return &fin
	}
	lastPart := func(m *runtime.Message) *runtime.Part { return &m.Parts[len(m.Parts)-1] }
	for name, fin := range map[string]*runtime.RunFinished{
		"nil":       nil,
		"failed":    func() *runtime.RunFinished { f := *good; f.Reason = runtime.EndFailed; return &f }(),
		"usage":     func() *runtime.RunFinished { f := *good; f.Usage.InputTokens++; return &f }(),
		"tool runs": func() *runtime.RunFinished { f := *good; f.Usage.ToolCalls--; return &f }(),
		"final":     func() *runtime.RunFinished { f := *good; f.FinalText += "x"; return &f }(),
		"short":     func() *runtime.RunFinished { f := *good; f.NewMessages = f.NewMessages[2:]; return &f }(),
		"arguments": withMessage(2, func(m *runtime.Message) { lastPart(m).ToolCall.Arguments = `{"step":1,"a":1,"b":1002,"note":"x"}` }),
		"call id":   withMessage(0, func(m *runtime.Message) { lastPart(m).ToolCall.ID = "call_1" }),
		"result":    withMessage(3, func(m *runtime.Message) { lastPart(m).ToolResult.Output = runtime.Output{JSON: []byte(`{"sum":1}`)} }),
		"reasoning": withMessage(4, func(m *runtime.Message) { m.Parts = m.Parts[1:] }),
		"text":      withMessage(6, func(m *runtime.Message) { m.Parts[0].Text = "t000 " }),
	} {
		if err := Check(sz, fin); err == nil {
			t.Errorf("%s: Check accepted a broken run", name)
		}
	}
	// Arguments are compared as parsed JSON, not as bytes.
	spaced := withMessage(0, func(m *runtime.Message) {
		lastPart(m).ToolCall.Arguments = strings.Replace(lastPart(m).ToolCall.Arguments, ",", ", ", 1)
	})
	if err := Check(sz, spaced); err != nil {
		t.Errorf("arguments with a space: %v", err)
	}
}

// A paced model streams the same deltas, at its pace: n deltas take (n-1) paces, and
// its name says the pace.
func TestWithPace(t *testing.T) {
	size, err := Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	full := New(size)
	paced := full.WithPace(1000)
	if paced.Name() != "workload:small@1000" || full.WithPace(0).Name() != "workload:small" {
		t.Errorf("names %q and %q, want workload:small@1000 and workload:small", paced.Name(), full.WithPace(0).Name())
	}
	req := &runtime.ModelRequest{Messages: Request().Messages}
	var want, got []string
	for ev, err := range full.Stream(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.Text)
	}
	begin := time.Now()
	deltas := 0
	for ev, err := range paced.Stream(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Text)
		if ev.Text != "" {
			deltas++
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the paced model streamed other deltas than the model at full speed")
	}
	// A timer never fires early: the pace is a floor, whatever the machine's load.
	if took, floor := time.Since(begin), time.Duration(deltas-1)*time.Millisecond; took < floor {
		t.Errorf("%d deltas took %v at 1000 a second, want at least %v", deltas, took, floor)
	}
}
