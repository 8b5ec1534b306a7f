//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/service/servicetest"
)

// This file holds what the fleet tests (fleet_e2e_test.go) share: an OpenAI-compatible
// model and an MCP server in the test process, the agents file that names them, a fleet
// of agentd processes on one PostgreSQL schema, and a client that follows a run across
// them, reattaching wherever it can when a stream breaks.

// The fleet's settings.
const (
	// fleetLeaseTTL is each replica's --lease-ttl: a dead replica's runs are taken over
	// about this long after it died.
	fleetLeaseTTL = 2 * time.Second
	// fleetParkAfter is each replica's --park-after.
	fleetParkAfter = time.Second
	// fleetModelName is the model of the agents, "openai:" + fleetModelName.
	fleetModelName = "fleet-model"
	// idempotencyMetaKey is the key of CallTool's _meta under which agentd passes a tool
	// call's idempotency key, "<run_id>/<tool_call_id>".
	idempotencyMetaKey = "agentd/idempotency-key"
	// inputTimeout bounds one SendRunInput call; a call past it is tried again elsewhere.
	inputTimeout = 5 * time.Second
)

// replicaFlags returns the flags that make an agentd one replica of a fleet: its id and
// the time to live of its leases. It is the one place that names them: while agentd
// does not know them yet (it refuses unknown flags), known is false and the replicas
// start without them.
func replicaFlags(known bool, id string) []string {
	if !known {
		return nil
	}
	return []string{"--replica-id", id, "--lease-ttl", fleetLeaseTTL.String()}
}

// fleetFlagsKnown reports whether the agentd at bin has the flags replicaFlags passes,
// by its -h.
func fleetFlagsKnown(t *testing.T, bin string) bool {
	t.Helper()
	out, err := exec.Command(bin, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -h: %v\n%s", bin, err, out)
	}
	return bytes.Contains(out, []byte("-replica-id")) && bytes.Contains(out, []byte("-lease-ttl"))
}

// signalAgentd sends sig to the agentd process p. agentdtest has Kill and Terminate but
// nothing to pause a process, so the fencing test stops and continues it by its pid.
func signalAgentd(t *testing.T, p *agentdtest.Process, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.Pid(), sig); err != nil {
		t.Fatalf("kill -%s %d: %v", sig, p.Pid(), err)
	}
}

// fleetModel is an OpenAI-compatible Chat Completions server that answers from the
// request's messages alone, so that a model call a replica does again, after it took a
// run over, streams the same answer with the same tool-call ids:
//   - asked "task N", it says a few words and calls ledger_write and ledger_read with
//     {"task":"N"} in one step, under the ids call_w_N and call_r_N;
//   - given tool results (the last messages are tool messages), it answers quoting them;
//   - asked "story N", it tells a long story and calls no tool.
//
// Each delta goes out after a pause (delay; storyDelay for a story), so that a process
// killed or stopped meanwhile stops mid-stream. It is safe for concurrent use.
type fleetModel struct {
	delay      time.Duration
	storyDelay time.Duration
	storyWords int

	mu       sync.Mutex
	calls    map[string]int // requests by prompt ("task 7")
	bad      int            // requests it could not answer
	firstBad string         // the first of them, and why
}

// refused returns how many requests the model could not answer, and the first.
func (m *fleetModel) refused() (int, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bad, m.firstBad
}

// refuse answers a request the model cannot answer with 400, and keeps it for the
// test to report: agentd sent what no client of the model should.
func (m *fleetModel) refuse(w http.ResponseWriter, why string, body []byte) {
	m.mu.Lock()
	if m.bad++; m.bad == 1 {
		m.firstBad = why + "\n" + string(body)
	}
	m.mu.Unlock()
	http.Error(w, "fleetModel: "+why, http.StatusBadRequest)
}

// promptRE matches the user messages fleetModel understands.
var promptRE = regexp.MustCompile(`^(task|story) (\d+)$`)

// requests returns how many requests the model got for prompt.
func (m *fleetModel) requests(prompt string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[prompt]
}

