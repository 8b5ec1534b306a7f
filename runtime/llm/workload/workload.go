// Package workload replays agentd's benchmark workload ("scripted-tool-loop") as a model
// agentd can serve (--model workload:medium), so anyone can load-test a deployment, and
// compare it with other systems, with no provider behind it. Every stream is
// byte-identical to what any other implementation of the workload replays.
//
// [New] returns the model for a [Size]; [Tools] returns its echo and add tools; [Check]
// verifies a finished run against the workload's checks.
package workload

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/runtime"
)

// The benchmark workload's definition, copied into testdata so that nothing reads outside
// the module at build or run time.
//
//go:embed testdata/workload.json
var workloadJSON []byte

// ErrTooManyToolResults is wrapped by the error a Model yields for a request holding more
// tool results than the workload has tool steps.
var ErrTooManyToolResults = errors.New("workload: more tool results than tool steps")

// Size is one size of the benchmark workload: S tool steps and one final step,
// with R reasoning deltas, T text deltas and A tool-argument fragments per tool step (the
// final step has T text deltas only).
type Size struct {
	Name       string
	S, R, T, A int
}

// Deltas returns the number of deltas of one run: S*(R+T+A) + T (the spec's
// deltas_per_run).
func (s Size) Deltas() int { return s.S*(s.R+s.T+s.A) + s.T }

// Totals returns the cumulative usage of one complete run: the spec's run totals, plus
// S+1 model calls and S tool calls.
func (s Size) Totals() runtime.Usage {
	return runtime.Usage{
		InputTokens:     int64(1000*(s.S+1) + 100*s.S*(s.S+1)/2),
		OutputTokens:    int64(s.Deltas()),
		ReasoningTokens: int64(s.S * s.R),
		ModelCalls:      int64(s.S + 1),
		ToolCalls:       int64(s.S),
	}
}

