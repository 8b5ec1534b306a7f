package runtime_test

import (
	"context"
	goruntime "runtime"
	"testing"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/workload"
)

// BenchmarkRun replays the benchmark workload (runtime/llm/workload)
// through Agent.Run, one whole run per iteration, with a consumer that reads and drops
// every event. Besides the usual figures per run it reports ns/delta and allocs/delta,
// where a run has the spec's deltas_per_run deltas (reasoning, text and argument
// fragments); the model allocates nothing per delta, so these are the runtime's costs.
func BenchmarkRun(b *testing.B) {
	for _, size := range workload.Sizes() {
		b.Run(size.Name, func(b *testing.B) {
			agent, err := runtime.New(workload.Config(size))
			if err != nil {
				b.Fatal(err)
			}
			req := workload.Request()
			ctx := context.Background()

			// A run that does not complete as the spec says would measure the wrong work.
			var fin *runtime.RunFinished
			for ev, err := range agent.Run(ctx, req) {
				if err != nil {
					b.Fatal(err)
				}
				if e, ok := ev.(*runtime.RunFinished); ok {
					fin = e
				}
			}
			if err := workload.Check(size, fin); err != nil {
				b.Fatal(err)
			}

			b.ReportAllocs()
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			for b.Loop() {
				for _, err := range agent.Run(ctx, req) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			goruntime.ReadMemStats(&after)
			deltas := float64(b.N) * float64(size.Deltas())
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/deltas, "ns/delta")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/deltas, "allocs/delta")
		})
	}
}