// chatMessage is a message of a Chat Completions request, as much as fleetModel reads.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text returns the message's content: a string, or the text of its parts.
func (c chatMessage) text() string {
	var s string
	if json.Unmarshal(c.Content, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	json.Unmarshal(c.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (m *fleetModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return // the replica went away
	}
	var body struct{ Messages []chatMessage }
	if err := json.Unmarshal(raw, &body); err != nil {
		m.refuse(w, err.Error(), raw)
		return
	}
	var prompt, kind, n string
	for _, msg := range body.Messages {
		if msg.Role != "user" {
			continue
		}
		if sub := promptRE.FindStringSubmatch(strings.TrimSpace(msg.text())); sub != nil {
			prompt, kind, n = sub[0], sub[1], sub[2]
		}
	}
	if prompt == "" {
		m.refuse(w, `no user message says "task N" or "story N"`, raw)
		return
	}
	m.mu.Lock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[prompt]++
	m.mu.Unlock()
	var results []string
	for i := len(body.Messages) - 1; i >= 0 && body.Messages[i].Role == "tool"; i-- {
		results = append([]string{body.Messages[i].text()}, results...)
	}

	w.Header().Set("Content-Type", "text/event-stream")
	s := &sseWriter{w: w, ctx: r.Context(), delay: m.delay}
	switch {
	case kind == "story":
		s.delay = m.storyDelay
		s.text("Once upon a time,")
		for i := range m.storyWords {
			s.text(fmt.Sprintf(" word%d", i+1))
		}
		s.finish("stop")
	case len(results) > 0:
		s.text("Task " + n + " done.")
		quote := " The ledger said: " + strings.Join(results, " | ")
		for len(quote) > 0 {
			k := min(len(quote), 16)
			s.text(quote[:k])
			quote = quote[k:]
		}
		s.finish("stop")
	default:
		for _, d := range []string{"Working", " on", " task " + n + ":", " writing", " and reading", " the ledger."} {
			s.text(d)
		}
		for i, call := range []struct{ id, name string }{{"call_w_" + n, "ledger_write"}, {"call_r_" + n, "ledger_read"}} {
			s.delta(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "id": call.id, "type": "function", "function": map[string]any{"name": call.name, "arguments": ""},
			}}})
			for _, frag := range []string{`{"ta`, `sk":`, `"` + n + `"}`} {
				s.delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": frag}}}})
			}
		}
		s.finish("tool_calls")
	}
}

// sseWriter streams Chat Completions chunks, each after its pause. Once the request is
// gone (the replica died), it writes nothing more.
type sseWriter struct {
	w     http.ResponseWriter
	ctx   context.Context
	delay time.Duration
	gone  bool
	first bool
}

func (s *sseWriter) text(d string) { s.delta(map[string]any{"content": d}) }

func (s *sseWriter) delta(delta map[string]any) {
	if !s.first {
		s.first = true
		delta["role"] = "assistant"
	}
	if s.delay > 0 && !s.gone {
		t := time.NewTimer(s.delay)
		select {
		case <-s.ctx.Done():
			t.Stop()
			s.gone = true
		case <-t.C:
		}
	}
	s.chunk([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}, nil)
}

func (s *sseWriter) finish(reason string) {
	s.chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}, nil)
	s.chunk([]any{}, map[string]any{"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52})
	if !s.gone {
		fmt.Fprint(s.w, "data: [DONE]\n\n")
		s.w.(http.Flusher).Flush()
	}
}

func (s *sseWriter) chunk(choices []any, usage any) {
	if s.gone || s.ctx.Err() != nil {
		s.gone = true
		return
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-fleet", "object": "chat.completion.chunk", "created": 1735689600, "model": fleetModelName,
		"choices": choices, "usage": usage,
	})
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		s.gone = true
		return
	}
	s.w.(http.Flusher).Flush()
}

// ledger is an MCP server over streamable HTTP with two tools, and the record of every
// execution of them: the tests' oracle of what ran.
//   - ledger_write (not idempotent, destructive) writes a task's entry, taking
//     writeDelay(task) to do it;
//   - ledger_read (idempotent, read-only) says how many entries a task has.
//
// An execution is recorded when it begins, with the idempotency key agentd passed in
// _meta: a call cut short by a replica's death counts as having run. It is safe for
// concurrent use.
type ledger struct {
	url        string
	writeDelay func(task string) time.Duration
	// halt, closed, ends the writes still waiting (nil: none is ended early).
	halt chan struct{}

	mu     sync.Mutex
	writes []ledgerEntry
	reads  []ledgerEntry
}

// ledgerEntry is one execution of a ledger tool.
type ledgerEntry struct {
	task string
	key  string // the idempotency key in the call's _meta; "" when there was none
	at   time.Time
}

