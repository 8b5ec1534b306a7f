package service_test

// The fault matrix: the real server over loopback TCP, and a client that
// disappears at each point of a run, tools that misbehave, hooks that misbehave.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/logtest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
	"github.com/agentd/agentd/service/agents/agentstest"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// faultEndBound is how soon after the client disappears the run must have ended:
// AfterRun called, its span ended, the gauges back to zero. A run that notices ends in
// milliseconds; one that does not waits for something else to end it (its model, its
// approval or client tool timeout: minutes), so a bound no loaded machine reaches still
// tells the two apart.
const faultEndBound = 30 * time.Second

// runEnd is what AfterRun saw, and when.
type runEnd struct {
	reason runtime.EndReason
	err    error
	at     time.Time
}

// faultHook is an agent's own hook: it records every AfterRun, and runs the funcs set.
// tool, if set, is the body of the worker's fault tool, and toolTimeout, if set, its
// timeout in place of the worker's 100ms.
type faultHook struct {
	runtime.NoHooks
	ended       chan runEnd
	beforeModel func(ctx context.Context, in *runtime.ModelCall) error
	tool        runtime.ToolFunc
	toolTimeout time.Duration
}

func (h *faultHook) AfterRun(_ context.Context, _ *runtime.RunInfo, fin *runtime.RunFinished) {
	h.ended <- runEnd{reason: fin.Reason, err: fin.Err, at: time.Now()}
}

func (h *faultHook) BeforeModel(ctx context.Context, in *runtime.ModelCall) error {
	if h.beforeModel != nil {
		return h.beforeModel(ctx, in)
	}
	return nil
}

// panicky panics at every hook point.
type panicky struct{}

func (panicky) BeforeRun(context.Context, *runtime.RunInfo) error { panic("hook boom: before_run") }
func (panicky) AfterRun(context.Context, *runtime.RunInfo, *runtime.RunFinished) {
	panic("hook boom: after_run")
}
func (panicky) BeforeModel(context.Context, *runtime.ModelCall) error {
	panic("hook boom: before_model")
}
func (panicky) AfterModel(context.Context, *runtime.ModelResponse) error {
	panic("hook boom: after_model")
}
func (panicky) BeforeTool(context.Context, *runtime.ToolCallInput) error {
	panic("hook boom: before_tool")
}
func (panicky) AfterTool(context.Context, *runtime.ToolCallOutput) error {
	panic("hook boom: after_tool")
}
func (panicky) OnEvent(context.Context, *runtime.RunInfo, runtime.Event) {
	panic("hook boom: on_event")
}

// slow sleeps at the points it is called at most.
type slow struct {
	runtime.NoHooks
	d time.Duration
}

func (s slow) BeforeModel(context.Context, *runtime.ModelCall) error    { time.Sleep(s.d); return nil }
func (s slow) BeforeTool(context.Context, *runtime.ToolCallInput) error { time.Sleep(s.d); return nil }
func (s slow) AfterRun(context.Context, *runtime.RunInfo, *runtime.RunFinished) {
	time.Sleep(s.d)
}

// spanEnds hands over every span that ends, with the time it ended.
type spanEnds chan spanEnd

type spanEnd struct {
	name string
	at   time.Time
}

func (spanEnds) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e spanEnds) OnEnd(s sdktrace.ReadOnlySpan) {
	select {
	case e <- spanEnd{s.Name(), time.Now()}:
	default:
	}
}
func (spanEnds) Shutdown(context.Context) error   { return nil }
func (spanEnds) ForceFlush(context.Context) error { return nil }

// faultRig is a server on a loopback TCP port, traced and metered in memory, serving the
// demo agent and the fault agents.
type faultRig struct {
	t      *testing.T
	svc    *service.Server
	addr   string
	hook   *faultHook
	spans  spanEnds
	reader *sdkmetric.ManualReader
	logs   *logtest.Buffer
}

// The fault agents.
var faultModels = map[string]func() *rt.Model{
	// streamer streams a delta, then nothing more until its context ends.
	"streamer": func() *rt.Model {
		return &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("once upon a time")}, Block: true}}}
	},
	// worker calls the fault tool.
	"worker": func() *rt.Model {
		return &rt.Model{Steps: []rt.Step{rt.Call(0, "fault", `{}`), rt.Say("done")}}
	},
	// asker calls a client tool, pick_color, that the client declares.
	"asker": func() *rt.Model {
		return &rt.Model{Steps: []rt.Step{rt.Call(0, "pick_color", `{}`), rt.Say("red it is")}}
	},
	// stepper calculates, then answers in a second step.
	"stepper": func() *rt.Model {
		return &rt.Model{Steps: []rt.Step{rt.Call(0, "calculate", `{"expression":"1+1"}`), rt.Say("2")}}
	},
}

