package hooks_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/agentd/agentd/hooks/internal/hooktest"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// fake is a runtime.Hooks with func fields that records, in a shared log, every point
// it is called at as "name:Point".
type fake struct {
	runtime.NoHooks
	name string
	log  *callLog

	beforeModel func(*runtime.ModelCall) error
	afterModel  func(*runtime.ModelResponse) error
	beforeTool  func(*runtime.ToolCallInput) error
	afterTool   func(*runtime.ToolCallOutput) error
	onEvent     func(runtime.Event)
	onError     func(*runtime.ModelFailure) bool
	afterRun    func(*runtime.RunFinished)
}

// callLog is safe for concurrent use, though the runtime calls a run's hooks one at a time.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func (f *fake) rec(point string) {
	if f.log != nil {
		f.log.add(f.name + ":" + point)
	}
}

func (f *fake) BeforeRun(context.Context, *runtime.RunInfo) error {
	f.rec("BeforeRun")
	return nil
}

func (f *fake) AfterRun(_ context.Context, _ *runtime.RunInfo, fin *runtime.RunFinished) {
	f.rec("AfterRun")
	if f.afterRun != nil {
		f.afterRun(fin)
	}
}

func (f *fake) BeforeModel(_ context.Context, in *runtime.ModelCall) error {
	f.rec("BeforeModel")
	if f.beforeModel != nil {
		return f.beforeModel(in)
	}
	return nil
}

func (f *fake) AfterModel(_ context.Context, in *runtime.ModelResponse) error {
	f.rec("AfterModel")
	if f.afterModel != nil {
		return f.afterModel(in)
	}
	return nil
}

func (f *fake) BeforeTool(_ context.Context, in *runtime.ToolCallInput) error {
	f.rec("BeforeTool")
	if f.beforeTool != nil {
		return f.beforeTool(in)
	}
	return nil
}

func (f *fake) AfterTool(_ context.Context, in *runtime.ToolCallOutput) error {
	f.rec("AfterTool")
	if f.afterTool != nil {
		return f.afterTool(in)
	}
	return nil
}

func (f *fake) OnEvent(_ context.Context, _ *runtime.RunInfo, ev runtime.Event) {
	if _, ok := ev.(*runtime.RunStarted); ok {
		f.rec("OnEvent(RunStarted)")
	}
	if f.onEvent != nil {
		f.onEvent(ev)
	}
}

func (f *fake) OnError(_ context.Context, in *runtime.ModelFailure) bool {
	f.rec("OnError")
	if f.onError != nil {
		return f.onError(in)
	}
	return false
}

// newAgent returns an agent over m whose hook failures are logged to the returned buffer.
func newAgent(t *testing.T, m *rt.Model, cfg runtime.Config) (*runtime.Agent, *hooktest.LogBuffer) {
	t.Helper()
	buf := new(hooktest.LogBuffer)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(buf, nil))
	}
	return hooktest.Agent(t, m, cfg), buf
}
