package service

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/runtime"
)

// FaultToolName is a catalogue tool that exists only in this package's tests: it runs
// the func SetFaultTool installs, so that a test can script a server tool that blocks,
// panics, hangs or floods (faults_test.go).
const FaultToolName = "fault"

var faultFunc atomic.Pointer[runtime.ToolFunc]

func init() {
	catalogue[FaultToolName] = &catalogueTool{source: "test", make: func(*agentState) runtime.Tool {
		return runtime.NewTool(runtime.ToolSpec{Name: FaultToolName, Description: "A tool the test scripts."},
			func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
				fn := faultFunc.Load()
				if fn == nil {
					return runtime.Output{Text: "no fault scripted"}, nil
				}
				return (*fn)(ctx, call)
			})
	}}
}

// SetFaultTool makes fn the fault tool's body until t ends.
func SetFaultTool(t testing.TB, fn runtime.ToolFunc) {
	faultFunc.Store(&fn)
	t.Cleanup(func() { faultFunc.Store(nil) })
}