// newFaultRig starts the server. extra hooks run after the recording one.
func newFaultRig(t *testing.T, hook *faultHook, extra ...runtime.Hooks) *faultRig {
	t.Helper()
	if hook == nil {
		hook = &faultHook{}
	}
	hook.ended = make(chan runEnd, 16)
	r := &faultRig{t: t, hook: hook, spans: make(spanEnds, 1000), reader: sdkmetric.NewManualReader(), logs: &logtest.Buffer{}}
	log := slog.New(slog.NewTextHandler(r.logs, nil))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})

	hooks := runtime.Hooks(hook)
	if len(extra) > 0 {
		hooks = runtime.Chain(log, append([]runtime.Hooks{hook}, extra...)...)
	}
	// The worker is a Go agent, its fault tool the hook's; the others come from an agents
	// file, with the demo agent.
	fault := runtime.NewTool(runtime.ToolSpec{Name: "fault", Description: "A tool the test scripts.", Timeout: hook.toolTimeout},
		func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
			if hook.tool == nil {
				return runtime.Output{Text: "no fault scripted"}, nil
			}
			return hook.tool(ctx, call)
		})
	worker, err := runtime.New(runtime.Config{
		Name: "worker", Model: faultModels["worker"](), Tools: []runtime.Tool{fault}, ToolTimeout: 100 * time.Millisecond,
		Logger: log, TracerProvider: tp, MeterProvider: mp,
	})
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*rt.Model{}
	acfg := agents.Default()
	for name, m := range faultModels {
		if name == "worker" {
			continue
		}
		models[name] = m()
		ac := agents.AgentConfig{Name: name, Model: "script:" + name, Tools: []string{}}
		if name == "stepper" {
			ac.Tools = []string{"calculate"}
		}
		acfg.Agents = append(acfg.Agents, ac)
	}
	reg, err := agents.NewRegistry(acfg, agents.RegistryOptions{
		Resolve: agentstest.ScriptResolver(models), Logger: log,
		TracerProvider: tp, MeterProvider: mp,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	all := withAgents(t, reg, &service.Agent{Name: "worker", Runtime: worker})
	r.svc, err = service.New(service.Config{Agents: all, Logger: log, Config: runs.Config{ContinuationKey: testKey}})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(hookInterceptors(hooks)...) // every agent's runs have the hooks
	r.svc.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = lis.Addr().String()
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	return r
}

// dial returns a new client connection of its own.
func (r *faultRig) dial() *grpc.ClientConn {
	r.t.Helper()
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { conn.Close() })
	return conn
}

// activeGauge reads agentd.runs.active, summed over its series.
func (r *faultRig) activeGauge() int64 {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "agentd.runs.active" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				r.t.Fatalf("agentd.runs.active is a %T", m.Data)
			}
			for _, dp := range sum.DataPoints {
				n += dp.Value
			}
		}
	}
	return n
}

// afterRun waits for the run's AfterRun.
func (r *faultRig) afterRun(within time.Duration) runEnd {
	r.t.Helper()
	select {
	case e := <-r.hook.ended:
		return e
	case <-time.After(within):
		r.t.Fatalf("AfterRun was not called within %s", within)
		return runEnd{}
	}
}

// spanEnded waits for the named span to end and returns when it did.
func (r *faultRig) spanEnded(name string, within time.Duration) time.Time {
	r.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case e := <-r.spans:
			if e.name == name {
				return e.at
			}
		case <-timeout:
			r.t.Fatalf("span %q did not end within %s", name, within)
		}
	}
}

