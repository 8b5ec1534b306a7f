package runs

import (
	"testing"

	"github.com/agentd/agentd/service/store"
)

// TestLeaseLost: a lease the store did not renew is lost to another replica only when
// the run still holds it and is running; a run that parked (or parks, or is handed over)
// released it itself, and one woken since holds another.
func TestLeaseLost(t *testing.T) {
	held := store.Lease{RunID: "run_1", Holder: "a", Epoch: 2}
	for _, tt := range []struct {
		name     string
		phase    phase
		lease    store.Lease
		handOver bool
		want     bool
	}{
		{name: "running", phase: phaseRunning, lease: held, want: true},
		{name: "parking", phase: phaseParking, lease: held},
		{name: "parked", phase: phaseParked, lease: held},
		{name: "handed over", phase: phaseRunning, lease: held, handOver: true},
		{name: "woken under a new lease", phase: phaseRunning, lease: store.Lease{RunID: "run_1", Holder: "a", Epoch: 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ss := &session{phase: tt.phase, durable: durable{lease: tt.lease}, handOver: tt.handOver}
			if got := ss.leaseLost(held); got != tt.want {
				t.Errorf("leaseLost = %v, want %v", got, tt.want)
			}
		})
	}
}
