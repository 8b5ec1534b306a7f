package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks/remote"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

// guardRun runs an agent configured by cfg, with g as its hooks, as run_1 of thread_1 on
// msgs, and returns how the run finished.
func guardRun(t *testing.T, g runtime.Guardrail, cfg runtime.Config, msgs ...runtime.Message) *runtime.RunFinished {
	t.Helper()
	cfg.Name, cfg.Hooks = "test-agent", g
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	agent, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := &runtime.Request{RunID: "run_1", ThreadID: "thread_1", Messages: msgs, Metadata: map[string]any{"tenant": "acme"}}
	var fin *runtime.RunFinished
	for ev, err := range agent.Run(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := ev.(*runtime.RunFinished); ok {
			fin = f
		}
	}
	if fin == nil {
		t.Fatal("the run sent no RunFinished")
	}
	return fin
}

// guardRunInfo is the RunInfo of guardRun's runs, as a server receives it.
func guardRunInfo() *hooksv1.RunInfo {
	md, _ := structpb.NewStruct(map[string]any{"tenant": "acme"})
	return &hooksv1.RunInfo{RunId: "run_1", ThreadId: "thread_1", Agent: "test-agent", Model: "test:scripted", Metadata: md}
}

// guardTripped fails unless the run stopped with a *runtime.GuardrailError, and returns it.
func guardTripped(t *testing.T, fin *runtime.RunFinished) *runtime.GuardrailError {
	t.Helper()
	if fin.Reason != runtime.EndStopped {
		t.Fatalf("run finished %v (%v), want stopped by a guardrail", fin.Reason, fin.Err)
	}
	ge, ok := errors.AsType[*runtime.GuardrailError](fin.Err)
	if !ok {
		t.Fatalf("run error %T %v, want a *runtime.GuardrailError", fin.Err, fin.Err)
	}
	return ge
}

// guardCompleted fails unless the run completed with the text want.
func guardCompleted(t *testing.T, fin *runtime.RunFinished, want string) {
	t.Helper()
	if fin.Reason != runtime.EndCompleted || fin.FinalText != want {
		t.Fatalf("run finished %v %q (%v), want completed with %q", fin.Reason, fin.FinalText, fin.Err, want)
	}
}

// guardRequests returns the GuardRequests srv received, in order.
func guardRequests(srv *hookServer) []*hooksv1.GuardRequest {
	var out []*hooksv1.GuardRequest
	for _, r := range srv.requests() {
		if gr, ok := r.(*hooksv1.GuardRequest); ok {
			out = append(out, gr)
		}
	}
	return out
}

// tripOn answers Guard with a trip, its reason and a rule's name as details, when the
// checked text holds word, and passes otherwise.
func tripOn(word, reason string) func(context.Context, *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error) {
	return func(_ context.Context, req *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error) {
		if !strings.Contains(req.GetText(), word) {
			return &hooksv1.GuardResponse{}, nil
		}
		return &hooksv1.GuardResponse{Tripped: true, Reason: reason, Details: map[string]string{"rule": "secrets"}}, nil
	}
}

// userText is a user message of text as a server receives it.
func userText(text string) *agentdv1.Message {
	return &agentdv1.Message{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: text}}}}
}

