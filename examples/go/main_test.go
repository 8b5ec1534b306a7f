package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
)

// TestMain checks that nothing the tests started outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveDemo serves agentd's demo agent, with no pause between deltas, on a loopback
// port, and returns its address.
func serveDemo(t *testing.T) string {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	reg, err := agents.NewRegistry(agents.Default(), agents.RegistryOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Agents: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	svc.Register(gs)
	go gs.Serve(lis)
	t.Cleanup(func() {
		svc.Shutdown(context.Background(), 0)
		gs.Stop()
		reg.Close()
	})
	return lis.Addr().String()
}

// The client streams the demo agent's answer, and answers its approvals as the person
// at stdin does.
func TestClient(t *testing.T) {
	addr := serveDemo(t)
	for _, tc := range []struct {
		name, prompt, stdin string
		approve             bool
		want                []string
	}{
		{"a tool call", "what is 12*7?", "", false, []string{`[call {"expression":"12*7"}]`, "12*7 = 84", "[COMPLETED]"}},
		{"approved at stdin", "save a note: buy milk", "y\n", false, []string{"approve save_note", `Saved your note "Buy milk"`, "[COMPLETED]"}},
		{"denied at stdin", "save a note: buy milk", "n\n", false, []string{"approve save_note", "Nothing was saved.", "[COMPLETED]"}},
		{"--approve", "save a note: buy bread", "", true, []string{`Saved your note "Buy bread"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := run(t.Context(), config{addr: addr, prompt: tc.prompt, approve: tc.approve}, strings.NewReader(tc.stdin), &out)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
