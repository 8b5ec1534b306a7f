package remote

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// The limits of a GuardResponse; a response past them is invalid, and a failed check.
const (
	maxGuardDetails     = 16
	maxGuardDetailBytes = 256 // of a detail's key, and of its value
	maxGuardReasonBytes = 4096
)

// Guardrail is a runtime.Guardrail whose checks a HookService's Guard RPC answers: at
// each stage of its spec, the run waits for the server to say whether it trips, at most
// the timeout ([WithTimeout], [DefaultTimeout] by default). Its other hook points do
// nothing. It is safe for concurrent use: one Guardrail serves every run, and its
// parallel input checks.
//
// A check that fails (an error status, no answer within the timeout, an unreachable
// server, a response past the limits of agentd.hooks.v1.GuardResponse) returns an
// error saying what failed, which the runtime makes a trip ("the guardrail could not
// check: …") unless the spec's FailOpen says the run goes on: a guardrail fails closed
// by default. [WithFailClosed] and [WithPoints] do not apply to it.
type Guardrail struct {
	runtime.NoHooks

	client  hooksv1.HookServiceClient
	conn    *grpc.ClientConn // owned, when made by DialGuardrail
	spec    runtime.GuardSpec
	name    string
	timeout time.Duration
	log     *slog.Logger
}

// NewGuardrail returns a Guardrail that checks the stages of spec with the HookService
// served on conn. The caller owns conn; [Guardrail.Close] leaves it open.
//
// The options that apply are [WithTimeout], [WithLogger] (warnings about requests, such
// as run metadata left out; failed checks are logged by the runtime), [WithName] (the
// name in the guardrail's logs, and its spec's when spec.Name is empty; the default is
// spec.Name, else the connection's target, else "remote"). Its server is sent the
// spec's name, filled in so, in every request.
func NewGuardrail(conn grpc.ClientConnInterface, spec runtime.GuardSpec, opts ...Option) *Guardrail {
	o := evaluate(opts)
	var target string
	if t, ok := conn.(interface{ Target() string }); ok {
		target = t.Target()
	}
	return newGuardrail(conn, spec, o, target)
}

// DialGuardrail returns a Guardrail with a connection of its own to the hook server at
// target; close it with [Guardrail.Close]. It connects as [Dial] does: lazily, over TLS
// with [WithTLS], with the credentials of [WithDialOptions], and in plaintext only to a
// target on a loopback address or a Unix socket, refusing any other with an error that
// wraps [ErrPlaintext]. An unreachable server, or one whose certificate does not verify,
// is a failed check.
func DialGuardrail(target string, spec runtime.GuardSpec, opts ...Option) (*Guardrail, error) {
	o := evaluate(opts)
	cc, err := dial(target, o)
	if err != nil {
		return nil, err
	}
	g := newGuardrail(cc, spec, o, target)
	g.conn = cc
	return g, nil
}

func newGuardrail(conn grpc.ClientConnInterface, spec runtime.GuardSpec, o options, target string) *Guardrail {
	name := cmp.Or(o.name, spec.Name, target, "remote")
	spec.Name = cmp.Or(spec.Name, name)
	spec.Tools = slices.Clone(spec.Tools)
	return &Guardrail{client: hooksv1.NewHookServiceClient(conn), spec: spec, name: name, timeout: o.timeout, log: o.log}
}

// Close closes the connection that [DialGuardrail] made. It does nothing for a
// Guardrail made by [NewGuardrail]. Checks made after Close fail.
func (g *Guardrail) Close() error {
	if g.conn == nil {
		return nil
	}
	return g.conn.Close()
}

// Guard returns the guardrail's spec, its Name filled in.
func (g *Guardrail) Guard() runtime.GuardSpec {
	spec := g.spec
	spec.Tools = slices.Clone(spec.Tools)
	return spec
}