func TestGuardrail_InputTrips(t *testing.T) {
	srv := &hookServer{guard: tripOn("password", "the input holds a password")}
	g := remote.NewGuardrail(serve(t, srv), runtime.GuardSpec{Name: "secrets", Stages: runtime.GuardInput})
	m := &rt.Model{Steps: []rt.Step{rt.Say("ok")}}
	fin := guardRun(t, g, runtime.Config{Model: m}, runtime.UserMessage("hi"), runtime.UserMessage("my password is hunter2"))

	ge := guardTripped(t, fin)
	want := &runtime.GuardrailError{Guardrail: "secrets", Stage: runtime.GuardInput, Reason: "the input holds a password", Details: map[string]string{"rule": "secrets"}}
	if diff := cmp.Diff(want, ge); diff != "" {
		t.Errorf("trip (-want +got):\n%s", diff)
	}
	if m.Calls() != 0 {
		t.Errorf("the model was called %d times after the input tripped", m.Calls())
	}
	wantReqs := []*hooksv1.GuardRequest{{
		Run: guardRunInfo(), Guardrail: "secrets", Stage: hooksv1.GuardStage_GUARD_STAGE_INPUT,
		Text:     "hi\nmy password is hunter2",
		Messages: []*agentdv1.Message{userText("hi"), userText("my password is hunter2")},
	}}
	if diff := cmp.Diff(wantReqs, guardRequests(srv), protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestGuardrail_ParallelInputCancelsTheModel(t *testing.T) {
	srv := &hookServer{guard: tripOn("password", "the input holds a password")}
	g := remote.NewGuardrail(serve(t, srv), runtime.GuardSpec{Name: "secrets", Stages: runtime.GuardInput, Parallel: true})
	m := &rt.Model{Steps: []rt.Step{{Events: []runtime.ModelEvent{rt.Text("Sure")}, Block: true}}}
	fin := guardRun(t, g, runtime.Config{Model: m}, runtime.UserMessage("my password is hunter2"))
	if ge := guardTripped(t, fin); ge.Guardrail != "secrets" || ge.Reason != "the input holds a password" {
		t.Errorf("tripped %s: %q, want secrets with the server's reason", ge.Guardrail, ge.Reason)
	}
}

func TestGuardrail_ToolOutputCorrects(t *testing.T) {
	srv := &hookServer{guard: tripOn("s3cr3t", "the result holds a secret")}
	g := remote.NewGuardrail(serve(t, srv), runtime.GuardSpec{Name: "secrets", Stages: runtime.GuardToolOutput, OnToolTrip: runtime.GuardCorrect})
	vault := rt.Tool("vault", func(context.Context, runtime.ToolCall) (runtime.Output, error) {
		return runtime.Output{JSON: []byte(`{"key":"s3cr3t"}`)}, nil
	})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "lookup", `{"q":"a"}`, "vault", `{"q":"b"}`), rt.Say("ok")}}
	fin := guardRun(t, g, runtime.Config{Model: m, Tools: []runtime.Tool{rt.Tool("lookup", rt.Echo), vault}}, runtime.UserMessage("go"))
	guardCompleted(t, fin, "ok")

	// The model's second call reads lookup's result, and an error in place of vault's.
	reqs := m.Requests()
	seen := map[string]runtime.Output{}
	for _, msg := range reqs[len(reqs)-1].Messages {
		for _, p := range msg.Parts {
			if p.Kind == runtime.PartToolResult {
				seen[p.ToolResult.CallID] = p.ToolResult.Output
			}
		}
	}
	if got := seen["call_0_0"]; got.IsError || got.String() != `{"q":"a"}` {
		t.Errorf("lookup's result %+v, want its echo", got)
	}
	if got := seen["call_0_1"]; !got.IsError || !strings.Contains(got.Text, "withheld by the guardrail secrets: the result holds a secret") || strings.Contains(got.Text, "s3cr3t") {
		t.Errorf("vault's result %+v, want an error naming the guardrail and its reason", got)
	}

	got := guardRequests(srv)
	slices.SortFunc(got, func(a, b *hooksv1.GuardRequest) int { return strings.Compare(a.GetToolCallId(), b.GetToolCallId()) })
	jsonValue := func(s string) *hooksv1.ToolOutput {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		pv, err := structpb.NewValue(v)
		if err != nil {
			t.Fatal(err)
		}
		return &hooksv1.ToolOutput{Output: &hooksv1.ToolOutput_Json{Json: pv}}
	}
	want := []*hooksv1.GuardRequest{{
		Run: guardRunInfo(), Guardrail: "secrets", Stage: hooksv1.GuardStage_GUARD_STAGE_TOOL_OUTPUT, Text: `{"q":"a"}`,
		ToolCallId: "call_0_0", ToolName: "lookup", ArgumentsJson: `{"q":"a"}`, Result: jsonValue(`{"q":"a"}`),
	}, {
		Run: guardRunInfo(), Guardrail: "secrets", Stage: hooksv1.GuardStage_GUARD_STAGE_TOOL_OUTPUT, Text: `{"key":"s3cr3t"}`,
		ToolCallId: "call_0_1", ToolName: "vault", ArgumentsJson: `{"q":"b"}`, Result: jsonValue(`{"key":"s3cr3t"}`),
	}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestGuardrail_ToolInput(t *testing.T) {
	m := func() *rt.Model {
		return &rt.Model{Steps: []rt.Step{rt.Call(0, "shell", `{"cmd":"rm -rf /"}`), rt.Say("ok")}}
	}
	spec := runtime.GuardSpec{Name: "rm", Stages: runtime.GuardToolInput}

	t.Run("pass", func(t *testing.T) {
		srv := &hookServer{}
		fin := guardRun(t, remote.NewGuardrail(serve(t, srv), spec), runtime.Config{Model: m(), Tools: []runtime.Tool{rt.Tool("shell", rt.Echo)}}, runtime.UserMessage("go"))
		guardCompleted(t, fin, "ok")
		want := []*hooksv1.GuardRequest{{
			Run: guardRunInfo(), Guardrail: "rm", Stage: hooksv1.GuardStage_GUARD_STAGE_TOOL_INPUT, Text: `{"cmd":"rm -rf /"}`,
			ToolCallId: "call_0_0", ToolName: "shell", ArgumentsJson: `{"cmd":"rm -rf /"}`,
		}}
		if diff := cmp.Diff(want, guardRequests(srv), protocmp.Transform()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
	t.Run("trip", func(t *testing.T) {
		ran := false
		shell := rt.Tool("shell", func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
			ran = true
			return rt.Echo(ctx, call)
		})
		srv := &hookServer{guard: tripOn("rm -rf", "no deleting everything")}
		fin := guardRun(t, remote.NewGuardrail(serve(t, srv), spec), runtime.Config{Model: m(), Tools: []runtime.Tool{shell}}, runtime.UserMessage("go"))
		ge := guardTripped(t, fin)
		if ge.Stage != runtime.GuardToolInput || ge.Tool != "shell" || ge.CallID != "call_0_0" || ge.Reason != "no deleting everything" {
			t.Errorf("trip %+v, want rm's at the tool input of shell's call_0_0", ge)
		}
		if ran {
			t.Error("the tool ran though its input tripped the guardrail")
		}
	})
}

func TestGuardrail_OutputOfATypedRun(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"],"additionalProperties":false}`
	srv := &hookServer{}
	g := remote.NewGuardrail(serve(t, srv), runtime.GuardSpec{Name: "real", Stages: runtime.GuardOutput})
	m := &rt.Model{Steps: []rt.Step{rt.Call(0, "final_answer", `{"city":"Oslo","celsius":-3}`)}}
	fin := guardRun(t, g, runtime.Config{Model: m, OutputSchema: json.RawMessage(schema)}, runtime.UserMessage("weather in Oslo?"))
	if fin.Reason != runtime.EndCompleted || string(fin.Output) != `{"city":"Oslo","celsius":-3}` {
		t.Fatalf("run finished %v with %s (%v), want completed with the answer", fin.Reason, fin.Output, fin.Err)
	}
	output, _ := structpb.NewValue(map[string]any{"city": "Oslo", "celsius": -3})
	want := []*hooksv1.GuardRequest{{
		Run: guardRunInfo(), Guardrail: "real", Stage: hooksv1.GuardStage_GUARD_STAGE_OUTPUT, Text: `{"city":"Oslo","celsius":-3}`, Output: output,
	}}
	if diff := cmp.Diff(want, guardRequests(srv), protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestGuardrail_FailuresTrip(t *testing.T) {
	blocked := func(ctx context.Context, _ *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error) {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	for _, tc := range []struct {
		name string
		srv  hooksv1.HookServiceServer // nil: unreachable
		opts []remote.Option
		want string
	}{{
		name: "error status",
		srv: &hookServer{guard: func(context.Context, *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error) {
			return nil, status.Error(codes.Internal, "policy store down")
		}},
		want: "the guardrail could not check: Internal: policy store down",
	}, {
		name: "no answer within the timeout",
		srv:  &hookServer{guard: blocked},
		opts: []remote.Option{remote.WithTimeout(20 * time.Millisecond)},
		want: "the guardrail could not check: no answer within 20ms",
	}, {
		name: "unreachable",
		want: "the guardrail could not check: unreachable: ",
	}, {
		name: "unimplemented",
		srv:  unimplemented{},
		want: "the guardrail could not check: Unimplemented: ",
	}} {
		for _, failOpen := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fail open %v", tc.name, failOpen), func(t *testing.T) {
				spec := runtime.GuardSpec{Name: "secrets", Stages: runtime.GuardInput, FailOpen: failOpen}
				g := remote.NewGuardrail(serve(t, tc.srv), spec, tc.opts...)
				m := &rt.Model{Steps: []rt.Step{rt.Say("ok")}}
				fin := guardRun(t, g, runtime.Config{Model: m}, runtime.UserMessage("hi"))
				if failOpen {
					guardCompleted(t, fin, "ok")
					return
				}
				ge := guardTripped(t, fin)
				if ge.Guardrail != "secrets" || !strings.HasPrefix(ge.Reason, tc.want) {
					t.Errorf("tripped %s: %q, want secrets with a reason starting %q", ge.Guardrail, ge.Reason, tc.want)
				}
				if m.Calls() != 0 {
					t.Errorf("the model was called %d times though the guardrail could not check", m.Calls())
				}
			})
		}
	}
}

func TestGuardrail_ResponseLimits(t *testing.T) {
	details := func(n, keyLen, valueLen int) map[string]string {
		d := map[string]string{}
		for i := range n {
			d[fmt.Sprintf("%0*d", keyLen, i)] = strings.Repeat("v", valueLen)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		resp *hooksv1.GuardResponse
		// want is the trip's reason.
		want string
	}{{
		name: "at the limits",
		resp: &hooksv1.GuardResponse{Tripped: true, Reason: strings.Repeat("r", 4096), Details: details(16, 256, 256)},
		want: strings.Repeat("r", 4096),
	}, {
		name: "17 details",
		resp: &hooksv1.GuardResponse{Tripped: true, Reason: "too many", Details: details(17, 1, 1)},
		want: "the guardrail could not check: invalid response: 17 details; at most 16",
	}, {
		name: "a long key",
		resp: &hooksv1.GuardResponse{Tripped: true, Details: details(1, 257, 1)},
		want: "the guardrail could not check: invalid response: a details key of 257 bytes; at most 256",
	}, {
		name: "a long value",
		resp: &hooksv1.GuardResponse{Tripped: true, Details: details(1, 1, 257)},
		want: `the guardrail could not check: invalid response: details["0"] is 257 bytes; at most 256`,
	}, {
		name: "a long reason",
		resp: &hooksv1.GuardResponse{Tripped: true, Reason: strings.Repeat("r", 4097)},
		want: "the guardrail could not check: invalid response: the reason is 4097 bytes; at most 4096",
	}, {
		name: "invalid though not tripped",
		resp: &hooksv1.GuardResponse{Details: details(17, 1, 1)},
		want: "the guardrail could not check: invalid response: 17 details; at most 16",
	}, {
		name: "tripped without a reason",
		resp: &hooksv1.GuardResponse{Tripped: true},
		want: "tripped",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &hookServer{guard: func(context.Context, *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error) { return tc.resp, nil }}
			g := remote.NewGuardrail(serve(t, srv), runtime.GuardSpec{Name: "secrets", Stages: runtime.GuardInput})
			fin := guardRun(t, g, runtime.Config{Model: &rt.Model{Steps: []rt.Step{rt.Say("ok")}}}, runtime.UserMessage("hi"))
			ge := guardTripped(t, fin)
			if ge.Reason != tc.want {
				t.Errorf("reason %.80q, want %.80q", ge.Reason, tc.want)
			}
			wantDetails := tc.resp.GetDetails()
			if strings.HasPrefix(tc.want, "the guardrail could not check") {
				wantDetails = nil
			}
			if diff := cmp.Diff(wantDetails, ge.Details, cmpEmptyMaps); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpEmptyMaps makes a nil map equal to an empty one.
var cmpEmptyMaps = cmp.FilterValues(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestGuardrail_Name(t *testing.T) {
	conn := serve(t, &hookServer{})
	for _, tc := range []struct {
		name string
		g    func(t *testing.T) *remote.Guardrail
		want string
	}{
		{"the spec's", func(*testing.T) *remote.Guardrail {
			return remote.NewGuardrail(conn, runtime.GuardSpec{Name: "pii"}, remote.WithName("other"))
		}, "pii"},
		{"WithName's", func(*testing.T) *remote.Guardrail {
			return remote.NewGuardrail(conn, runtime.GuardSpec{}, remote.WithName("pii"))
		}, "pii"},
		{"the connection's target", func(*testing.T) *remote.Guardrail {
			return remote.NewGuardrail(conn, runtime.GuardSpec{})
		}, "passthrough:///hooks"},
		{"the dialled target", func(t *testing.T) *remote.Guardrail {
			g, err := remote.DialGuardrail("unix:///run/agentd/guard.sock", runtime.GuardSpec{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			return g
		}, "unix:///run/agentd/guard.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.g(t).Guard().Name; got != tc.want {
				t.Errorf("Guard().Name = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDialGuardrail(t *testing.T) {
	for _, target := range []string{"dns:///guard.example.com:443", "10.0.0.7:7070", "guard.internal:7070"} {
		g, err := remote.DialGuardrail(target, runtime.GuardSpec{Name: "pii", Stages: runtime.GuardInput})
		if !errors.Is(err, remote.ErrPlaintext) || g != nil {
			t.Errorf("DialGuardrail(%q) = %v, %v; want an error wrapping ErrPlaintext", target, g, err)
		}
	}

	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	srv := &hookServer{guard: tripOn("password", "the input holds a password")}
	hooksv1.RegisterHookServiceServer(gs, srv)
	go gs.Serve(lis)
	defer gs.Stop()
	g, err := remote.DialGuardrail("passthrough:///guard", runtime.GuardSpec{Stages: runtime.GuardInput},
		remote.WithDialOptions(
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	fin := guardRun(t, g, runtime.Config{Model: &rt.Model{Steps: []rt.Step{rt.Say("ok")}}}, runtime.UserMessage("my password is hunter2"))
	if err := g.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if ge := guardTripped(t, fin); ge.Guardrail != "passthrough:///guard" || ge.Reason != "the input holds a password" {
		t.Errorf("tripped %s: %q, want the guardrail named by its target with the server's reason", ge.Guardrail, ge.Reason)
	}
	if reqs := guardRequests(srv); len(reqs) != 1 || reqs[0].GetGuardrail() != "passthrough:///guard" {
		t.Errorf("requests %v, want one for the guardrail named by its target", reqs)
	}
}

// noPasswords is a hook server's guardrail. It is written in Go here; any language with
// gRPC stubs for agentd.hooks.v1.HookService will do.
type noPasswords struct {
	hooksv1.UnimplementedHookServiceServer
}

func (noPasswords) Guard(_ context.Context, req *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error) {
	if req.GetStage() == hooksv1.GuardStage_GUARD_STAGE_INPUT && strings.Contains(req.GetText(), "password") {
		return &hooksv1.GuardResponse{Tripped: true, Reason: "passwords stay out of the transcript", Details: map[string]string{"rule": "password"}}, nil
	}
	return &hooksv1.GuardResponse{}, nil
}

func ExampleDialGuardrail() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	hooksv1.RegisterHookServiceServer(srv, noPasswords{})
	go srv.Serve(lis)
	defer srv.Stop()

	// agentd's side: the guardrail checks the user's input, and trips when its server
	// does not answer within half a second.
	g, err := remote.DialGuardrail(lis.Addr().String(),
		runtime.GuardSpec{Name: "no-passwords", Stages: runtime.GuardInput},
		remote.WithTimeout(500*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer g.Close()

	agent, err := runtime.New(runtime.Config{Model: &rt.Model{Steps: []rt.Step{rt.Say("Noted.")}}, Hooks: g})
	if err != nil {
		panic(err)
	}
	req := &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("my password is hunter2")}}
	for ev, err := range agent.Run(context.Background(), req) {
		if err != nil {
			panic(err)
		}
		if fin, ok := ev.(*runtime.RunFinished); ok {
			ge, _ := errors.AsType[*runtime.GuardrailError](fin.Err)
			fmt.Println(fin.Reason, "-", ge, ge.Details)
		}
	}
	// Output:
	// stopped - guardrail no-passwords tripped at input: passwords stay out of the transcript map[rule:password]
}