// newLedger serves a ledger until t ends.
func newLedger(t *testing.T) *ledger {
	t.Helper()
	l := &ledger{writeDelay: func(task string) time.Duration {
		n, _ := strconv.Atoi(task)
		return 100*time.Millisecond + time.Duration(n*37%200)*time.Millisecond
	}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "ledger", Version: "v1"}, nil)
	schema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"task": map[string]any{"type": "string"}},
		"required":   []any{"task"},
	}
	destructive := true
	srv.AddTool(&sdk.Tool{
		Name: "ledger_write", Description: "Writes a task's entry in the ledger.", InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{IdempotentHint: false, DestructiveHint: &destructive},
	}, l.write)
	srv.AddTool(&sdk.Tool{
		Name: "ledger_read", Description: "Says how many entries a task has in the ledger.", InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true, ReadOnlyHint: true},
	}, l.read)
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(func() {
		// The sessions of replicas killed mid-session are never closed by their client.
		for ss := range srv.Sessions() {
			ss.Close()
		}
		ts.Close()
	})
	l.url = ts.URL
	return l
}

// ledgerCall reads the task and the idempotency key of a call of a ledger tool.
func ledgerCall(req *sdk.CallToolRequest) (ledgerEntry, error) {
	var args struct{ Task string }
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Task == "" {
		return ledgerEntry{}, fmt.Errorf("want {\"task\": \"N\"}, got %s", req.Params.Arguments)
	}
	key, _ := req.Params.GetMeta()[idempotencyMetaKey].(string)
	return ledgerEntry{task: args.Task, key: key, at: time.Now()}, nil
}

func (l *ledger) write(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	e, err := ledgerCall(req)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.writes = append(l.writes, e)
	n := len(l.writes)
	l.mu.Unlock()
	t := time.NewTimer(l.writeDelay(e.task))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.halt:
		return nil, errors.New("the ledger is closing")
	case <-t.C:
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("wrote task %s as entry %d", e.task, n)}}}, nil
}

func (l *ledger) read(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	e, err := ledgerCall(req)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.reads = append(l.reads, e)
	entries := 0
	for _, w := range l.writes {
		if w.task == e.task {
			entries++
		}
	}
	l.mu.Unlock()
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("task %s has %d entries", e.task, entries)}}}, nil
}

// executions returns the writes and the reads of task.
func (l *ledger) executions(task string) (writes, reads []ledgerEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.writes {
		if e.task == task {
			writes = append(writes, e)
		}
	}
	for _, e := range l.reads {
		if e.task == task {
			reads = append(reads, e)
		}
	}
	return writes, reads
}

// fleetWorld is what every replica of the fleet tests shares: the agentd binary, the
// model, the ledger, and the agents file naming them. Its agents: "ledger", whose
// ledger_write asks for an approval, and "ledger-auto", whose tools all run without one.
type fleetWorld struct {
	bin    string
	model  *fleetModel
	ledger *ledger
	agents string // the agents file
	known  bool   // whether agentd has the fleet's flags (replicaFlags)
}

