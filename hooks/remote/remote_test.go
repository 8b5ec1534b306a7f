package remote_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/hooks/remote"
	"github.com/agentd/agentd/runtime"
	rt "github.com/agentd/agentd/runtime/runtimetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// hookServer is a HookService written in Go, with func fields; an unset one answers
// with an empty response (continue). It records the requests it received.
type hookServer struct {
	hooksv1.UnimplementedHookServiceServer
	beforeRun   func(context.Context, *hooksv1.BeforeRunRequest) (*hooksv1.BeforeRunResponse, error)
	beforeModel func(context.Context, *hooksv1.BeforeModelRequest) (*hooksv1.BeforeModelResponse, error)
	afterModel  func(context.Context, *hooksv1.AfterModelRequest) (*hooksv1.AfterModelResponse, error)
	beforeTool  func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error)
	afterTool   func(context.Context, *hooksv1.AfterToolRequest) (*hooksv1.AfterToolResponse, error)
	afterRun    func(context.Context, *hooksv1.AfterRunRequest) (*hooksv1.AfterRunResponse, error)
	guard       func(context.Context, *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error)

	mu       sync.Mutex
	received []proto.Message
}

func handle[Req proto.Message, Resp any](s *hookServer, ctx context.Context, f func(context.Context, Req) (*Resp, error), req Req) (*Resp, error) {
	s.mu.Lock()
	s.received = append(s.received, req)
	s.mu.Unlock()
	if f == nil {
		return new(Resp), nil
	}
	return f(ctx, req)
}

func (s *hookServer) BeforeRun(ctx context.Context, req *hooksv1.BeforeRunRequest) (*hooksv1.BeforeRunResponse, error) {
	return handle(s, ctx, s.beforeRun, req)
}

func (s *hookServer) BeforeModel(ctx context.Context, req *hooksv1.BeforeModelRequest) (*hooksv1.BeforeModelResponse, error) {
	return handle(s, ctx, s.beforeModel, req)
}

func (s *hookServer) AfterModel(ctx context.Context, req *hooksv1.AfterModelRequest) (*hooksv1.AfterModelResponse, error) {
	return handle(s, ctx, s.afterModel, req)
}

func (s *hookServer) BeforeTool(ctx context.Context, req *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
	return handle(s, ctx, s.beforeTool, req)
}

func (s *hookServer) AfterTool(ctx context.Context, req *hooksv1.AfterToolRequest) (*hooksv1.AfterToolResponse, error) {
	return handle(s, ctx, s.afterTool, req)
}

func (s *hookServer) AfterRun(ctx context.Context, req *hooksv1.AfterRunRequest) (*hooksv1.AfterRunResponse, error) {
	return handle(s, ctx, s.afterRun, req)
}

func (s *hookServer) Guard(ctx context.Context, req *hooksv1.GuardRequest) (*hooksv1.GuardResponse, error) {
	return handle(s, ctx, s.guard, req)
}

// requests returns the requests received, in order.
func (s *hookServer) requests() []proto.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]proto.Message(nil), s.received...)
}