// idle waits until the server and the gauge count no run, and returns when they did.
func (r *faultRig) idle(within time.Duration) time.Time {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if r.svc.ActiveRuns() == 0 && r.activeGauge() == 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("after %s: ActiveRuns() = %d, agentd.runs.active = %d; want 0", within, r.svc.ActiveRuns(), r.activeGauge())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFault_ClientDisappears(t *testing.T) {
	type phase struct {
		name  string
		agent string
		input string
		setup func(t *testing.T, spec *agentdv1.RunSpec, hook *faultHook, reached chan<- struct{})
		// reached matches the event at which the phase is under way; nil means the setup
		// signals it.
		reached func(*agentdv1.RunEvent) bool
	}
	phases := []phase{
		{
			name: "model streaming", agent: "streamer", input: "tell me a story",
			reached: func(ev *agentdv1.RunEvent) bool { return ev.GetTextDelta() != nil },
		},
		{
			name: "approval open", agent: "demo", input: "save a note: milk",
			reached: func(ev *agentdv1.RunEvent) bool { return ev.GetApprovalRequested() != nil },
		},
		{
			name: "server tool running", agent: "worker", input: "work",
			setup: func(t *testing.T, _ *agentdv1.RunSpec, hook *faultHook, reached chan<- struct{}) {
				// The client leaves while the tool runs, however long it takes to.
				hook.toolTimeout = time.Hour
				hook.tool = func(ctx context.Context, _ runtime.ToolCall) (runtime.Output, error) {
					close(reached)
					<-ctx.Done()
					return runtime.Output{}, ctx.Err()
				}
			},
		},
		{
			name: "client tool awaited", agent: "asker", input: "pick a color",
			setup: func(_ *testing.T, spec *agentdv1.RunSpec, _ *faultHook, _ chan<- struct{}) {
				spec.ClientTools = []*agentdv1.ClientTool{{Spec: &agentdv1.ToolSpec{Name: "pick_color", Description: "Asks the user for a color."}}}
			},
			reached: func(ev *agentdv1.RunEvent) bool {
				return ev.GetToolExecutionStarted().GetExecutor() == agentdv1.Executor_EXECUTOR_CLIENT
			},
		},
		{
			// The first step's tool result is in; the run is about to call the model for
			// the second step, and waits at BeforeModel until the client has gone.
			name: "between steps", agent: "stepper", input: "what is 1+1?",
			setup: func(_ *testing.T, _ *agentdv1.RunSpec, hook *faultHook, reached chan<- struct{}) {
				hook.beforeModel = func(ctx context.Context, in *runtime.ModelCall) error {
					if in.Step == 0 {
						return nil
					}
					close(reached)
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Second):
					}
					return nil
				}
			},
		},
	}
	disappearances := []struct {
		name string
		do   func(conn *grpc.ClientConn, cancel context.CancelFunc)
	}{
		{"connection closed", func(conn *grpc.ClientConn, _ context.CancelFunc) { conn.Close() }},
		{"rpc cancelled", func(_ *grpc.ClientConn, cancel context.CancelFunc) { cancel() }},
	}
	for _, p := range phases {
		for _, d := range disappearances {
			t.Run(p.name+"/"+d.name, func(t *testing.T) {
				servicetest.CheckNoLeak(t)
				hook := &faultHook{}
				reached := make(chan struct{})
				spec := servicetest.Input(p.agent, p.input)
				if p.setup != nil {
					p.setup(t, spec, hook, reached)
				}
				// What agentd did before runs outlived their streams; the run going on is
				// attach_test's.
				spec.Config = &agentdv1.RunConfig{OnDisconnect: agentdv1.OnDisconnect_ON_DISCONNECT_CANCEL}
				r := newFaultRig(t, hook)
				conn := r.dial()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				rs, err := agentdv1.NewAgentServiceClient(conn).Run(ctx)
				if err != nil {
					t.Fatal(err)
				}
				st := servicetest.NewStream(t, rs)
				st.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
				if p.reached != nil {
					st.Until(p.reached)
				} else {
					st.Until(func(ev *agentdv1.RunEvent) bool { return ev.GetRunStarted() != nil })
					select {
					case <-reached:
					case <-time.After(10 * time.Second):
						t.Fatal("the run never reached the phase")
					}
				}
				if n := r.svc.ActiveRuns(); n != 1 {
					t.Fatalf("ActiveRuns() = %d before the client left, want 1", n)
				}

				gone := time.Now()
				d.do(conn, cancel)

				end := r.afterRun(faultEndBound)
				spanAt := r.spanEnded("invoke_agent "+p.agent, faultEndBound)
				idleAt := r.idle(faultEndBound)
				afterRun, span, idle := end.at.Sub(gone), spanAt.Sub(gone), idleAt.Sub(gone)
				t.Logf("end latency: AfterRun %s, span %s, idle %s", afterRun, span, idle)
				if end.reason != runtime.EndCancelled {
					t.Errorf("AfterRun saw %v (%v), want cancelled", end.reason, end.err)
				}
				if worst := max(afterRun, span, idle); worst > faultEndBound {
					t.Errorf("the run ended %s after the client left (AfterRun %s, span %s, idle %s), want within %s", worst, afterRun, span, idle, faultEndBound)
				}
			})
		}
	}
}

