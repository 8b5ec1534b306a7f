package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// perRun is a long-lived hook that hands every run an instance of its own. Its own hook
// points count the calls that reach it, which the runtime must never make.
type perRun struct {
	runtime.NoHooks
	mu     sync.Mutex
	made   []*runInstance
	direct int
}

func (p *perRun) ForRun(in *runtime.RunInfo) runtime.Hooks {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := &runInstance{info: in}
	p.made = append(p.made, h)
	return h
}

func (p *perRun) BeforeRun(context.Context, *runtime.RunInfo) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.direct++
	return nil
}

func (p *perRun) OnEvent(context.Context, *runtime.RunInfo, runtime.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.direct++
}

func (p *perRun) instances() []*runInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*runInstance(nil), p.made...)
}

// runInstance is one run's hook: it records the points it is called at, and whether a
// call came for another run or after its run's last event.
type runInstance struct {
	runtime.NoHooks
	info   *runtime.RunInfo
	points []string
	tools  int // tool calls this run counted: state no other run may see
	wrong  int // calls whose RunInfo was not this run's
	late   int // calls after RunFinished
	ended  bool
}

func (h *runInstance) saw(in *runtime.RunInfo, point string) {
	if in != h.info {
		h.wrong++
	}
	if h.ended {
		h.late++
	}
	h.points = append(h.points, point)
}

func (h *runInstance) BeforeRun(_ context.Context, in *runtime.RunInfo) error {
	h.saw(in, "BeforeRun")
	return nil
}

func (h *runInstance) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	h.saw(in.RunInfo, "BeforeTool")
	h.tools++
	return nil
}

func (h *runInstance) AfterRun(_ context.Context, in *runtime.RunInfo, _ *runtime.RunFinished) {
	h.saw(in, "AfterRun")
}

func (h *runInstance) OnEvent(_ context.Context, in *runtime.RunInfo, ev runtime.Event) {
	switch ev.(type) {
	case *runtime.RunStarted:
		h.saw(in, "RunStarted")
	case *runtime.RunFinished:
		h.saw(in, "RunFinished")
		h.ended = true
	}
}

// TestPerRun_EveryRunGetsItsOwnInstance: the runtime asks a PerRun hook once per run, in
// the agent's hooks and the request's, and calls the run's instance, never the long-lived
// hook, at every point of that run and of no other; runs with the same id do not share
// an instance, even at once.
func TestPerRun_EveryRunGetsItsOwnInstance(t *testing.T) {
	agentHook, serverHook := &perRun{}, &perRun{}
	a := newAgent(t, &rt.Model{}, runtime.Config{Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: agentHook})
	runOne := func(runID string, calls int) {
		var steps []rt.Step
		for range calls {
			steps = append(steps, rt.Call(0, "t", `{}`))
		}
		m := &rt.Model{Steps: append(steps, rt.Say("done"))}
		req := &runtime.Request{RunID: runID, Model: m, Hooks: runtime.Chain(nil, serverHook), Messages: []runtime.Message{runtime.UserMessage("go")}}
		for range a.Run(t.Context(), req) {
		}
	}
	runOne("run_a", 1)
	runOne("run_b", 2)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { runOne("run_same", i) })
	}
	wg.Wait()

	for _, p := range []*perRun{agentHook, serverHook} {
		if p.direct != 0 {
			t.Errorf("the long-lived hook was called %d times during runs", p.direct)
		}
		made := p.instances()
		if len(made) != 6 {
			t.Fatalf("ForRun was called %d times for 6 runs", len(made))
		}
		tools := map[int]int{}
		for _, h := range made {
			if h.wrong != 0 || h.late != 0 {
				t.Errorf("run %s's instance got %d calls of another run and %d after its end", h.info.RunID, h.wrong, h.late)
			}
			want := fmt.Sprintf("RunStarted BeforeRun%s AfterRun RunFinished", strings.Repeat(" BeforeTool", h.tools))
			if got := strings.Join(h.points, " "); got != want {
				t.Errorf("run %s's instance saw %q, want %q", h.info.RunID, got, want)
			}
			tools[h.tools]++
		}
		// Each run counted its own calls: 1, 2, and 0 to 3 for the four with one id.
		if want := map[int]int{0: 1, 1: 2, 2: 2, 3: 1}; fmt.Sprint(tools) != fmt.Sprint(want) {
			t.Errorf("runs by tool calls counted %v, want %v", tools, want)
		}
	}
}