func newFleetWorld(t *testing.T, model *fleetModel) *fleetWorld {
	t.Helper()
	ms := httptest.NewServer(model)
	t.Cleanup(ms.Close)
	w := &fleetWorld{bin: agentdtest.Build(t, "."), model: model, ledger: newLedger(t)}
	w.known = fleetFlagsKnown(t, w.bin)
	agent := func(name, write string) string {
		return fmt.Sprintf(`  - name: %s
    model: openai:%s
    base_url: %s/v1
    system: You keep a ledger.
    tools: []
    mcp_servers: [ledger]
    policy:
      tools:
        ledger_write: {approval: %s}
        ledger_read: {approval: auto}
`, name, fleetModelName, ms.URL, write)
	}
	file := "mcp_servers:\n  - {name: ledger, url: " + strconv.Quote(w.ledger.url) + ", timeout: 10s}\n" +
		"default_agent: ledger\nagents:\n" + agent("ledger", "ask") + agent("ledger-auto", "auto")
	w.agents = filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(w.agents, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// fleet is a set of agentd processes on one store. Start, kill and replace run on the
// test's goroutine; pick and the replicas' clients are safe for concurrent use.
type fleet struct {
	t    *testing.T
	w    *fleetWorld
	name string
	dsn  string

	mu    sync.Mutex
	live  []*replica
	all   []*replica
	kills []fleetKill
}

// replica is one agentd of a fleet.
type replica struct {
	id     string
	p      *agentdtest.Process
	client agentdv1.AgentServiceClient
}

// fleetKill is a replica's death.
type fleetKill struct {
	id string
	at time.Time
}

// newFleet starts n replicas on the store at dsn (a postgres:// URL whose search_path
// names the test's schema).
func newFleet(t *testing.T, w *fleetWorld, name, dsn string, n int) *fleet {
	t.Helper()
	f := &fleet{t: t, w: w, name: name, dsn: dsn}
	for range n {
		f.start()
	}
	return f
}

// start starts one more replica, with an id of its own.
func (f *fleet) start() *replica {
	f.t.Helper()
	return f.startWith()
}

// startWith starts one more replica, with an id of its own and flags more.
func (f *fleet) startWith(more ...string) *replica {
	f.t.Helper()
	f.mu.Lock()
	id := fmt.Sprintf("%s-%d", f.name, len(f.all)+1)
	f.mu.Unlock()
	args := []string{"--config", f.w.agents, "--store", f.dsn, "--park-after", fleetParkAfter.String()}
	args = append(append(args, replicaFlags(f.w.known, id)...), more...)
	p := startAgentd(f.t, args, "OPENAI_API_KEY=sk-fleet-test")
	r := &replica{id: id, p: p, client: agentdv1.NewAgentServiceClient(p.Dial(f.t))}
	f.mu.Lock()
	f.live = append(f.live, r)
	f.all = append(f.all, r)
	f.mu.Unlock()
	return r
}

// pick returns a live replica at random.
func (f *fleet) pick() *replica { return f.pickOther("") }

// pickOther returns a live replica at random, other than the one named avoid unless it
// is the only one.
func (f *fleet) pickOther(avoid string) *replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	others := slices.DeleteFunc(slices.Clone(f.live), func(r *replica) bool { return r.id == avoid })
	if len(others) == 0 {
		others = f.live
	}
	return others[rand.N(len(others))]
}

// retire takes r out of the replicas clients pick.
func (f *fleet) retire(r *replica) {
	f.mu.Lock()
	f.live = slices.DeleteFunc(f.live, func(l *replica) bool { return l == r })
	f.mu.Unlock()
}

// kill kills r with SIGKILL, once no client can pick it any more.
func (f *fleet) kill(r *replica) {
	f.retire(r)
	at := time.Now()
	r.p.Kill()
	f.mu.Lock()
	f.kills = append(f.kills, fleetKill{id: r.id, at: at})
	f.mu.Unlock()
}

// replace kills a replica at random and starts a new one in its place, so that one at
// least is always up: a fleet of one starts the new one first.
func (f *fleet) replace() {
	f.mu.Lock()
	victim, alone := f.live[rand.N(len(f.live))], len(f.live) == 1
	f.mu.Unlock()
	if alone {
		f.start()
		f.kill(victim)
		return
	}
	f.kill(victim)
	f.start()
}

// logLines returns the lines of every replica's log that mention s, the last max of
// each, for a failure message.
func (f *fleet) logLines(s string, max int) string {
	f.mu.Lock()
	all := slices.Clone(f.all)
	f.mu.Unlock()
	var b strings.Builder
	for _, r := range all {
		var lines []string
		for line := range strings.Lines(r.p.Log()) {
			if strings.Contains(line, s) {
				lines = append(lines, line)
			}
		}
		if len(lines) > max {
			lines = lines[len(lines)-max:]
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "--- %s:\n%s", r.id, strings.Join(lines, ""))
		}
	}
	if b.Len() == 0 {
		return "(no replica's log mentions " + s + ")\n"
	}
	return b.String()
}

// fleetRun is what one client saw of one run, across every stream it read.
type fleetRun struct {
	task  int
	runID string

	// Written by the goroutine that follows the run, read once it has returned.
	evs     []*agentdv1.RunEvent // the numbered events, in seq order
	raw     map[int64][]byte     // each numbered event's bytes (deterministic), by seq
	last    int64                // the last seq read
	finish  *agentdv1.RunFinished
	streams int   // streams read: the start's and each attach
	starts  int   // Run streams opened to start the run
	lastErr error // the last stream or start error
	// quiet is the longest the client went without a word from the fleet: an event, a
	// heartbeat, or a stream's end or refusal.
	quiet time.Duration
	// answerer is set while the client reads the Run stream that started the run, on
	// which it could answer: the run then waits on its owner for a decision, rather
	// than park.
	answerer atomic.Bool

	mu         sync.Mutex // guards what the decisions' goroutines write
	problems   []string
	owners     []ownerAt
	wakeFailed int // decisions refused WAKE_FAILED, and sent again
}

// ownerAt says that replica took the run up at a time: it started it, or took a
// decision that woke it.
type ownerAt struct {
	id string
	at time.Time
}

// maxProblems is how many problems a run keeps; more are counted in the last.
const maxProblems = 20

