package guardrail_test

import (
	"context"
	"testing"

	"github.com/agentd/agentd/hooks/guardrail"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
)

// BenchmarkGuardrails replays the benchmark workload (medium) one whole run per
// iteration, without guardrails and with the built-ins checking every stage they can,
// none tripping: what the checks add to a run is the difference between the sub-benchmarks
// of one invocation.
func BenchmarkGuardrails(b *testing.B) {
	var size workload.Size
	for _, s := range workload.Sizes() {
		if s.Name == "medium" {
			size = s
		}
	}
	deny, err := guardrail.DenyList(runtime.GuardSpec{Stages: runtime.GuardInput | runtime.GuardOutput | runtime.GuardToolInput | runtime.GuardToolOutput},
		[]string{`sk-[A-Za-z0-9]{20,}`, `(?i)BEGIN [A-Z ]*PRIVATE KEY`}, []string{"password", "secret", "api key", "ssn", "credit card"})
	if err != nil {
		b.Fatal(err)
	}
	maxSize, err := guardrail.MaxSize(runtime.GuardSpec{Stages: runtime.GuardOutput | runtime.GuardToolOutput}, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		hooks runtime.Hooks
	}{
		{"none", nil},
		{"deny_list", deny},
		{"deny_list+max_size", runtime.Chain(nil, deny, maxSize)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := workload.Config(size)
			cfg.Hooks = bc.hooks
			agent, err := runtime.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, req := context.Background(), workload.Request()
			var fin *runtime.RunFinished
			for ev, err := range agent.Run(ctx, req) {
				if err != nil {
					b.Fatal(err)
				}
				if f, ok := ev.(*runtime.RunFinished); ok {
					fin = f
				}
			}
			if err := workload.Check(size, fin); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, err := range agent.Run(ctx, req) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