// TestPerRun_ARunWhoseConsumerLeftAtOnce: a run whose consumer stops at RunStarted
// never reaches BeforeRun; its instance saw that event alone, and goes with the run.
func TestPerRun_ARunWhoseConsumerLeftAtOnce(t *testing.T) {
	p := &perRun{}
	a := newAgent(t, &rt.Model{Steps: []rt.Step{rt.Say("never")}}, runtime.Config{Hooks: p})
	for range a.Run(t.Context(), &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("go")}}) {
		break
	}
	made := p.instances()
	if len(made) != 1 || strings.Join(made[0].points, " ") != "RunStarted" {
		t.Fatalf("instances %+v, want one that saw RunStarted alone", made)
	}
}

// nilForRun sits out every run.
type nilForRun struct{ perRun }

func (*nilForRun) ForRun(*runtime.RunInfo) runtime.Hooks { return nil }

// panicForRun cannot make a run's instance.
type panicForRun struct{ perRun }

func (*panicForRun) ForRun(*runtime.RunInfo) runtime.Hooks { panic("no state for you") }

// chainForRun returns, for each run, a chain of a fresh instance and a PerRun hook,
// which the runtime uses as it is: it does not ask that hook again.
type chainForRun struct {
	perRun
	inner *perRun
	made  *runInstance
}

func (c *chainForRun) ForRun(in *runtime.RunInfo) runtime.Hooks {
	c.made = &runInstance{info: in}
	return runtime.Chain(nil, c.made, c.inner)
}

func TestPerRun_NilPanicAndChainResults(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	none, broken := &nilForRun{}, &panicForRun{}
	chained := &chainForRun{inner: &perRun{}}
	after := &perRun{}
	a := newAgent(t, &rt.Model{Steps: []rt.Step{rt.Say("done")}}, runtime.Config{Logger: log, Hooks: runtime.Chain(nil, none, broken, chained, after)})
	_, fin := run(t, a, t.Context(), &runtime.Request{})
	if fin.Reason != runtime.EndCompleted {
		t.Fatalf("run ended %v (%v), want completed", fin.Reason, fin.Err)
	}
	if none.direct != 0 || broken.direct != 0 {
		t.Errorf("hooks whose ForRun gave nothing were called %d and %d times", none.direct, broken.direct)
	}
	if !strings.Contains(logs.String(), "no state for you") || !strings.Contains(logs.String(), "ForRun") {
		t.Errorf("log %q: want the ForRun panic", logs.String())
	}
	if got := strings.Join(chained.made.points, " "); got != "RunStarted BeforeRun AfterRun RunFinished" {
		t.Errorf("the instance in the chain ForRun returned saw %q", got)
	}
	if chained.inner.direct == 0 || len(chained.inner.instances()) != 0 {
		t.Errorf("the PerRun hook inside ForRun's chain: %d calls, ForRun %d times; want it used as it is", chained.inner.direct, len(chained.inner.instances()))
	}
	if made := after.instances(); len(made) != 1 || after.direct != 0 {
		t.Errorf("the hook after them: %d instances, %d direct calls; want its own instance", len(made), after.direct)
	}
}

// TestPerRun_ChainWithoutPerRunHooks: a chain whose hooks keep no per-run state is
// its own run's chain.
func TestPerRun_ChainWithoutPerRunHooks(t *testing.T) {
	log := &pointLog{}
	c := runtime.Chain(nil, &logged{name: "a", log: log})
	pr, ok := c.(runtime.PerRun)
	if !ok {
		t.Fatal("a chain does not implement PerRun")
	}
	pr.ForRun(&runtime.RunInfo{}).BeforeRun(t.Context(), &runtime.RunInfo{})
	if got := log.get(); len(got) != 1 || got[0] != "a:BeforeRun" {
		t.Errorf("calls %v, want a's BeforeRun", got)
	}
}