func (fr *fleetRun) problem(format string, args ...any) {
	p := fmt.Sprintf(format, args...)
	fr.mu.Lock()
	defer fr.mu.Unlock()
	switch n := len(fr.problems); {
	case slices.Contains(fr.problems, p):
	case n < maxProblems:
		fr.problems = append(fr.problems, p)
	case n == maxProblems:
		fr.problems = append(fr.problems, "… and more")
	}
}

func (fr *fleetRun) owned(id string, at time.Time) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	fr.owners = append(fr.owners, ownerAt{id, at})
}

// follower drives runs of an agent on a fleet, as a client that knows nothing of which
// replica runs what: it starts each run on a replica at random, reads its events there
// or on another, reattaches at random with the last seq it read whenever a stream
// breaks, and approves every approval with SendRunInput on a replica at random, trying
// the same key elsewhere until one answers.
type follower struct {
	fl    *fleet
	agent string
	// approve says the agent asks for approvals; an approval_requested is a problem
	// otherwise.
	approve bool
}

// marshalEvent returns ev's deterministic bytes.
func marshalEvent(ev *agentdv1.RunEvent) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

// runAll follows runs of tasks 1..n, inflight at a time, each bounded by runTimeout, and
// returns them by task (index task-1). Runs that ctx ended before they began are nil.
func (f *follower) runAll(ctx context.Context, n, inflight int, runTimeout time.Duration) []*fleetRun {
	runs := make([]*fleetRun, n)
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, runTimeout)
			defer cancel()
			runs[i] = f.follow(rctx, i+1)
		})
	}
	wg.Wait()
	return runs
}

// eventStream is one stream of a run's events: the Run stream that started it, or an
// AttachRun's.
type eventStream struct {
	recv    func() (*agentdv1.RunEvent, error)
	cancel  context.CancelFunc
	replica string
}

// follow runs task to its end, or until ctx ends.
func (f *follower) follow(ctx context.Context, task int) *fleetRun {
	fr := &fleetRun{task: task, raw: map[int64][]byte{}}
	dctx, stopDecisions := context.WithCancel(ctx)
	var decisions sync.WaitGroup
	defer func() {
		stopDecisions()
		decisions.Wait()
	}()
	s := f.start(ctx, fr)
	if s == nil {
		fr.problem("no replica started the run within the run's time (%d tries; last error: %v)", fr.starts, fr.lastErr)
		return fr
	}
	wait := backoff{}
	heard := time.Now()
	for {
		ev, err := s.recv()
		fr.quiet, heard = max(fr.quiet, time.Since(heard)), time.Now()
		if err == nil {
			if ev.GetSeq() == fr.last+1 {
				wait.reset() // the run goes on: a stream that breaks now is tried again at once
			}
			f.handle(dctx, fr, ev, &decisions)
			continue
		}
		s.cancel()
		if errors.Is(err, io.EOF) && fr.finish == nil {
			fr.problem("the stream on %s ended OK after seq %d, before run_finished", s.replica, fr.last)
		}
		if fr.finish != nil {
			// Once run_finished is read, the stream ends OK; a replica dying meanwhile
			// breaks it instead, which changes nothing.
			return fr
		}
		fr.lastErr = fmt.Errorf("%s: %w", s.replica, err)
		if ctx.Err() != nil {
			fr.problem("no run_finished within the run's time: read up to seq %d on %d streams; last error: %v", fr.last, fr.streams, fr.lastErr)
			return fr
		}
		if !wait.wait(ctx) {
			continue
		}
		s = f.attach(ctx, fr, s.replica)
	}
}

