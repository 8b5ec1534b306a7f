package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// Point is a hook point at which a [Hook] calls its server. Points combine with |.
type Point uint8

// The hook points a hook server can serve, one RPC of agentd.hooks.v1.HookService each.
// OnEvent has none: a round trip per streamed event would slow the model stream.
const (
	BeforeRun Point = 1 << iota
	BeforeModel
	AfterModel
	BeforeTool
	AfterTool
	AfterRun
)

var pointNames = []struct {
	p    Point
	name string
}{
	{BeforeRun, "BeforeRun"},
	{BeforeModel, "BeforeModel"},
	{AfterModel, "AfterModel"},
	{BeforeTool, "BeforeTool"},
	{AfterTool, "AfterTool"},
	{AfterRun, "AfterRun"},
}

// String returns the point's name, such as "BeforeTool", or the names of a combination
// joined by '|'.
func (p Point) String() string {
	var names []string
	for _, pn := range pointNames {
		if p&pn.p != 0 {
			names = append(names, pn.name)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("Point(%d)", uint8(p))
	}
	return strings.Join(names, "|")
}

// ParsePoint returns the point named s, for configuration files. Case and underscores do
// not matter: "BeforeTool", "before_tool" and "BEFORE_TOOL" name the same point.
func ParsePoint(s string) (Point, error) {
	key := strings.ToLower(strings.ReplaceAll(s, "_", ""))
	for _, pn := range pointNames {
		if strings.ToLower(pn.name) == key {
			return pn.p, nil
		}
	}
	return 0, fmt.Errorf("remote: unknown hook point %q (want before_run, before_model, after_model, before_tool, after_tool or after_run)", s)
}

// Hook is a runtime.Hooks that calls an agentd.hooks.v1.HookService server at the
// points it was configured for, and does nothing at the others. It is safe for concurrent
// use: one Hook serves every run.
type Hook struct {
	runtime.NoHooks

	client     hooksv1.HookServiceClient
	conn       *grpc.ClientConn // owned, when made by Dial
	name       string
	points     Point
	timeout    time.Duration
	failClosed bool
	log        *slog.Logger
}

// New returns a Hook that calls the HookService served on conn. The caller owns conn;
// [Hook.Close] leaves it open.
func New(conn grpc.ClientConnInterface, opts ...Option) *Hook {
	o := evaluate(opts)
	name := o.name
	if t, ok := conn.(interface{ Target() string }); ok && name == "" {
		name = t.Target()
	}
	if name == "" {
		name = "remote"
	}
	return &Hook{client: hooksv1.NewHookServiceClient(conn), name: name, points: o.points, timeout: o.timeout, failClosed: o.failClosed, log: o.log}
}

// ErrPlaintext is the error of [Dial] asked for plaintext to a target that is neither a
// loopback address nor a Unix socket: what a hook sees (tool arguments, messages,
// outputs) would cross the network in the clear, and whoever is on the path could answer
// in the hook server's place.
var ErrPlaintext = errors.New("remote: plaintext to a hook server that is neither on loopback nor on a Unix socket")

// Dial returns a Hook with a connection of its own to the hook server at target (a gRPC
// target such as "dns:///hooks.internal:9000" or "unix:///run/agentd/hook.sock"); close it
// with [Hook.Close]. Connecting is lazy: an unreachable server, or one whose certificate
// does not verify, is a failure of the calls, handled by the fail mode, not an error of
// Dial.
//
// The connection is over TLS with [WithTLS]. Without it and without [WithDialOptions],
// Dial connects in plaintext only to a target on a loopback address ("localhost",
// 127.0.0.0/8, ::1) or a Unix socket ("unix:", "unix-abstract:"), and refuses any other
// with an error that wraps [ErrPlaintext].
func Dial(target string, opts ...Option) (*Hook, error) {
	o := evaluate(opts)
	cc, err := dial(target, o)
	if err != nil {
		return nil, err
	}
	h := New(cc, opts...)
	if o.name == "" {
		h.name = target
	}
	h.conn = cc
	return h, nil
}

// dial makes the connection [Dial] and [DialGuardrail] own: over TLS with [WithTLS], with
// the credentials of [WithDialOptions], or in plaintext to a local target only.
func dial(target string, o options) (*grpc.ClientConn, error) {
	dopts := slices.Clone(o.dialOpts)
	switch {
	case o.useTLS:
		cfg := o.tls.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.MinVersion == 0 {
			cfg.MinVersion = tls.VersionTLS12
		}
		dopts = append(dopts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	case len(dopts) == 0:
		if !isLocal(target) {
			return nil, fmt.Errorf("%w: %s; give WithTLS, or the transport credentials of its network with WithDialOptions", ErrPlaintext, target)
		}
		dopts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(target, dopts...)
	if err != nil {
		return nil, fmt.Errorf("remote: hook server %s: %w", target, err)
	}
	return cc, nil
}

// Close closes the connection that [Dial] made. It does nothing for a Hook made by
// [New]. Calls made after Close fail, as the fail mode says.
func (h *Hook) Close() error {
	if h.conn == nil {
		return nil
	}
	return h.conn.Close()
}

// Name returns the name the hook reports in logs and in its StopErrors
// ("remote:<name>").
func (h *Hook) Name() string { return h.name }

// errInvalidResponse marks a response the hook cannot apply.
var errInvalidResponse = errors.New("invalid response")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalidResponse, fmt.Sprintf(format, args...))
}

// call runs one RPC under the hook's timeout.
func call[Req, Resp any](ctx context.Context, h *Hook, rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	return rpc(ctx, req)
}

// fail handles a failed call at point p according to the fail mode. A call that failed
// because the run's context is done is no failure of the hook: the run ends on its own.
func (h *Hook) fail(ctx context.Context, p Point, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	reason := h.failureReason(p, err)
	if h.failClosed && p != AfterRun {
		h.log.WarnContext(ctx, "remote hook failed; stopping the run (fail-closed)", "hook", h.name, "point", p.String(), "error", err)
		return runtime.Stop(h.stopName(), reason)
	}
	h.log.WarnContext(ctx, "remote hook failed; the run goes on (fail-open)", "hook", h.name, "point", p.String(), "error", err)
	return nil
}

func (h *Hook) failureReason(p Point, err error) string {
	if errors.Is(err, errInvalidResponse) {
		return fmt.Sprintf("hook failed: %s: %v", p, err)
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return fmt.Sprintf("hook unreachable: %s: no answer within %v", p, h.timeout)
	case codes.Unavailable:
		return fmt.Sprintf("hook unreachable: %s: %s", p, st.Message())
	}
	return fmt.Sprintf("hook failed: %s: %s: %s", p, st.Code(), st.Message())
}

func (h *Hook) stopName() string { return "remote:" + h.name }

// stop returns the StopError of a DECISION_STOP.
func (h *Hook) stop(p Point, reason string) error {
	if reason == "" {
		reason = "stopped at " + p.String()
	}
	return runtime.Stop(h.stopName(), reason)
}

// checkDecision accepts DECISION_CONTINUE (or none), DECISION_STOP and the decisions
// allowed at p besides.
func checkDecision(p Point, d hooksv1.Decision, allowed ...hooksv1.Decision) error {
	if d == hooksv1.Decision_DECISION_UNSPECIFIED || d == hooksv1.Decision_DECISION_CONTINUE || d == hooksv1.Decision_DECISION_STOP {
		return nil
	}
	if slices.Contains(allowed, d) {
		return nil
	}
	if _, known := hooksv1.Decision_name[int32(d)]; !known {
		return invalid("unknown decision %d", int32(d))
	}
	return invalid("decision %s is not accepted at %s", d, p)
}

// checkEvents refuses events without a name.
func checkEvents(evs []*agentdv1.HookEvent) error {
	for i, ev := range evs {
		if ev.GetName() == "" {
			return invalid("events[%d] has no name", i)
		}
	}
	return nil
}

// emit sends a response's events to the client.
func emit(info *runtime.RunInfo, evs []*agentdv1.HookEvent) {
	for _, ev := range evs {
		info.Emit(ev.GetName(), ev.GetValue().AsInterface())
	}
}

// BeforeRun calls the server's BeforeRun, which may stop the run.
func (h *Hook) BeforeRun(ctx context.Context, in *runtime.RunInfo) error {
	if h.points&BeforeRun == 0 {
		return nil
	}
	resp, err := call(ctx, h, h.client.BeforeRun, &hooksv1.BeforeRunRequest{Run: h.runInfo(ctx, in)})
	if err == nil {
		err = firstErr(checkDecision(BeforeRun, resp.GetDecision()), checkEvents(resp.GetEvents()))
	}
	if err != nil {
		return h.fail(ctx, BeforeRun, err)
	}
	emit(in, resp.GetEvents())
	if resp.GetDecision() == hooksv1.Decision_DECISION_STOP {
		return h.stop(BeforeRun, resp.GetReason())
	}
	return nil
}

// BeforeModel calls the server's BeforeModel, which may replace the system prompt,
// append messages to this call, or stop the run.
func (h *Hook) BeforeModel(ctx context.Context, in *runtime.ModelCall) error {
	if h.points&BeforeModel == 0 {
		return nil
	}
	req := &hooksv1.BeforeModelRequest{Run: h.runInfo(ctx, in.RunInfo), Step: int32(in.Step), Messages: wire.MessagesToProto(in.Request.Messages, hookWire)}
	for _, t := range in.Request.Tools {
		req.ToolNames = append(req.ToolNames, t.Name)
	}
	resp, err := call(ctx, h, h.client.BeforeModel, req)
	var added []runtime.Message
	if err == nil {
		err = firstErr(checkDecision(BeforeModel, resp.GetDecision()), checkEvents(resp.GetEvents()))
		if err == nil && resp.GetDecision() != hooksv1.Decision_DECISION_STOP {
			added, err = appendedMessages(resp.GetAppendMessages())
		}
	}
	if err != nil {
		return h.fail(ctx, BeforeModel, err)
	}
	emit(in.RunInfo, resp.GetEvents())
	if resp.GetDecision() == hooksv1.Decision_DECISION_STOP {
		return h.stop(BeforeModel, resp.GetReason())
	}
	if resp.SystemPrompt == nil && len(added) == 0 {
		return nil
	}
	// Build a new slice: the one in the request shares its array with the run's
	// transcript, which a rewrite must not touch.
	old := in.Request.Messages
	msgs := make([]runtime.Message, 0, len(old)+len(added)+1)
	if resp.SystemPrompt != nil {
		sys := runtime.SystemMessage(resp.GetSystemPrompt())
		if len(old) > 0 && old[0].Role == runtime.RoleSystem {
			sys.ID = old[0].ID
			old = old[1:]
		}
		msgs = append(msgs, sys)
	}
	msgs = append(msgs, old...)
	in.Request.Messages = append(msgs, added...)
	return nil
}

// appendedMessages converts the messages a BeforeModel response appends: system or user
// messages of text.
func appendedMessages(ms []*agentdv1.Message) ([]runtime.Message, error) {
	var out []runtime.Message
	for i, m := range ms {
		rm := runtime.Message{ID: m.GetId()}
		switch m.GetRole() {
		case agentdv1.Role_ROLE_SYSTEM:
			rm.Role = runtime.RoleSystem
		case agentdv1.Role_ROLE_USER:
			rm.Role = runtime.RoleUser
		default:
			return nil, invalid("append_messages[%d]: role %s; only ROLE_SYSTEM and ROLE_USER messages can be appended", i, m.GetRole())
		}
		if len(m.GetParts()) == 0 {
			return nil, invalid("append_messages[%d] has no parts", i)
		}
		for j, p := range m.GetParts() {
			t, ok := p.GetKind().(*agentdv1.Part_Text)
			if !ok {
				return nil, invalid("append_messages[%d].parts[%d]: only text parts can be appended", i, j)
			}
			rm.Parts = append(rm.Parts, runtime.Part{Kind: runtime.PartText, ID: p.GetId(), Text: t.Text})
		}
		out = append(out, rm)
	}
	return out, nil
}

// AfterModel calls the server's AfterModel, which may stop the run.
func (h *Hook) AfterModel(ctx context.Context, in *runtime.ModelResponse) error {
	if h.points&AfterModel == 0 {
		return nil
	}
	req := &hooksv1.AfterModelRequest{
		Run: h.runInfo(ctx, in.RunInfo), Step: int32(in.Step), Message: wire.MessageToProto(in.Message, hookWire),
		Usage: wire.UsageToProto(in.Usage), FinishReason: wire.FinishReasonToProto(in.FinishReason),
	}
	resp, err := call(ctx, h, h.client.AfterModel, req)
	if err == nil {
		err = firstErr(checkDecision(AfterModel, resp.GetDecision()), checkEvents(resp.GetEvents()))
	}
	if err != nil {
		return h.fail(ctx, AfterModel, err)
	}
	emit(in.RunInfo, resp.GetEvents())
	if resp.GetDecision() == hooksv1.Decision_DECISION_STOP {
		return h.stop(AfterModel, resp.GetReason())
	}
	return nil
}

// BeforeTool calls the server's BeforeTool, which may rewrite the call's arguments,
// require an approval, deny the call, answer in the tool's place, or stop the run.
func (h *Hook) BeforeTool(ctx context.Context, in *runtime.ToolCallInput) error {
	if h.points&BeforeTool == 0 {
		return nil
	}
	req := &hooksv1.BeforeToolRequest{
		Run: h.runInfo(ctx, in.RunInfo), ToolCallId: in.Call.ID, ToolName: in.Call.Name,
		ArgumentsJson: wire.ProtoString(in.Call.Arguments), Executor: wire.ExecutorToProto(in.Call.Executor),
	}
	resp, err := call(ctx, h, h.client.BeforeTool, req)
	var answer runtime.Output
	if err == nil {
		err = firstErr(checkDecision(BeforeTool, resp.GetDecision(), hooksv1.Decision_DECISION_DENY, hooksv1.Decision_DECISION_ANSWER), checkEvents(resp.GetEvents()))
		if err == nil && resp.GetDecision() == hooksv1.Decision_DECISION_ANSWER {
			answer, err = hookOutput(resp.GetAnswer(), "answer")
		}
	}
	if err != nil {
		return h.fail(ctx, BeforeTool, err)
	}
	emit(in.RunInfo, resp.GetEvents())
	switch resp.GetDecision() {
	case hooksv1.Decision_DECISION_STOP:
		return h.stop(BeforeTool, resp.GetReason())
	case hooksv1.Decision_DECISION_DENY:
		in.Deny = resp.GetReason()
		if in.Deny == "" {
			in.Deny = "denied by hook " + h.stopName()
		}
	case hooksv1.Decision_DECISION_ANSWER:
		in.Answer = &answer
	default:
		if resp.ArgumentsJson != nil {
			in.Call.Arguments = resp.GetArgumentsJson()
		}
		if resp.GetRequireApproval() {
			in.RequireApproval = true
		}
	}
	return nil
}

// AfterTool calls the server's AfterTool, which may rewrite the call's result or stop the
// run.
func (h *Hook) AfterTool(ctx context.Context, in *runtime.ToolCallOutput) error {
	if h.points&AfterTool == 0 {
		return nil
	}
	req := &hooksv1.AfterToolRequest{
		Run: h.runInfo(ctx, in.RunInfo), ToolCallId: in.Call.ID, ToolName: in.Call.Name,
		ArgumentsJson: wire.ProtoString(in.Call.Arguments), Output: wire.HookOutputToProto(in.Output), Duration: durationpb.New(in.Duration),
	}
	resp, err := call(ctx, h, h.client.AfterTool, req)
	var out runtime.Output
	if err == nil {
		err = firstErr(checkDecision(AfterTool, resp.GetDecision()), checkEvents(resp.GetEvents()))
		if err == nil && resp.GetDecision() != hooksv1.Decision_DECISION_STOP && resp.GetOutput() != nil {
			out, err = hookOutput(resp.GetOutput(), "output")
		}
	}
	if err != nil {
		return h.fail(ctx, AfterTool, err)
	}
	emit(in.RunInfo, resp.GetEvents())
	if resp.GetDecision() == hooksv1.Decision_DECISION_STOP {
		return h.stop(AfterTool, resp.GetReason())
	}
	if resp.GetOutput() != nil {
		out.Media = in.Output.Media
		in.Output = out
	}
	return nil
}

// AfterRun calls the server's AfterRun with the run's outcome. A failure is logged; it
// cannot stop a run that is ending, whatever the fail mode.
func (h *Hook) AfterRun(ctx context.Context, in *runtime.RunInfo, fin *runtime.RunFinished) {
	if h.points&AfterRun == 0 {
		return
	}
	req := &hooksv1.AfterRunRequest{
		Run: h.runInfo(ctx, in), Reason: wire.EndReasonToProto(fin.Reason), Usage: wire.UsageToProto(fin.Usage),
		FinalText: wire.ProtoString(fin.FinalText), NewMessages: wire.MessagesToProto(fin.NewMessages, hookWire),
	}
	if fin.Err != nil {
		req.Error = wire.ProtoString(fin.Err.Error())
	}
	resp, err := call(ctx, h, h.client.AfterRun, req)
	if err == nil {
		err = checkEvents(resp.GetEvents())
	}
	if err != nil {
		h.fail(ctx, AfterRun, err)
		return
	}
	emit(in, resp.GetEvents())
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
