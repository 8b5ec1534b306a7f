package service_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/servicetest"
)

// goAgent builds an agent in Go on model, with tools.
func goAgent(t *testing.T, name string, model runtime.Model, tools ...runtime.Tool) *runtime.Agent {
	t.Helper()
	a, err := runtime.New(runtime.Config{Name: name, Model: model, Tools: tools, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewAgents(t *testing.T) {
	zeta := &service.Agent{Runtime: goAgent(t, "zeta", &rt.Model{})}
	alpha := &service.Agent{Name: "alpha", Description: "First by name.", Runtime: goAgent(t, "a", &rt.Model{})}
	set, err := service.NewAgents(zeta, alpha)
	if err != nil {
		t.Fatal(err)
	}
	// The Agents are copied: what the caller changes afterwards is not served.
	alpha.Description = "changed"

	var names []string
	for _, a := range set.List() {
		names = append(names, a.Name+": "+a.Description)
	}
	if want := []string{"alpha: First by name.", "zeta: "}; !slices.Equal(names, want) {
		t.Errorf("List() = %q, want %q (sorted; an empty Name takes the Runtime's)", names, want)
	}
	set.List()[0] = nil
	if set.List()[0] == nil {
		t.Error("List() returned the set's own slice")
	}
	for name, want := range map[string]string{"": "zeta", "zeta": "zeta", "alpha": "alpha"} {
		if a, err := set.Agent(name); err != nil || a.Name != want {
			t.Errorf("Agent(%q) = %v, %v; want %s", name, a, err, want)
		}
	}
	_, err = set.Agent("nope")
	if !errors.Is(err, service.ErrAgentNotFound) || err.Error() != `agent not found: "nope"; agents: alpha, zeta` {
		t.Errorf("Agent(nope) error %v, want ErrAgentNotFound listing the agents", err)
	}
}

func TestNewAgentsErrors(t *testing.T) {
	r := goAgent(t, "one", &rt.Model{})
	unnamed := goAgent(t, "", &rt.Model{})
	for _, tt := range []struct {
		name string
		def  *service.Agent
		more []*service.Agent
		want string
	}{
		{"no default", nil, nil, "agent 0: no Runtime"},
		{"no runtime", &service.Agent{Name: "x"}, nil, "agent 0: no Runtime"},
		{"no name", &service.Agent{Runtime: unnamed}, nil, "agent 0: no name"},
		{"a name twice", &service.Agent{Runtime: r}, []*service.Agent{{Name: "two", Runtime: r}, {Name: "one", Runtime: r}}, `agent 2: the name "one" is taken`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := service.NewAgents(tt.def, tt.more...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestNewRequiresAgents(t *testing.T) {
	if _, err := service.New(service.Config{Logger: quietLog}); err == nil || !strings.Contains(err.Error(), "Config.Agents") {
		t.Errorf("New without Agents: %v, want an error naming Config.Agents", err)
	}
}

// A Go agent's tools are listed as its Runtime holds them unless the Agent describes
// them; a model override is allowed exactly when the Agent has Models.
func TestListAgentsGoAgents(t *testing.T) {
	look := rt.Tool("look", rt.Echo)
	slow := runtime.NewTool(runtime.ToolSpec{Name: "slow", Description: "Takes its time.", Timeout: 5 * time.Second}, rt.Echo)
	r, err := runtime.New(runtime.Config{
		Name: "derived", Model: &rt.Model{}, Tools: []runtime.Tool{look, slow}, MaxSteps: 7, Logger: quietLog,
		Policy: runtime.Policy{Tools: map[string]runtime.ToolPolicy{"slow": {Disabled: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	described := &service.Agent{
		Name: "described", Runtime: goAgent(t, "described", &rt.Model{}, look),
		Tools:  []service.ToolInfo{{Spec: look.Spec(), Source: "go", Timeout: time.Minute, Parallel: true}},
		Models: func(string) (runtime.Model, error) { return nil, errors.New("unused") },
	}
	set, err := service.NewAgents(&service.Agent{Runtime: r}, described)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := servicetest.NewClient(t, service.Config{Agents: set, Logger: quietLog, Config: runs.Config{ContinuationKey: testKey}}).ListAgents(t.Context(), &agentdv1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []*agentdv1.Agent{
		{
			Name: "derived", Model: "test:scripted", MaxSteps: 7, IsDefault: true,
			Tools: []*agentdv1.ToolInfo{
				{Spec: &agentdv1.ToolSpec{Name: "look", Description: "test tool look"}, Enabled: true},
				{Spec: &agentdv1.ToolSpec{Name: "slow", Description: "Takes its time."}, Timeout: durationpb.New(5 * time.Second)},
			},
		},
		{
			Name: "described", Model: "test:scripted", MaxSteps: 25, ModelOverrideAllowed: true,
			Tools: []*agentdv1.ToolInfo{{Spec: &agentdv1.ToolSpec{Name: "look", Description: "test tool look"}, Source: "go", Enabled: true, Timeout: durationpb.New(time.Minute), Parallel: true}},
		},
	}
	// The fields that ListAgents fills beyond these (such as each tool's parameters and
	// approval) are other tests' business.
	ignore := protocmp.IgnoreFields(&agentdv1.ToolSpec{}, "parameters")
	if diff := cmp.Diff(want, resp.GetAgents(), protocmp.Transform(), ignore, protocmp.IgnoreFields(&agentdv1.ToolInfo{}, "approval")); diff != "" {
		t.Errorf("ListAgents (-want +got):\n%s", diff)
	}
}

// A client's model override goes to the Agent's Models; without Models it is refused.
func TestModelOverrideGoAgents(t *testing.T) {
	other := &rt.Model{Steps: []rt.Step{rt.Say("from the other model")}}
	var asked []string
	open := &service.Agent{
		Name: "open", Runtime: goAgent(t, "open", &rt.Model{Steps: []rt.Step{rt.Say("from the agent's model")}}),
		Models: func(spec string) (runtime.Model, error) {
			asked = append(asked, spec)
			if spec != "other" {
				return nil, fmt.Errorf("no model %q here", spec)
			}
			return other, nil
		},
	}
	fixed := &service.Agent{Name: "fixed", Runtime: goAgent(t, "fixed", &rt.Model{})}
	set, err := service.NewAgents(fixed, open)
	if err != nil {
		t.Fatal(err)
	}
	c := servicetest.NewClient(t, service.Config{Agents: set, Logger: quietLog, Config: runs.Config{ContinuationKey: testKey}})
	run := func(agent, model string) (*agentdv1.ExecuteRunResponse, error) {
		return c.ExecuteRun(t.Context(), &agentdv1.ExecuteRunRequest{Start: &agentdv1.RunSpec{
			Agent: agent, Input: "hi", Config: &agentdv1.RunConfig{Model: model},
		}})
	}

	resp, err := run("open", "other")
	if err != nil || resp.GetResult().GetFinalText() != "from the other model" {
		t.Errorf("override to other: %v, %v; want the other model's answer", resp.GetResult().GetFinalText(), err)
	}
	_, err = run("open", "missing")
	if code, _, br := errorInfo(err); code != codes.InvalidArgument || len(br.GetFieldViolations()) != 1 ||
		br.GetFieldViolations()[0].GetField() != "start.config.model" || !strings.Contains(br.GetFieldViolations()[0].GetDescription(), `no model "missing" here`) {
		t.Errorf("override to a model Models refuses: %v, want INVALID_ARGUMENT on start.config.model with its error", err)
	}
	if !slices.Equal(asked, []string{"other", "missing"}) {
		t.Errorf("Models was asked for %q, want other, missing", asked)
	}
	_, err = run("fixed", "other")
	if code, reason, _ := errorInfo(err); code != codes.PermissionDenied || reason != "MODEL_OVERRIDE_NOT_ALLOWED" {
		t.Errorf("override on an agent without Models: %v (%s), want PERMISSION_DENIED MODEL_OVERRIDE_NOT_ALLOWED", err, reason)
	}
}

// Register installs the AgentService alone, beside the services a grpc.Server has
// already, the caller's health service among them; the Server reports its own name
// there, and leaves every other name to the caller.
func TestRegisterBesideTheCallersHealth(t *testing.T) {
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("example.Other", healthpb.HealthCheckResponse_SERVING)
	set, err := service.NewAgents(&service.Agent{Runtime: goAgent(t, "only", &rt.Model{})})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := service.New(service.Config{Agents: set, Health: hs, Logger: quietLog, Config: runs.Config{ContinuationKey: testKey}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(gs) // grpc-go panics on a second registration of a service
	defer gs.Stop()

	var services []string
	for name := range gs.GetServiceInfo() {
		services = append(services, name)
	}
	slices.Sort(services)
	if want := []string{"agentd.v1.AgentService", "grpc.health.v1.Health"}; !slices.Equal(services, want) {
		t.Errorf("services %q, want %q: Register adds the AgentService alone", services, want)
	}
	check := func(name string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := hs.Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatalf("Check(%q): %v", name, err)
		}
		return resp.GetStatus()
	}
	if got := check("agentd.v1.AgentService"); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("after Register: %v, want SERVING", got)
	}
	srv.Drain(time.Second)
	if got := check("agentd.v1.AgentService"); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after Drain: %v, want NOT_SERVING", got)
	}
	for _, name := range []string{"", "example.Other"} {
		if got := check(name); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) after Drain = %v, want the caller's SERVING untouched", name, got)
		}
	}
}

// Without a health service the Server registers and drains all the same.
func TestRegisterWithoutHealth(t *testing.T) {
	gs := grpc.NewServer()
	set, err := service.NewAgents(&service.Agent{Runtime: goAgent(t, "only", &rt.Model{})})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := service.New(service.Config{Agents: set, Logger: quietLog, Config: runs.Config{ContinuationKey: testKey}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(gs)
	srv.Drain(0)
	if _, ok := gs.GetServiceInfo()["grpc.health.v1.Health"]; ok {
		t.Error("Register installed a health service")
	}
}