// start starts the run on a Run stream of a replica at random, trying others until one
// answers with run_started, and returns that stream, or for every other run the stream
// of a replica at random attached after it: the Run stream is then cancelled, and the
// run goes on without it (on_disconnect CONTINUE), parking when it asks for an
// approval. It returns nil once ctx ends.
func (f *follower) start(ctx context.Context, fr *fleetRun) *eventStream {
	spec := &agentdv1.RunSpec{
		Agent: f.agent, RequestId: fmt.Sprintf("task-%d", fr.task), Input: fmt.Sprintf("task %d", fr.task),
		Config: &agentdv1.RunConfig{
			ApprovalPolicy: agentdv1.ApprovalPolicy_APPROVAL_POLICY_ASK,
			OnDisconnect:   agentdv1.OnDisconnect_ON_DISCONNECT_CONTINUE,
		},
	}
	wait := backoff{}
	for wait.wait(ctx) {
		r := f.fl.pick()
		fr.starts++
		sctx, cancel := context.WithCancel(ctx)
		rc, err := r.client.Run(sctx)
		if err == nil {
			// The stream stays open for sending, though nothing more is sent: a
			// half-closed Run stream would end the run AWAITING_INPUT at its approval.
			err = rc.Send(&agentdv1.RunRequest{ClientSeq: 1, Kind: &agentdv1.RunRequest_Start{Start: spec}})
		}
		if err == nil {
			var resp *agentdv1.RunResponse
			if resp, err = rc.Recv(); err == nil {
				ev := resp.GetEvent()
				if ev.GetRunStarted() == nil {
					fr.problem("Run on %s: first event %v, want run_started", r.id, ev)
				}
				fr.runID, fr.streams = ev.GetRunId(), 1
				fr.owned(r.id, time.Now())
				f.handle(ctx, fr, ev, nil)
				if fr.task%2 == 0 {
					cancel()
					return f.attach(ctx, fr, "")
				}
				fr.answerer.Store(true)
				return &eventStream{recv: func() (*agentdv1.RunEvent, error) {
					resp, err := rc.Recv()
					return resp.GetEvent(), err
				}, cancel: func() { fr.answerer.Store(false); cancel() }, replica: r.id}
			}
		}
		cancel()
		fr.lastErr = fmt.Errorf("Run on %s: %w", r.id, err)
	}
	return nil
}

// attach attaches to the run on a replica at random (another than the one named
// avoid, where it can), after the last seq read.
func (f *follower) attach(ctx context.Context, fr *fleetRun, avoid string) *eventStream {
	r := f.fl.pickOther(avoid)
	fr.streams++
	sctx, cancel := context.WithCancel(ctx)
	st, err := r.client.AttachRun(sctx, &agentdv1.AttachRunRequest{RunId: fr.runID, AfterSeq: fr.last})
	if err != nil {
		return &eventStream{recv: func() (*agentdv1.RunEvent, error) { return nil, err }, cancel: cancel, replica: r.id}
	}
	return &eventStream{recv: func() (*agentdv1.RunEvent, error) {
		resp, err := st.Recv()
		return resp.GetEvent(), err
	}, cancel: cancel, replica: r.id}
}

// handle takes one event read on any stream of the run.
func (f *follower) handle(ctx context.Context, fr *fleetRun, ev *agentdv1.RunEvent, decisions *sync.WaitGroup) {
	if ev.GetRunId() != fr.runID {
		fr.problem("an event of run %q on the run's stream: %v", ev.GetRunId(), ev)
	}
	if ev.GetSeq() == 0 {
		return // attached or a heartbeat: not journaled, and different for each stream
	}
	b := marshalEvent(ev)
	switch seq := ev.GetSeq(); {
	case seq <= fr.last:
		if !bytes.Equal(b, fr.raw[seq]) {
			fr.problem("seq %d read again, with other bytes:\n  first: %v\n  then:  %v", seq, fr.evs[seq-1], ev)
		} else {
			fr.problem("seq %d read twice (after seq %d, on stream %d)", seq, fr.last, fr.streams)
		}
		return
	case seq > fr.last+1:
		fr.problem("seq %d came after seq %d: events %d..%d never came", seq, fr.last, fr.last+1, seq-1)
	}
	fr.raw[ev.GetSeq()], fr.last = b, ev.GetSeq()
	fr.evs = append(fr.evs, ev)
	if rf := ev.GetRunFinished(); rf != nil {
		fr.finish = rf
	}
	if a := ev.GetApprovalRequested(); a != nil {
		if !f.approve || decisions == nil {
			fr.problem("seq %d: approval_requested for %s, which this agent does not ask", ev.GetSeq(), a.GetToolCallId())
			return
		}
		decisions.Go(func() { f.decide(ctx, fr, a) })
	}
}

