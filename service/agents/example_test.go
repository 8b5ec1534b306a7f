package agents_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
)

// An agents file's agents, built and handed to the service as service.Config.Agents.
func ExampleNewRegistry() {
	dir, err := os.MkdirTemp("", "agents")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agents.yaml")
	os.WriteFile(path, []byte(`
default_agent: helper
agents:
  - name: helper
    description: Tells the time and calculates.
    model: demo
    tools: [current_time, calculate]
  - name: bench
    model: workload:small
`), 0o600)

	cfg, err := agents.LoadFile(path)
	if err != nil {
		panic(err)
	}
	reg, err := agents.NewRegistry(cfg, agents.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer reg.Close() // once the server serves no more runs

	srv, err := service.New(service.Config{Agents: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	_ = srv // srv.Register(gs) mounts it on a grpc.Server
	for _, a := range reg.List() {
		var tools []string
		for _, ti := range a.Tools {
			tools = append(tools, ti.Source+":"+ti.Spec.Name)
		}
		fmt.Println(a.Name, a.Runtime.Model().Name(), tools)
	}
	// Output:
	// bench workload:small [workload:echo workload:add]
	// helper demo:agentd-demo [builtin:current_time builtin:calculate]
}