// workloadSpec is the part of workload.json the replay reads.
type workloadSpec struct {
	Sizes map[string]struct{ S, R, T, A int } `json:"sizes"`
	Input struct {
		System string `json:"system"`
		User   string `json:"user"`
		Tools  []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
	} `json:"input"`
	Usage struct {
		ExpectedTotals map[string]struct {
			InputTokens     int64 `json:"input_tokens"`
			OutputTokens    int64 `json:"output_tokens"`
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"expected_totals"`
	} `json:"usage"`
	// DeltasPerRun holds the formula, as a string, next to the counts by size.
	DeltasPerRun map[string]json.RawMessage `json:"deltas_per_run"`

	sizes []Size // ordered by the number of deltas
	tools map[string]runtime.ToolSpec
}

// loadWorkloadSpec parses the embedded spec once and checks that the figures it states
// agree with its formulas, so that a run checked against the formulas is checked against
// the file.
var loadWorkloadSpec = sync.OnceValues(func() (*workloadSpec, error) {
	var spec workloadSpec
	if err := json.Unmarshal(workloadJSON, &spec); err != nil {
		return nil, fmt.Errorf("workload: spec: %w", err)
	}
	if len(spec.Sizes) == 0 {
		return nil, errors.New("workload: spec: no sizes")
	}
	for name, v := range spec.Sizes {
		sz := Size{Name: name, S: v.S, R: v.R, T: v.T, A: v.A}
		if sz.S < 1 || sz.R < 1 || sz.T < 1 || sz.A < 1 {
			return nil, fmt.Errorf("workload: spec: size %s: S, R, T and A must be positive", name)
		}
		var n int
		if err := json.Unmarshal(spec.DeltasPerRun[name], &n); err != nil {
			return nil, fmt.Errorf("workload: spec: deltas_per_run.%s: %w", name, err)
		}
		if n != sz.Deltas() {
			return nil, fmt.Errorf("workload: spec: deltas_per_run.%s is %d, the formula gives %d", name, n, sz.Deltas())
		}
		want, ok := spec.Usage.ExpectedTotals[name]
		got := sz.Totals()
		if !ok || want.InputTokens != got.InputTokens || want.OutputTokens != got.OutputTokens || want.ReasoningTokens != got.ReasoningTokens {
			return nil, fmt.Errorf("workload: spec: usage.expected_totals.%s is %+v, the formulas give %+v", name, want, got)
		}
		spec.sizes = append(spec.sizes, sz)
	}
	slices.SortFunc(spec.sizes, func(a, b Size) int {
		return cmp.Or(cmp.Compare(a.Deltas(), b.Deltas()), strings.Compare(a.Name, b.Name))
	})
	spec.tools = map[string]runtime.ToolSpec{}
	for _, t := range spec.Input.Tools {
		var params bytes.Buffer
		if err := json.Compact(&params, t.Parameters); err != nil {
			return nil, fmt.Errorf("workload: spec: tool %s: %w", t.Name, err)
		}
		spec.tools[t.Name] = runtime.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params.Bytes()}
	}
	for _, name := range []string{"echo", "add"} {
		if _, ok := spec.tools[name]; !ok {
			return nil, fmt.Errorf("workload: spec: no tool %q", name)
		}
	}
	return &spec, nil
})

// mustWorkloadSpec returns the parsed spec. The spec is embedded, and this package's
// tests parse it, so a failure is a broken build.
func mustWorkloadSpec() *workloadSpec {
	spec, err := loadWorkloadSpec()
	if err != nil {
		panic(err)
	}
	return spec
}

// Workload returns the named size of the benchmark workload ("small", "medium", "large"),
// as the embedded spec defines it.
func Lookup(name string) (Size, error) {
	spec, err := loadWorkloadSpec()
	if err != nil {
		return Size{}, err
	}
	for _, sz := range spec.sizes {
		if sz.Name == name {
			return sz, nil
		}
	}
	return Size{}, fmt.Errorf("workload: no workload size %q", name)
}

// Sizes returns every size of the benchmark workload, smallest first.
func Sizes() []Size {
	return slices.Clone(mustWorkloadSpec().sizes)
}

// Config returns an agent configuration that replays size: the
// [Model], [Tools], the spec's system prompt, and a step limit that
// lets the run finish. Callers may set the other fields before calling runtime.New.
func Config(size Size) runtime.Config {
	return runtime.Config{
		Name:     "workload",
		Model:    New(size),
		System:   mustWorkloadSpec().Input.System,
		Tools:    Tools(),
		MaxSteps: size.S + 1,
	}
}

// Request returns the request that starts a workload run: the spec's user
// message and nothing else. Each call returns a new Request.
func Request() *runtime.Request {
	return &runtime.Request{Messages: []runtime.Message{runtime.UserMessage(mustWorkloadSpec().Input.User)}}
}

// Tools returns the workload's tools, "echo" and "add", with the spec's
// descriptions and JSON Schemas. Both answer at once with a JSON output: echo with
// {"text":<text>}, add with {"sum":<a+b>}. They keep no state and are safe for concurrent
// use, but are not marked Parallel, so a run executes them one after another.
func Tools() []runtime.Tool {
	spec := mustWorkloadSpec()
	echo := runtime.NewTool(spec.tools["echo"], func(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(call.Arguments), &in); err != nil {
			return runtime.Output{}, err
		}
		out, err := json.Marshal(struct {
			Text string `json:"text"`
		}{in.Text})
		return runtime.Output{JSON: out}, err
	})
	add := runtime.NewTool(spec.tools["add"], func(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
		var in struct {
			A int64 `json:"a"`
			B int64 `json:"b"`
		}
		if err := json.Unmarshal([]byte(call.Arguments), &in); err != nil {
			return runtime.Output{}, err
		}
		out, err := json.Marshal(struct {
			Sum int64 `json:"sum"`
		}{in.A + in.B})
		return runtime.Output{JSON: out}, err
	})
	return []runtime.Tool{echo, add}
}

// workloadPayload returns P: the first 4*A characters of the alphabet repeated.
func workloadPayload(a int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz"
	n := 4 * a
	return strings.Repeat(alphabet, n/len(alphabet)+1)[:n]
}

// workloadTool returns the tool that tool step i calls.
func workloadTool(i int) string {
	if i%2 == 0 {
		return "echo"
	}
	return "add"
}

// workloadArgs returns the exact arguments of tool step i's call, compact JSON with the
// keys in the spec's order.
func workloadArgs(i, a int) string {
	p, step := workloadPayload(a), strconv.Itoa(i)
	if i%2 == 0 {
		return `{"step":` + step + `,"text":"` + p + `"}`
	}
	return `{"step":` + step + `,"a":` + step + `,"b":` + strconv.Itoa(1000+i) + `,"note":"` + p + `"}`
}

// workloadResult returns the JSON result of tool step i's call.
func workloadResult(i, a int) string {
	if i%2 == 0 {
		return `{"text":"` + workloadPayload(a) + `"}`
	}
	return `{"sum":` + strconv.Itoa(1000+2*i) + `}`
}

// workloadDeltas returns n deltas prefix+zeroPad3(j mod 1000)+' ' as substrings of their
// concatenation, which it returns too.
func workloadDeltas(prefix byte, n int) ([]string, string) {
	b := make([]byte, 0, 5*n)
	for j := range n {
		b = append(b, prefix, byte('0'+j%1000/100), byte('0'+j%100/10), byte('0'+j%10), ' ')
	}
	all := string(b)
	ds := make([]string, n)
	for j := range ds {
		ds[j] = all[5*j : 5*j+5]
	}
	return ds, all
}

// workloadFragments splits s into a fragments: fragment k is s[k*n/a : (k+1)*n/a].
func workloadFragments(s string, a int) []string {
	n := len(s)
	fs := make([]string, a)
	for k := range fs {
		fs[k] = s[k*n/a : (k+1)*n/a]
	}
	return fs
}

// Model is a runtime.Model that replays the benchmark workload. It is stateless:
// the step it streams is the number of tool results in the request, so one model serves
// any number of runs, resumed or replayed ones included. Every string it streams is built
// by [New], so streaming allocates nothing per delta. It is safe for
// concurrent use.
type Model struct {
	size      Size
	name      string
	pace      time.Duration // between deltas (WithPace); 0 streams at full speed
	reasoning []string      // a tool step's reasoning deltas
	text      []string      // every step's text deltas
	calls     []workloadCall
}

// workloadCall is the tool call of one tool step.
type workloadCall struct {
	id, name  string
	fragments []string
}

// New returns the model of size, named "workload:<size.Name>". It panics if
// a count is negative or a run with tool steps has A < 1.
func New(size Size) *Model {
	if size.S < 0 || size.R < 0 || size.T < 0 || size.A < 0 || (size.S > 0 && size.A < 1) {
		panic(fmt.Sprintf("workload: invalid workload size %+v", size))
	}
	m := &Model{size: size, name: "workload:" + size.Name}
	m.reasoning, _ = workloadDeltas('r', size.R)
	m.text, _ = workloadDeltas('t', size.T)
	m.calls = make([]workloadCall, size.S)
	for i := range m.calls {
		m.calls[i] = workloadCall{
			id:        "call_" + strconv.Itoa(i),
			name:      workloadTool(i),
			fragments: workloadFragments(workloadArgs(i, size.A), size.A),
		}
	}
	return m
}

// WithPace returns a model that replays the same workload at perSecond deltas a second
// in each run, as a provider streams tokens, named "workload:<size>@<perSecond>"; 0
// is full speed, as New's. A paced run starts its first delta at once and keeps to its
// schedule (a delta late by load does not push the next ones back). It panics if
// perSecond is negative.
func (m *Model) WithPace(perSecond int) *Model {
	if perSecond < 0 {
		panic(fmt.Sprintf("workload: negative pace %d", perSecond))
	}
	p := *m
	p.name, p.pace = "workload:"+m.size.Name, 0
	if perSecond > 0 {
		p.name += "@" + strconv.Itoa(perSecond)
		p.pace = time.Second / time.Duration(perSecond)
	}
	return &p
}

// Name returns "workload:" and the size's name, and "@" and the pace of a paced model.
func (m *Model) Name() string { return m.name }

// Size returns the size the model replays.
func (m *Model) Size() Size { return m.size }

// Stream replays step i, where i is the number of tool results in req. A request with
// more than S tool results yields an error that wraps [ErrTooManyToolResults]. The stream ends
// with the context's error once ctx is done.
func (m *Model) Stream(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	i := 0
	for _, msg := range req.Messages {
		for _, p := range msg.Parts {
			if p.Kind == runtime.PartToolResult {
				i++
			}
		}
	}
	return func(yield func(runtime.ModelEvent, error) bool) {
		if i > m.size.S {
			yield(runtime.ModelEvent{}, fmt.Errorf("%w: workload %s has %d tool steps, the request holds %d tool results", ErrTooManyToolResults, m.size.Name, m.size.S, i))
			return
		}
		var next time.Time // when a paced model streams its next delta
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		send := func(ev runtime.ModelEvent) bool {
			if m.pace > 0 && ev.Text != "" {
				if next.IsZero() {
					next = time.Now()
				} else if wait := time.Until(next); wait > 0 {
					if timer == nil {
						timer = time.NewTimer(wait)
					} else {
						timer.Reset(wait)
					}
					select {
					case <-timer.C:
					case <-ctx.Done():
					}
				}
				next = next.Add(m.pace)
			}
			if err := ctx.Err(); err != nil {
				yield(runtime.ModelEvent{}, err)
				return false
			}
			return yield(ev, nil)
		}
		usage := runtime.Usage{InputTokens: int64(1000 + 100*i), OutputTokens: int64(m.size.T)}
		if i < m.size.S {
			for _, d := range m.reasoning {
				if !send(runtime.ModelEvent{Kind: runtime.ModelReasoningDelta, Text: d, Index: -1}) {
					return
				}
			}
		}
		for _, d := range m.text {
			if !send(runtime.ModelEvent{Kind: runtime.ModelTextDelta, Text: d, Index: -1}) {
				return
			}
		}
		reason := runtime.FinishStop
		if i < m.size.S {
			c := &m.calls[i]
			for k, f := range c.fragments {
				ev := runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Text: f, Index: 0}
				if k == 0 {
					ev.ID, ev.Name = c.id, c.name
				}
				if !send(ev) {
					return
				}
			}
			usage.OutputTokens = int64(m.size.R + m.size.T + m.size.A)
			usage.ReasoningTokens = int64(m.size.R)
			reason = runtime.FinishToolCalls
		}
		if !send(runtime.ModelEvent{Kind: runtime.ModelUsage, Usage: usage, Index: -1}) {
			return
		}
		send(runtime.ModelEvent{Kind: runtime.ModelFinish, Reason: reason, Index: -1})
	}
}

// Check checks a finished run of size against the spec's checks_each_run: the
// run completed; it made S+1 model calls, call i asking for exactly one tool call,
// call_i, of the tool and with the arguments the spec gives (compared as parsed JSON),
// after seeing i tool results; each call ran and returned the spec's result; the final
// text is the final step's; and the usage totals are the spec's. It returns nil when
// every check passes, or an error naming the first that failed.
func Check(size Size, fin *runtime.RunFinished) error {
	if fin == nil {
		return errors.New("workload check: no RunFinished")
	}
	if fin.Reason != runtime.EndCompleted || fin.Err != nil {
		return fmt.Errorf("workload check: run ended %s (%v), want completed", fin.Reason, fin.Err)
	}
	_, reasoning := workloadDeltas('r', size.R)
	_, text := workloadDeltas('t', size.T)
	msgs := fin.NewMessages
	if len(msgs) != 2*size.S+1 {
		return fmt.Errorf("workload check: the run added %d messages, want %d (S+1 assistant messages and S tool messages)", len(msgs), 2*size.S+1)
	}
	for i := range size.S {
		m := msgs[2*i]
		if m.Role != runtime.RoleAssistant || m.Partial {
			return fmt.Errorf("workload check: message %d is a %s message (partial %t), want the complete assistant message of model call %d", 2*i, m.Role, m.Partial, i)
		}
		var gotReasoning strings.Builder
		for _, p := range m.Parts {
			if p.Kind == runtime.PartReasoning {
				gotReasoning.WriteString(p.Text)
			}
		}
		if gotReasoning.String() != reasoning {
			return fmt.Errorf("workload check: model call %d reasoned %q, want %q", i, gotReasoning.String(), reasoning)
		}
		if got := m.Text(); got != text {
			return fmt.Errorf("workload check: model call %d wrote %q, want %q", i, got, text)
		}
		calls := m.ToolCalls()
		if len(calls) != 1 {
			return fmt.Errorf("workload check: model call %d asked for %d tool calls, want 1", i, len(calls))
		}
		c := calls[0]
		wantID, wantName := "call_"+strconv.Itoa(i), workloadTool(i)
		if c.ID != wantID || c.Name != wantName {
			return fmt.Errorf("workload check: model call %d asked for %s %s, want %s %s (the model saw the wrong number of tool results)", i, c.Name, c.ID, wantName, wantID)
		}
		if err := sameJSON(c.Arguments, workloadArgs(i, size.A)); err != nil {
			return fmt.Errorf("workload check: %s arguments: %w", c.ID, err)
		}

		t := msgs[2*i+1]
		if t.Role != runtime.RoleTool || len(t.Parts) != 1 || t.Parts[0].Kind != runtime.PartToolResult {
			return fmt.Errorf("workload check: message %d is not the one tool result of %s", 2*i+1, wantID)
		}
		res := t.Parts[0].ToolResult
		if res.CallID != wantID || res.Name != wantName || res.Output.IsError {
			return fmt.Errorf("workload check: message %d holds the result of %s %s (error %t: %s), want the result of %s %s", 2*i+1, res.Name, res.CallID, res.Output.IsError, res.Output, wantName, wantID)
		}
		if err := sameJSON(res.Output.String(), workloadResult(i, size.A)); err != nil {
			return fmt.Errorf("workload check: %s result: %w", wantID, err)
		}
	}
	last := msgs[2*size.S]
	if last.Role != runtime.RoleAssistant || last.Partial || len(last.ToolCalls()) != 0 {
		return fmt.Errorf("workload check: the last message is a %s message (partial %t) with %d tool calls, want the final answer", last.Role, last.Partial, len(last.ToolCalls()))
	}
	if got := last.Text(); got != text {
		return fmt.Errorf("workload check: the final step wrote %q, want %q", got, text)
	}
	if fin.FinalText != text {
		return fmt.Errorf("workload check: final text %q, want %q", fin.FinalText, text)
	}
	if want := size.Totals(); fin.Usage != want {
		return fmt.Errorf("workload check: usage %+v, want %+v", fin.Usage, want)
	}
	return nil
}

// sameJSON reports how got differs from want, as parsed JSON values.
func sameJSON(got, want string) error {
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return fmt.Errorf("%q is not valid JSON: %w", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("%q is not valid JSON: %w", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		return fmt.Errorf("got %s, want %s", got, want)
	}
	return nil
}