// serve serves srv over bufconn and returns a connection to it; everything stops with
// t.Cleanup. A nil srv leaves the listener closed: the server is unreachable.
func serve(t *testing.T, srv hooksv1.HookServiceServer) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	if srv == nil {
		lis.Close()
	} else {
		gs := grpc.NewServer()
		hooksv1.RegisterHookServiceServer(gs, srv)
		served := make(chan error, 1)
		go func() { served <- gs.Serve(lis) }()
		t.Cleanup(func() {
			gs.Stop()
			if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	conn, err := grpc.NewClient("passthrough:///hooks",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// result is what a run did.
type result struct {
	fin    *runtime.RunFinished
	events []runtime.Event
	model  *rt.Model
	// calls are the arguments the tool ran with.
	calls []string
}

// hookEvents returns the run's HookEvents.
func (r result) hookEvents() []runtime.HookEvent {
	var out []runtime.HookEvent
	for _, ev := range r.events {
		if he, ok := ev.(*runtime.HookEvent); ok {
			out = append(out, *he)
		}
	}
	return out
}

// toolResult returns the result of call_0_0 as the run recorded it.
func (r result) toolResult(t *testing.T) runtime.Output {
	t.Helper()
	for _, m := range r.fin.NewMessages {
		for _, p := range m.Parts {
			if p.Kind == runtime.PartToolResult && p.ToolResult.CallID == "call_0_0" {
				return p.ToolResult.Output
			}
		}
	}
	t.Fatal("no result for call_0_0 in the run's new messages")
	return runtime.Output{}
}

// run runs an agent whose scripted model calls tool t with {"a":1}, then says "ok", with
// h as the agent's hooks. The tool echoes its arguments.
func run(t *testing.T, h runtime.Hooks) result {
	t.Helper()
	res := result{model: &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"a":1}`), rt.Say("ok")}}}
	tool := rt.Tool("t", func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
		res.calls = append(res.calls, call.Arguments)
		return rt.Echo(ctx, call)
	})
	agent, err := runtime.New(runtime.Config{Name: "test-agent", Model: res.model, Tools: []runtime.Tool{tool}, Hooks: h, System: "be brief"})
	if err != nil {
		t.Fatal(err)
	}
	req := &runtime.Request{
		RunID: "run_1", ThreadID: "thread_1",
		Messages: []runtime.Message{runtime.UserMessage("go")},
		Metadata: map[string]any{"tenant": "acme"},
	}
	for ev, err := range agent.Run(t.Context(), req) {
		if err != nil {
			t.Fatal(err)
		}
		res.events = append(res.events, ev)
		if fin, ok := ev.(*runtime.RunFinished); ok {
			res.fin = fin
		}
	}
	return res
}

// wantCompleted fails unless the run completed with the model's "ok".
func wantCompleted(t *testing.T, res result) {
	t.Helper()
	if res.fin.Reason != runtime.EndCompleted || res.fin.FinalText != "ok" {
		t.Fatalf("run finished %v %q (%v), want completed with \"ok\"", res.fin.Reason, res.fin.FinalText, res.fin.Err)
	}
}

// wantStopped fails unless the run stopped with a StopError from the remote hook whose
// reason contains reason, and returns it.
func wantStopped(t *testing.T, res result, reason string) *runtime.StopError {
	t.Helper()
	if res.fin.Reason != runtime.EndStopped {
		t.Fatalf("run finished %v (%v), want stopped", res.fin.Reason, res.fin.Err)
	}
	se, ok := errors.AsType[*runtime.StopError](res.fin.Err)
	if !ok {
		t.Fatalf("run error %T %v, want a *runtime.StopError", res.fin.Err, res.fin.Err)
	}
	if se.Hook != "remote:passthrough:///hooks" || !strings.Contains(se.Reason, reason) {
		t.Errorf("stopped by %q: %q, want remote:passthrough:///hooks with a reason containing %q", se.Hook, se.Reason, reason)
	}
	return se
}

func TestBeforeTool_AllowSendsTheCallAndTheRun(t *testing.T) {
	srv := &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
		return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_CONTINUE}, nil
	}}
	res := run(t, remote.New(serve(t, srv)))
	wantCompleted(t, res)
	if diff := cmp.Diff([]string{`{"a":1}`}, res.calls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	md, _ := structpb.NewStruct(map[string]any{"tenant": "acme"})
	info := &hooksv1.RunInfo{RunId: "run_1", ThreadId: "thread_1", Agent: "test-agent", Model: "test:scripted", Metadata: md}
	want := []proto.Message{
		&hooksv1.BeforeToolRequest{Run: info, ToolCallId: "call_0_0", ToolName: "t", ArgumentsJson: `{"a":1}`, Executor: agentdv1.Executor_EXECUTOR_SERVER},
		&hooksv1.AfterToolRequest{Run: info, ToolCallId: "call_0_0", ToolName: "t", ArgumentsJson: `{"a":1}`,
			Output: &hooksv1.ToolOutput{Output: &hooksv1.ToolOutput_Json{Json: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewNumberValue(1)}})}}},
	}
	if diff := cmp.Diff(want, srv.requests(), protocmp.Transform(), protocmp.IgnoreFields(&hooksv1.AfterToolRequest{}, "duration")); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestBeforeTool_RewriteArguments(t *testing.T) {
	srv := &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
		return &hooksv1.BeforeToolResponse{ArgumentsJson: proto.String(`{"a":2}`)}, nil
	}}
	res := run(t, remote.New(serve(t, srv)))
	wantCompleted(t, res)
	if diff := cmp.Diff([]string{`{"a":2}`}, res.calls); diff != "" {
		t.Errorf("the tool ran with (-want +got):\n%s", diff)
	}
	var recorded []string
	for _, m := range res.fin.NewMessages {
		for _, c := range m.ToolCalls() {
			recorded = append(recorded, c.Arguments)
		}
	}
	if diff := cmp.Diff([]string{`{"a":2}`}, recorded); diff != "" {
		t.Errorf("the transcript records (-want +got):\n%s", diff)
	}
	if got := res.toolResult(t).String(); got != `{"a":2}` {
		t.Errorf("result %s, want the echo of the new arguments", got)
	}
}

func TestBeforeTool_Deny(t *testing.T) {
	srv := &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
		return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_DENY, Reason: "t is not for tenant acme"}, nil
	}}
	res := run(t, remote.New(serve(t, srv)))
	wantCompleted(t, res)
	if len(res.calls) != 0 {
		t.Errorf("the denied tool ran with %v", res.calls)
	}
	out := res.toolResult(t)
	if !out.IsError || !strings.Contains(out.Text, "denied: t is not for tenant acme") {
		t.Errorf("result %+v, want an error result with the reason", out)
	}
}

func TestBeforeTool_Answer(t *testing.T) {
	srv := &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
		v, _ := structpb.NewValue(map[string]any{"cached": true})
		return &hooksv1.BeforeToolResponse{
			Decision: hooksv1.Decision_DECISION_ANSWER,
			Answer:   &hooksv1.ToolOutput{Output: &hooksv1.ToolOutput_Json{Json: v}},
		}, nil
	}}
	res := run(t, remote.New(serve(t, srv)))
	wantCompleted(t, res)
	if len(res.calls) != 0 {
		t.Errorf("the tool ran with %v though the hook answered", res.calls)
	}
	// The model's second call sees the answer as the call's result.
	reqs := res.model.Requests()
	last := reqs[len(reqs)-1].Messages
	got := last[len(last)-1].Parts[0].ToolResult.Output
	if got.String() != `{"cached":true}` || got.IsError {
		t.Errorf("the model saw %+v, want the hook's answer", got)
	}
}

func TestBeforeTool_Stop(t *testing.T) {
	srv := &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
		return &hooksv1.BeforeToolResponse{
			Decision: hooksv1.Decision_DECISION_STOP,
			Reason:   "budget exhausted",
			Events:   []*agentdv1.HookEvent{{Name: "budget.exhausted", Value: structpb.NewNumberValue(100)}},
		}, nil
	}}
	res := run(t, remote.New(serve(t, srv)))
	se := wantStopped(t, res, "budget exhausted")
	if se.Reason != "budget exhausted" {
		t.Errorf("reason %q, want the hook's own", se.Reason)
	}
	if len(res.calls) != 0 {
		t.Errorf("the tool ran with %v though the run stopped", res.calls)
	}
	if diff := cmp.Diff([]runtime.HookEvent{{Name: "budget.exhausted", Value: 100.0}}, res.hookEvents()); diff != "" {
		t.Errorf("hook events (-want +got):\n%s", diff)
	}
}

// slowServer answers BeforeTool only after a minute, or when the call is given up.
func slowServer() *hookServer {
	return &hookServer{beforeTool: func(ctx context.Context, _ *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(time.Minute):
			return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_DENY, Reason: "too late"}, nil
		}
	}}
}

func TestBeforeTool_SlowFailOpenGoesOnAfterTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		h := remote.New(serve(t, slowServer()), remote.WithTimeout(500*time.Millisecond), remote.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		start := time.Now()
		res := run(t, h)
		wantCompleted(t, res)
		if took := time.Since(start); took != 500*time.Millisecond {
			t.Errorf("the run took %v, want the hook's timeout of 500ms", took)
		}
		if diff := cmp.Diff([]string{`{"a":1}`}, res.calls); diff != "" {
			t.Errorf("fail-open: the tool ran with (-want +got):\n%s", diff)
		}
		if !strings.Contains(logs.String(), "fail-open") || !strings.Contains(logs.String(), "point=BeforeTool") {
			t.Errorf("logged %q, want a fail-open warning for BeforeTool", logs.String())
		}
	})
}

func TestBeforeTool_SlowFailClosedStopsAfterTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := remote.New(serve(t, slowServer()), remote.WithFailClosed(true), remote.WithLogger(slog.New(slog.DiscardHandler)))
		start := time.Now()
		res := run(t, h)
		if took := time.Since(start); took != remote.DefaultTimeout {
			t.Errorf("the run took %v, want the default timeout of %v", took, remote.DefaultTimeout)
		}
		wantStopped(t, res, "hook unreachable: BeforeTool: no answer within 2s")
		if len(res.calls) != 0 {
			t.Errorf("fail-closed: the tool ran with %v", res.calls)
		}
	})
}

func TestUnreachable(t *testing.T) {
	t.Run("fail-open", func(t *testing.T) {
		var logs bytes.Buffer
		res := run(t, remote.New(serve(t, nil), remote.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))))
		wantCompleted(t, res)
		if diff := cmp.Diff([]string{`{"a":1}`}, res.calls); diff != "" {
			t.Errorf("the tool ran with (-want +got):\n%s", diff)
		}
		if got := strings.Count(logs.String(), "fail-open"); got != 2 {
			t.Errorf("logged %d fail-open warnings, want 2 (BeforeTool, AfterTool):\n%s", got, logs.String())
		}
	})
	t.Run("fail-closed", func(t *testing.T) {
		res := run(t, remote.New(serve(t, nil), remote.WithFailClosed(true), remote.WithLogger(slog.New(slog.DiscardHandler))))
		wantStopped(t, res, "hook unreachable: BeforeTool")
		if len(res.calls) != 0 {
			t.Errorf("the tool ran with %v", res.calls)
		}
	})
}

func TestFailures_FailClosed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		srv    hooksv1.HookServiceServer
		points []remote.Point
		want   string
	}{{
		name: "error status",
		srv: &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
			return nil, status.Error(codes.Internal, "policy store down")
		}},
		want: "hook failed: BeforeTool: Internal: policy store down",
	}, {
		name:   "unimplemented point",
		srv:    unimplemented{},
		points: []remote.Point{remote.BeforeRun},
		want:   "hook failed: BeforeRun: Unimplemented",
	}, {
		name: "decision the point does not accept",
		srv: &hookServer{afterTool: func(context.Context, *hooksv1.AfterToolRequest) (*hooksv1.AfterToolResponse, error) {
			return &hooksv1.AfterToolResponse{Decision: hooksv1.Decision_DECISION_DENY}, nil
		}},
		want: "hook failed: AfterTool: invalid response: decision DECISION_DENY is not accepted at AfterTool",
	}, {
		name: "unknown decision",
		srv: &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
			return &hooksv1.BeforeToolResponse{Decision: 99}, nil
		}},
		want: "hook failed: BeforeTool: invalid response: unknown decision 99",
	}, {
		name: "event without a name",
		srv: &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
			return &hooksv1.BeforeToolResponse{Events: []*agentdv1.HookEvent{{}}}, nil
		}},
		want: "hook failed: BeforeTool: invalid response: events[0] has no name",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []remote.Option{remote.WithFailClosed(true), remote.WithLogger(slog.New(slog.DiscardHandler))}
			if tc.points != nil {
				opts = append(opts, remote.WithPoints(tc.points...))
			}
			res := run(t, remote.New(serve(t, tc.srv), opts...))
			wantStopped(t, res, tc.want)
		})
	}
}

// unimplemented answers every RPC with UNIMPLEMENTED.
type unimplemented struct {
	hooksv1.UnimplementedHookServiceServer
}

func TestAfterTool_RewritesTheResultAndEmits(t *testing.T) {
	srv := &hookServer{afterTool: func(_ context.Context, req *hooksv1.AfterToolRequest) (*hooksv1.AfterToolResponse, error) {
		return &hooksv1.AfterToolResponse{
			Output: &hooksv1.ToolOutput{Output: &hooksv1.ToolOutput_Text{Text: "[redacted]"}},
			Events: []*agentdv1.HookEvent{{Name: "dlp.redacted", Value: structpb.NewStringValue(req.GetToolCallId())}},
		}, nil
	}}
	res := run(t, remote.New(serve(t, srv)))
	wantCompleted(t, res)
	if got := res.toolResult(t); got.String() != "[redacted]" || got.IsError {
		t.Errorf("result %+v, want the hook's rewrite", got)
	}
	if diff := cmp.Diff([]runtime.HookEvent{{Name: "dlp.redacted", Value: "call_0_0"}}, res.hookEvents()); diff != "" {
		t.Errorf("hook events (-want +got):\n%s", diff)
	}
}

func TestBeforeModel_ReplacesTheSystemPromptAndAppendsForThisCallOnly(t *testing.T) {
	srv := &hookServer{beforeModel: func(_ context.Context, req *hooksv1.BeforeModelRequest) (*hooksv1.BeforeModelResponse, error) {
		if req.GetStep() != 0 {
			return &hooksv1.BeforeModelResponse{}, nil
		}
		return &hooksv1.BeforeModelResponse{
			SystemPrompt: proto.String("be very brief"),
			AppendMessages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{
				{Kind: &agentdv1.Part_Text{Text: "remember: tenant acme"}},
			}}},
		}, nil
	}}
	res := run(t, remote.New(serve(t, srv), remote.WithPoints(remote.BeforeModel)))
	wantCompleted(t, res)
	reqs := res.model.Requests()
	render := func(ms []runtime.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Role.String()+": "+m.Text())
		}
		return out
	}
	if diff := cmp.Diff([]string{"system: be very brief", "user: go", "user: remember: tenant acme"}, render(reqs[0].Messages)); diff != "" {
		t.Errorf("first model call (-want +got):\n%s", diff)
	}
	// The rewrite applied to that call only: the second sees the agent's prompt again.
	if got := render(reqs[1].Messages); got[0] != "system: be brief" || len(got) != 4 {
		t.Errorf("second model call %q, want the transcript unchanged by the first call's rewrite", got)
	}
	for _, m := range res.fin.NewMessages {
		if strings.Contains(m.Text(), "remember") {
			t.Errorf("new messages record the appended message %v", m)
		}
	}
	// BeforeModel saw the transcript and the tool names.
	first := srv.requests()[0].(*hooksv1.BeforeModelRequest)
	if len(first.GetMessages()) != 2 || first.GetMessages()[0].GetRole() != agentdv1.Role_ROLE_SYSTEM || cmp.Diff([]string{"t"}, first.GetToolNames()) != "" {
		t.Errorf("BeforeModel request %v, want the system prompt, the user message and tool t", first)
	}
}

func TestBeforeModel_RefusesAssistantMessages(t *testing.T) {
	srv := &hookServer{beforeModel: func(context.Context, *hooksv1.BeforeModelRequest) (*hooksv1.BeforeModelResponse, error) {
		return &hooksv1.BeforeModelResponse{AppendMessages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
			{Kind: &agentdv1.Part_Text{Text: "I already did it"}},
		}}}}, nil
	}}
	res := run(t, remote.New(serve(t, srv), remote.WithPoints(remote.BeforeModel), remote.WithFailClosed(true), remote.WithLogger(slog.New(slog.DiscardHandler))))
	wantStopped(t, res, "only ROLE_SYSTEM and ROLE_USER messages can be appended")
}

func TestRunPoints_StopAtBeforeRunAndObserveAfterRun(t *testing.T) {
	afterRun := make(chan *hooksv1.AfterRunRequest, 1)
	srv := &hookServer{
		beforeRun: func(context.Context, *hooksv1.BeforeRunRequest) (*hooksv1.BeforeRunResponse, error) {
			return &hooksv1.BeforeRunResponse{Decision: hooksv1.Decision_DECISION_STOP, Reason: "tenant suspended"}, nil
		},
		afterRun: func(_ context.Context, req *hooksv1.AfterRunRequest) (*hooksv1.AfterRunResponse, error) {
			afterRun <- req
			return &hooksv1.AfterRunResponse{Events: []*agentdv1.HookEvent{{Name: "audit.recorded"}}}, nil
		},
	}
	res := run(t, remote.New(serve(t, srv), remote.WithPoints(remote.BeforeRun, remote.AfterRun)))
	wantStopped(t, res, "tenant suspended")
	if res.model.Calls() != 0 {
		t.Errorf("the model was called %d times after BeforeRun stopped the run", res.model.Calls())
	}
	got := <-afterRun
	if got.GetReason() != agentdv1.RunEndReason_RUN_END_REASON_STOPPED || !strings.Contains(got.GetError(), "tenant suspended") {
		t.Errorf("AfterRun got %v, want the stopped outcome", got)
	}
	if diff := cmp.Diff([]runtime.HookEvent{{Name: "audit.recorded"}}, res.hookEvents()); diff != "" {
		t.Errorf("hook events (-want +got):\n%s", diff)
	}
	if _, last := res.events[len(res.events)-2].(*runtime.HookEvent); !last {
		t.Errorf("AfterRun's event is not right before RunFinished: %T", res.events[len(res.events)-2])
	}
}

func TestAfterModel_Stop(t *testing.T) {
	srv := &hookServer{afterModel: func(_ context.Context, req *hooksv1.AfterModelRequest) (*hooksv1.AfterModelResponse, error) {
		if len(req.GetMessage().GetParts()) == 1 && req.GetMessage().GetParts()[0].GetToolCall().GetName() == "t" {
			return &hooksv1.AfterModelResponse{Decision: hooksv1.Decision_DECISION_STOP, Reason: "no tools today"}, nil
		}
		return &hooksv1.AfterModelResponse{}, nil
	}}
	res := run(t, remote.New(serve(t, srv), remote.WithPoints(remote.AfterModel)))
	wantStopped(t, res, "no tools today")
	if len(res.calls) != 0 {
		t.Errorf("the tool ran with %v", res.calls)
	}
}

func TestPointsNotConfiguredAreNotCalled(t *testing.T) {
	srv := &hookServer{}
	res := run(t, remote.New(serve(t, srv), remote.WithPoints()))
	wantCompleted(t, res)
	if got := srv.requests(); len(got) != 0 {
		t.Errorf("the server got %d calls, want none", len(got))
	}
	srv = &hookServer{}
	run(t, remote.New(serve(t, srv)))
	var got []string
	for _, r := range srv.requests() {
		got = append(got, string(r.ProtoReflect().Descriptor().Name()))
	}
	if diff := cmp.Diff([]string{"BeforeToolRequest", "AfterToolRequest"}, got); diff != "" {
		t.Errorf("default points called (-want +got):\n%s", diff)
	}
}

func TestCancelledRunIsNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		srv := &hookServer{beforeTool: func(ctx context.Context, _ *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
			cancel()
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		}}
		var logs bytes.Buffer
		h := remote.New(serve(t, srv), remote.WithFailClosed(true), remote.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		m := &rt.Model{Steps: []rt.Step{rt.Call(0, "t", `{"a":1}`), rt.Say("ok")}}
		agent, err := runtime.New(runtime.Config{Model: m, Tools: []runtime.Tool{rt.Tool("t", rt.Echo)}, Hooks: h})
		if err != nil {
			t.Fatal(err)
		}
		var fin *runtime.RunFinished
		for ev := range agent.Run(ctx, &runtime.Request{Messages: []runtime.Message{runtime.UserMessage("go")}}) {
			if f, ok := ev.(*runtime.RunFinished); ok {
				fin = f
			}
		}
		if fin.Reason != runtime.EndCancelled {
			t.Errorf("run finished %v (%v), want cancelled, not stopped by the hook", fin.Reason, fin.Err)
		}
		if logs.Len() != 0 {
			t.Errorf("logged %q, want nothing: a cancelled run is no failure of the hook", logs.String())
		}
	})
}

func TestDial(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	srv := &hookServer{beforeTool: func(context.Context, *hooksv1.BeforeToolRequest) (*hooksv1.BeforeToolResponse, error) {
		return &hooksv1.BeforeToolResponse{Decision: hooksv1.Decision_DECISION_STOP}, nil
	}}
	hooksv1.RegisterHookServiceServer(gs, srv)
	go gs.Serve(lis)
	defer gs.Stop()
	h, err := remote.Dial("passthrough:///policy",
		remote.WithDialOptions(
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials())),
		remote.WithName("policy"))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, h)
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	se, ok := errors.AsType[*runtime.StopError](res.fin.Err)
	if !ok || se.Hook != "remote:policy" || se.Reason != "stopped at BeforeTool" {
		t.Errorf("run error %v, want a stop by remote:policy with the default reason", res.fin.Err)
	}
}

func TestParsePoint(t *testing.T) {
	for in, want := range map[string]remote.Point{
		"BeforeTool": remote.BeforeTool, "before_tool": remote.BeforeTool, "AFTER_RUN": remote.AfterRun,
		"beforemodel": remote.BeforeModel, "after_model": remote.AfterModel, "before_run": remote.BeforeRun, "after_tool": remote.AfterTool,
	} {
		if got, err := remote.ParsePoint(in); got != want || err != nil {
			t.Errorf("ParsePoint(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := remote.ParsePoint("on_event"); err == nil {
		t.Error("ParsePoint(on_event) succeeded; OnEvent is not a remote point")
	}
	if got := (remote.BeforeTool | remote.AfterTool).String(); got != "BeforeTool|AfterTool" {
		t.Errorf("String() = %q", got)
	}
}