// decide approves a with SendRunInput on replicas at random, the same client key each
// time, until one answers; a refusal with WAKE_FAILED, which asks for the input again,
// is sent again under a new key. It gives up silently when ctx ends: the run finished,
// or its time is up, and the run's checks say what became of the approval.
func (f *follower) decide(ctx context.Context, fr *fleetRun, a *agentdv1.ApprovalRequested) {
	req := &agentdv1.SendRunInputRequest{
		RunId: fr.runID, ClientKey: "approve-" + a.GetApprovalId(),
		Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{
			ApprovalId: a.GetApprovalId(), Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED,
		}},
	}
	wait, failed, again := backoff{}, "", 0
	for wait.wait(ctx) {
		r := f.fl.pickOther(failed)
		cctx, cancel := context.WithTimeout(ctx, inputTimeout)
		resp, err := r.client.SendRunInput(cctx, req)
		cancel()
		if err != nil {
			failed = r.id
			continue
		}
		ack := resp.GetAck()
		if !ack.GetAccepted() && ack.GetError().GetReason() == "WAKE_FAILED" {
			again++
			req.ClientKey = fmt.Sprintf("approve-%s-%d", a.GetApprovalId(), again)
			fr.mu.Lock()
			fr.wakeFailed++
			fr.mu.Unlock()
			continue
		}
		if !ack.GetAccepted() {
			fr.problem("the approval %s of %s was refused by %s: %v", a.GetApprovalId(), a.GetToolCallId(), r.id, ack.GetError())
		} else if !fr.answerer.Load() {
			// The decision woke the parked run on r.
			fr.owned(r.id, time.Now())
		}
		return
	}
}

// backoff paces the retries of one thing: none before the first try, then 10ms,
// doubling up to 500ms, with jitter.
type backoff struct{ tries int }

func (b *backoff) reset() { b.tries = 0 }

// wait waits before the next try and reports whether ctx is still alive.
func (b *backoff) wait(ctx context.Context) bool {
	defer func() { b.tries++ }()
	if b.tries == 0 {
		return ctx.Err() == nil
	}
	d := min(10*time.Millisecond<<min(b.tries-1, 6), 500*time.Millisecond)
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// renderEvents shows evs one a line, as servicetest.Render does, without the
// continuations' bytes, which say nothing to a reader.
func renderEvents(evs []*agentdv1.RunEvent) string {
	out := make([]*agentdv1.RunEvent, len(evs))
	for i, ev := range evs {
		if ev.GetCheckpoint() != nil || ev.GetRunFinished() != nil {
			ev = proto.CloneOf(ev)
			if c := ev.GetCheckpoint(); c != nil {
				c.Continuation = nil
			}
			if f := ev.GetRunFinished(); f != nil {
				f.Continuation, f.NewMessages = nil, nil
			}
		}
		out[i] = ev
	}
	return servicetest.Render(out)
}

// readJournal reads run's whole journal from r, attached from seq 0, up to its
// run_finished, and returns its numbered events. When the stream fails (ctx ending
// included), it returns the events read so far and the error.
func readJournal(ctx context.Context, r *replica, runID string) ([]*agentdv1.RunEvent, error) {
	st, err := r.client.AttachRun(ctx, &agentdv1.AttachRunRequest{RunId: runID})
	if err != nil {
		return nil, err
	}
	var evs []*agentdv1.RunEvent
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return servicetest.Numbered(evs), nil
		}
		if err != nil {
			return servicetest.Numbered(evs), fmt.Errorf("AttachRun on %s ended %w after %d events", r.id, err, len(evs))
		}
		evs = append(evs, resp.GetEvent())
	}
}

// sameBytes compares what a client read of a run (by seq) with the run's journal, and
// returns what differs.
func sameBytes(raw map[int64][]byte, journal []*agentdv1.RunEvent) []string {
	var out []string
	for _, ev := range journal {
		b, ok := raw[ev.GetSeq()]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("seq %d of the journal was never read by the client: %v", ev.GetSeq(), ev))
		case !bytes.Equal(b, marshalEvent(ev)):
			var got agentdv1.RunEvent
			proto.Unmarshal(b, &got)
			out = append(out, fmt.Sprintf("seq %d differs:\n  journal: %v\n  client:  %v", ev.GetSeq(), ev, &got))
		}
		if len(out) >= 5 {
			return append(out, "…")
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(raw)) {
		if n := int64(len(journal)); seq > n {
			var got agentdv1.RunEvent
			proto.Unmarshal(raw[seq], &got)
			out = append(out, fmt.Sprintf("seq %d was read by the client but is not in the journal of %d events: %v", seq, n, &got))
		}
	}
	return out
}