// Check asks the server whether in trips the guardrail. An error says why the server
// could not answer, or why its answer is invalid.
func (g *Guardrail) Check(ctx context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	resp, err := g.client.Guard(ctx, g.request(ctx, in))
	if err != nil {
		return nil, g.failure(err)
	}
	if err := checkGuardResponse(resp); err != nil {
		return nil, err
	}
	if !resp.GetTripped() {
		return nil, nil
	}
	return &runtime.Trip{Reason: cmp.Or(resp.GetReason(), "tripped"), Details: resp.GetDetails()}, nil
}

// request converts what a check checks, leaving out media bytes as the Hook does.
func (g *Guardrail) request(ctx context.Context, in *runtime.GuardCheck) *hooksv1.GuardRequest {
	req := &hooksv1.GuardRequest{
		Run:       runInfoToProto(ctx, in.RunInfo, g.log, "guardrail", g.name),
		Guardrail: g.spec.Name,
		Stage:     stageToProto(in.Stage),
		Text:      wire.ProtoString(in.Text),
		Messages:  wire.MessagesToProto(in.Messages, hookWire),
		Output:    wire.OutputToProto(in.Output),
	}
	if in.Stage&(runtime.GuardToolInput|runtime.GuardToolOutput) != 0 {
		req.ToolCallId, req.ToolName, req.ArgumentsJson = in.Call.ID, in.Call.Name, wire.ProtoString(in.Call.Arguments)
	}
	if in.Stage == runtime.GuardToolOutput {
		req.Result = wire.HookOutputToProto(in.Result)
	}
	return req
}

// stageToProto converts the one stage a check is at.
func stageToProto(s runtime.GuardStage) hooksv1.GuardStage {
	switch s {
	case runtime.GuardInput:
		return hooksv1.GuardStage_GUARD_STAGE_INPUT
	case runtime.GuardOutput:
		return hooksv1.GuardStage_GUARD_STAGE_OUTPUT
	case runtime.GuardToolInput:
		return hooksv1.GuardStage_GUARD_STAGE_TOOL_INPUT
	case runtime.GuardToolOutput:
		return hooksv1.GuardStage_GUARD_STAGE_TOOL_OUTPUT
	}
	return hooksv1.GuardStage_GUARD_STAGE_UNSPECIFIED
}

// checkGuardResponse refuses a response past the limits of GuardResponse, tripped or not.
func checkGuardResponse(resp *hooksv1.GuardResponse) error {
	if n := len(resp.GetReason()); n > maxGuardReasonBytes {
		return invalid("the reason is %d bytes; at most %d", n, maxGuardReasonBytes)
	}
	details := resp.GetDetails()
	if len(details) > maxGuardDetails {
		return invalid("%d details; at most %d", len(details), maxGuardDetails)
	}
	for _, k := range slices.Sorted(maps.Keys(details)) {
		if len(k) > maxGuardDetailBytes {
			return invalid("a details key of %d bytes; at most %d", len(k), maxGuardDetailBytes)
		}
		if n := len(details[k]); n > maxGuardDetailBytes {
			return invalid("details[%q] is %d bytes; at most %d", k, n, maxGuardDetailBytes)
		}
	}
	return nil
}

// guardError is a Guard call that failed, its text saying what failed for the trip
// reason the runtime makes of it.
type guardError struct {
	reason string
	err    error
}

func (e *guardError) Error() string { return e.reason }
func (e *guardError) Unwrap() error { return e.err }

// failure describes a failed Guard call as the Hook's failureReason does.
func (g *Guardrail) failure(err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return &guardError{reason: fmt.Sprintf("no answer within %v", g.timeout), err: err}
	case codes.Unavailable:
		return &guardError{reason: "unreachable: " + st.Message(), err: err}
	}
	return &guardError{reason: fmt.Sprintf("%s: %s", st.Code(), st.Message()), err: err}
}

var _ runtime.Guardrail = (*Guardrail)(nil)
