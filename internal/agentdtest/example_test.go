package agentdtest_test

import (
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/agentdtest"
)

// The real agentd on a loopback port: a run through a client connection, then SIGTERM,
// which must end it with exit status 0. The body is a test's: every helper takes the
// test's t, and the package's TestMain runs its tests through agentdtest.Main.
func Example() {
	_ = func(t *testing.T) {
		bin := agentdtest.Build(t, "github.com/agentd/agentd/cmd/agentd")
		agentd := agentdtest.Start(t, bin, agentdtest.Options{Args: []string{"--demo-delay", "0"}})
		client := agentdv1.NewAgentServiceClient(agentd.Dial(t))
		resp, err := client.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{Input: "what is 2+2?"}})
		if err != nil {
			t.Fatalf("ExecuteRun: %v\n--- agentd log:\n%s", err, agentd.Log())
		}
		t.Log(resp.GetResult().GetFinalText())
		if err := agentd.Terminate(time.Minute); err != nil {
			t.Errorf("SIGTERM: %v", err)
		}
	}
}