// lifecycleIDs returns the ids ev names, and those whose lifecycle it ends, each as
// "<kind> <id>".
func lifecycleIDs(ev *agentdv1.RunEvent) (names, ends []string) {
	step := func(id string) {
		if id != "" {
			names = append(names, "step "+id)
		}
	}
	switch k := ev.GetKind().(type) {
	case *agentdv1.RunEvent_StepStarted:
		step(k.StepStarted.GetStepId())
	case *agentdv1.RunEvent_StepFinished:
		ends = append(ends, "step "+k.StepFinished.GetStepId())
	case *agentdv1.RunEvent_SteerApplied:
		step(k.SteerApplied.GetStepId())
	case *agentdv1.RunEvent_MessageStarted:
		names = append(names, "message "+k.MessageStarted.GetMessageId())
		step(k.MessageStarted.GetStepId())
	case *agentdv1.RunEvent_TextDelta:
		names = append(names, "message "+k.TextDelta.GetMessageId())
	case *agentdv1.RunEvent_ReasoningDelta:
		names = append(names, "message "+k.ReasoningDelta.GetMessageId())
	case *agentdv1.RunEvent_MessageFinished:
		ends = append(ends, "message "+k.MessageFinished.GetMessageId())
	case *agentdv1.RunEvent_ToolCallStarted:
		names = append(names, "tool call "+k.ToolCallStarted.GetToolCallId())
		step(k.ToolCallStarted.GetStepId())
	case *agentdv1.RunEvent_ToolCallArgsDelta:
		names = append(names, "tool call "+k.ToolCallArgsDelta.GetToolCallId())
	case *agentdv1.RunEvent_ToolCallArgsDone:
		names = append(names, "tool call "+k.ToolCallArgsDone.GetToolCallId())
	case *agentdv1.RunEvent_ApprovalRequested:
		names = append(names, "approval "+k.ApprovalRequested.GetApprovalId(), "tool call "+k.ApprovalRequested.GetToolCallId())
	case *agentdv1.RunEvent_ApprovalResolved:
		names = append(names, "tool call "+k.ApprovalResolved.GetToolCallId())
		ends = append(ends, "approval "+k.ApprovalResolved.GetApprovalId())
	case *agentdv1.RunEvent_ToolExecutionStarted:
		names = append(names, "tool call "+k.ToolExecutionStarted.GetToolCallId())
	case *agentdv1.RunEvent_ToolCallResult:
		ends = append(ends, "tool call "+k.ToolCallResult.GetToolCallId())
	case *agentdv1.RunEvent_ToolCallsCancelled:
		for _, id := range k.ToolCallsCancelled.GetToolCallIds() {
			ends = append(ends, "tool call "+id)
		}
	}
	return names, ends
}

// journalProblems checks a run's numbered events against the contract: seq 1..N with
// no gap and no duplicate, run_started first and run_finished last, one of each, no
// event naming an id after the event that ended its lifecycle, at most one
// tool_call_result and one approval_requested per tool call.
func journalProblems(evs []*agentdv1.RunEvent) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if len(evs) == 0 {
		return []string{"no events"}
	}
	if evs[0].GetRunStarted() == nil {
		add("the first event is not run_started: %v", evs[0])
	}
	if evs[len(evs)-1].GetRunFinished() == nil {
		add("the last event is not run_finished: %v", evs[len(evs)-1])
	}
	ended := map[string]int64{} // id → the seq that ended it
	results, asked := map[string]int{}, map[string]int{}
	starts, finishes := 0, 0
	for i, ev := range evs {
		seq := ev.GetSeq()
		if seq != int64(i+1) {
			add("event %d of the journal has seq %d", i+1, seq)
		}
		switch {
		case ev.GetRunStarted() != nil:
			starts++
		case ev.GetRunFinished() != nil:
			finishes++
		case ev.GetToolCallResult() != nil:
			results[ev.GetToolCallResult().GetToolCallId()]++
		case ev.GetApprovalRequested() != nil:
			asked[ev.GetApprovalRequested().GetToolCallId()]++
		}
		names, ends := lifecycleIDs(ev)
		for _, id := range append(names, ends...) {
			if at, ok := ended[id]; ok {
				add("seq %d names %s, whose lifecycle ended at seq %d: %v", seq, id, at, ev)
			}
		}
		for _, id := range ends {
			ended[id] = seq
		}
	}
	if starts != 1 || finishes != 1 {
		add("%d run_started and %d run_finished, want one each", starts, finishes)
	}
	for _, id := range slices.Sorted(maps.Keys(results)) {
		if results[id] > 1 {
			add("%d tool_call_result events for %s, want one", results[id], id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(asked)) {
		if asked[id] > 1 {
			add("%d approval_requested events for %s, want one", asked[id], id)
		}
	}
	return out
}

// resultText returns a tool result's output as text.
func resultText(r *agentdv1.ToolCallResult) string {
	if j := r.GetJson(); j != nil {
		b, _ := protojson.Marshal(j)
		return string(b)
	}
	return r.GetText()
}

// percentile returns the p-th percentile (0..100) of ds, sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}

// envInt returns the environment variable name as a positive number, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