// runToEnd runs spec on a new connection and returns the events and AfterRun's view.
func (r *faultRig) runToEnd(spec *agentdv1.RunSpec) (*servicetest.Stream, *agentdv1.RunFinished, runEnd) {
	r.t.Helper()
	rs, err := agentdv1.NewAgentServiceClient(r.dial()).Run(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	st := servicetest.NewStream(r.t, rs)
	st.Send(&agentdv1.RunRequest{Kind: &agentdv1.RunRequest_Start{Start: spec}})
	fin, err := st.Finish()
	if err != nil {
		r.t.Fatalf("the run's status: %v", err)
	}
	end := r.afterRun(5 * time.Second)
	r.spanEnded("invoke_agent "+spec.GetAgent(), 5*time.Second)
	r.idle(5 * time.Second)
	return st, fin, end
}

func toolResult(evs []*agentdv1.RunEvent) *agentdv1.ToolCallResult {
	for _, ev := range evs {
		if res := ev.GetToolCallResult(); res != nil {
			return res
		}
	}
	return nil
}

func TestFault_Tool(t *testing.T) {
	tests := []struct {
		name string
		fn   func(release <-chan struct{}) runtime.ToolFunc
		// check checks the result the model read.
		check func(t *testing.T, res *agentdv1.ToolCallResult)
	}{
		{
			name: "panic",
			fn: func(<-chan struct{}) runtime.ToolFunc {
				return func(context.Context, runtime.ToolCall) (runtime.Output, error) { panic("tool boom") }
			},
			check: func(t *testing.T, res *agentdv1.ToolCallResult) {
				if !res.GetIsError() || !strings.Contains(res.GetText(), "panic") || !strings.Contains(res.GetText(), "tool boom") {
					t.Errorf("result %v, want an error naming the panic", res)
				}
			},
		},
		{
			// The tool ignores its context; the agent's tool timeout is 100ms.
			name: "hang past its timeout",
			fn: func(release <-chan struct{}) runtime.ToolFunc {
				return func(context.Context, runtime.ToolCall) (runtime.Output, error) {
					<-release
					return runtime.Output{Text: "too late"}, nil
				}
			},
			check: func(t *testing.T, res *agentdv1.ToolCallResult) {
				if !res.GetIsError() || !strings.Contains(res.GetText(), "timed out") {
					t.Errorf("result %v, want a timeout error", res)
				}
			},
		},
		{
			name: "huge output",
			fn: func(<-chan struct{}) runtime.ToolFunc {
				return func(context.Context, runtime.ToolCall) (runtime.Output, error) {
					return runtime.Output{Text: strings.Repeat("x", 10<<20)}, nil
				}
			},
			check: func(t *testing.T, res *agentdv1.ToolCallResult) {
				if n := len(res.GetText()); n == 0 || n > 128<<10 {
					t.Errorf("the result has %d bytes, want it limited (64 KiB by default)", n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servicetest.CheckNoLeak(t)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the leak check: the hung tool returns
			r := newFaultRig(t, &faultHook{tool: tt.fn(release)})
			start := time.Now()
			st, fin, end := r.runToEnd(servicetest.Input("worker", "work"))
			t.Logf("the run took %s", time.Since(start))
			if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || end.reason != runtime.EndCompleted {
				t.Fatalf("finished %v, AfterRun saw %v (%v); want completed", fin.GetReason(), end.reason, end.err)
			}
			res := toolResult(st.Events())
			if res == nil {
				t.Fatalf("no tool_call_result; events:\n%s", servicetest.Render(st.Events()))
			}
			tt.check(t, res)
		})
	}
}

func TestFault_Hook(t *testing.T) {
	t.Run("panic", func(t *testing.T) {
		servicetest.CheckNoLeak(t)
		r := newFaultRig(t, nil, panicky{})
		_, fin, end := r.runToEnd(servicetest.Input("stepper", "what is 1+1?"))
		if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || end.reason != runtime.EndCompleted || fin.GetFinalText() != "2" {
			t.Fatalf("finished %v %q, AfterRun saw %v (%v); want completed", fin.GetReason(), fin.GetFinalText(), end.reason, end.err)
		}
		logs := r.logs.String()
		for _, point := range []string{"before_run", "before_model", "after_model", "before_tool", "after_tool", "on_event", "after_run"} {
			if !strings.Contains(logs, "hook boom: "+point) {
				t.Errorf("the panic at %s was not logged; logs:\n%s", point, logs)
			}
		}
	})
	t.Run("slow", func(t *testing.T) {
		servicetest.CheckNoLeak(t)
		const d = 200 * time.Millisecond
		r := newFaultRig(t, nil, slow{d: d})
		start := time.Now()
		_, fin, end := r.runToEnd(servicetest.Input("stepper", "what is 1+1?"))
		took := time.Since(start)
		t.Logf("the run took %s", took)
		if fin.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_COMPLETED || end.reason != runtime.EndCompleted || fin.GetFinalText() != "2" {
			t.Fatalf("finished %v %q, AfterRun saw %v (%v); want completed", fin.GetReason(), fin.GetFinalText(), end.reason, end.err)
		}
		// Two model calls and a tool call wait for the hook; AfterRun's sleep follows the
		// recording hook's.
		if took < 3*d {
			t.Errorf("the run took %s; the slow hook was not waited for", took)
		}
	})
}
