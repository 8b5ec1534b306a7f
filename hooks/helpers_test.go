package hooks_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

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
func newAgent(t *testing.T, m *rt.Model, cfg runtime.Config) (*runtime.Agent, *syncBuffer) {
	t.Helper()
	var buf syncBuffer
	cfg.Model = m
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	}
	if cfg.NewID == nil {
		cfg.NewID = rt.SequentialIDs()
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = time.Millisecond
	}
	a, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, &buf
}

// run consumes a run and returns its events and RunFinished.
func run(t *testing.T, a *runtime.Agent, req *runtime.Request) ([]runtime.Event, *runtime.RunFinished) {
	t.Helper()
	if req.Messages == nil {
		req.Messages = []runtime.Message{runtime.UserMessage("go")}
	}
	var evs []runtime.Event
	var fin *runtime.RunFinished
	for ev, err := range a.Run(t.Context(), req) {
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		evs = append(evs, ev)
		if f, ok := ev.(*runtime.RunFinished); ok {
			fin = f
		}
	}
	if fin == nil {
		t.Fatal("no RunFinished")
	}
	return evs, fin
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
