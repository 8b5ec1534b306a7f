package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/errtype"
)

// scopeName is the instrumentation scope of the runtime's spans and metrics.
const scopeName = "github.com/agentd/agentd/runtime"

// The span names. Each is followed by a space and the agent's, model's or tool's name.
const (
	spanInvokeAgent     = "invoke_agent"
	spanChat            = "chat"
	spanExecuteTool     = "execute_tool"
	spanAwaitApproval   = "await_approval"
	spanAwaitClientTool = "await_client_tool"
	spanGuardrail       = "guardrail"
)

// The attributes agentd adds to the GenAI conventions' own.
const (
	attrRunID          = attribute.Key("agentd.run.id")
	attrRunResumed     = attribute.Key("agentd.run.resumed")
	attrEndReason      = attribute.Key("agentd.run.end_reason")
	attrModelCalls     = attribute.Key("agentd.usage.model_calls")
	attrToolCalls      = attribute.Key("agentd.usage.tool_calls")
	attrStepIndex      = attribute.Key("agentd.step.index")
	attrStepID         = attribute.Key("agentd.step.id")
	attrExecutor       = attribute.Key("agentd.tool.executor")
	attrParked         = attribute.Key("agentd.parked")
	attrApprovalID     = attribute.Key("agentd.approval.id")
	attrOutcome        = attribute.Key("agentd.approval.outcome")
	attrDecidedBy      = attribute.Key("agentd.approval.decided_by")
	attrSteerSeq       = attribute.Key("agentd.steer.seq")
	attrSteerInterrupt = attribute.Key("agentd.steer.interrupt")
	attrMessageID      = attribute.Key("agentd.message.id")
	attrReason         = attribute.Key("agentd.reason")
	attrHook           = attribute.Key("agentd.hook")
	attrHookEventName  = attribute.Key("agentd.hook_event.name")
	attrHookEventValue = attribute.Key("agentd.hook_event.value")
	attrCallIDs        = attribute.Key("agentd.tool.call.ids")
	attrGuardrail      = attribute.Key("agentd.guardrail.name")
	attrGuardStage     = attribute.Key("agentd.guardrail.stage")
	attrGuardParallel  = attribute.Key("agentd.guardrail.parallel")
	attrGuardTripped   = attribute.Key("agentd.guardrail.tripped")
)

// The span events on invoke_agent.
const (
	eventSteerApplied       = "steer_applied"
	eventSteerDropped       = "steer_dropped"
	eventInterrupted        = "interrupted"
	eventToolCallsCancelled = "tool_calls_cancelled"
	eventHookEvent          = "hook_event"
	eventHookStop           = "hook_stop"
	eventCancelled          = "cancelled"
	eventShutdown           = "shutdown"
)

// The values of gen_ai.tool.type: the conventions call a tool the client runs a
// function, and one the agent runs itself an extension.
const (
	toolTypeClient = "function"
	toolTypeServer = "extension"
)

// Histogram buckets: the GenAI conventions' advice for tokens and durations; approval
// waits are a person's time.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	approvalBuckets = []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}
)

// telemetry holds an Agent's tracer and instruments. It is read-only after
// newTelemetry, so parallel tools share it.
type telemetry struct {
	tracer   trace.Tracer
	content  bool
	runName  string // "invoke_agent {agent}"
	agent    attribute.KeyValue
	agentSet attribute.Set // metric attributes every instrument has

	tokenUsage   genaiconv.ClientTokenUsage
	opDuration   genaiconv.ClientOperationDuration
	activeRuns   metric.Int64UpDownCounter
	runs         metric.Int64Counter
	toolDuration metric.Float64Histogram
	approvalWait metric.Float64Histogram
}

func newTelemetry(cfg Config, log *slog.Logger) *telemetry {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	agent := semconv.GenAIAgentName(cfg.Name)
	t := &telemetry{
		tracer:   tp.Tracer(scopeName),
		content:  cfg.RecordContent,
		runName:  spanInvokeAgent + " " + cfg.Name,
		agent:    agent,
		agentSet: attribute.NewSet(agent),
	}
	m := mp.Meter(scopeName)
	var errs []error
	var err error
	t.tokenUsage, err = genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	errs = append(errs, err)
	t.opDuration, err = genaiconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	errs = append(errs, err)
	if t.activeRuns, err = m.Int64UpDownCounter("agentd.runs.active", metric.WithUnit("{run}"),
		metric.WithDescription("Runs in progress.")); err != nil {
		t.activeRuns = noop.Int64UpDownCounter{}
		errs = append(errs, err)
	}
	if t.runs, err = m.Int64Counter("agentd.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Runs ended, by end reason (agentd.run.end_reason).")); err != nil {
		t.runs = noop.Int64Counter{}
		errs = append(errs, err)
	}
	if t.toolDuration, err = m.Float64Histogram("agentd.tool.duration", metric.WithUnit("s"),
		metric.WithDescription("Execute time of tool calls; for a client tool, the wait for the client's result."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		t.toolDuration = noop.Float64Histogram{}
		errs = append(errs, err)
	}
	if t.approvalWait, err = m.Float64Histogram("agentd.approval.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from an approval request to its decision."),
		metric.WithExplicitBucketBoundaries(approvalBuckets...)); err != nil {
		t.approvalWait = noop.Float64Histogram{}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		log.Warn("runtime: some metrics could not be created and are not recorded", "agent", cfg.Name, "error", err)
	}
	return t
}

// runTelemetry is one run's share of the telemetry. It lives on the run's goroutine,
// except for what parallel tools read: span, provider and model, set before they start.
type runTelemetry struct {
	span trace.Span // invoke_agent
	// live is set when the run's span records. When it does not (no SDK behind the
	// tracer, or a run sampled out) the run's other spans are not even started: the
	// samplers agentd meets follow the parent, and an orphan child would be of no use.
	live     bool
	ended    bool
	provider string // gen_ai.provider.name: the model name's "provider:" prefix
	model    string // gen_ai.request.model: the rest of the model's name
	chatName string
	// served is the model that served the current call, as its stream reported it
	// (ModelResponseInfo), or "" when it reported none.
	served string
	// The metric attributes of the run's chat calls, made on first use and again when
	// the served model changes; setsModel is their gen_ai.response.model.
	chatSet, inputSet, outputSet attribute.Set
	setsModel                    string
	haveSets                     bool
}

// responseModel is gen_ai.response.model of the current call: the model that served
// it, when its stream said, else the one asked for.
func (rt *runTelemetry) responseModel() string {
	if rt.served != "" {
		return rt.served
	}
	return rt.model
}

// noSpan stands in for the spans of a run that is not traced.
var noSpan = trace.SpanFromContext(context.Background())

// splitModelName splits "provider:model"; a name without a provider gets "_OTHER", the
// conventions' value for a provider they do not name.
func splitModelName(name string) (provider, model string) {
	if p, m, ok := strings.Cut(name, ":"); ok && p != "" {
		return p, m
	}
	return "_OTHER", name
}

// startTelemetry starts the run's span as a child of the span in ctx (a new trace when
// there is none) and counts the run as active. It returns ctx with the span.
func (r *run) startTelemetry(ctx context.Context) context.Context {
	t := r.a.tel
	rt := &r.tel
	rt.provider, rt.model = splitModelName(r.info.Model)
	ctx, rt.span = t.tracer.Start(ctx, t.runName,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(r.req.SpanLinks...),
		trace.WithAttributes(
			semconv.GenAIOperationNameInvokeAgent,
			t.agent,
			semconv.GenAIConversationID(r.info.ThreadID),
			semconv.GenAIProviderNameKey.String(rt.provider),
			semconv.GenAIRequestModel(rt.model),
			attrRunID.String(r.info.RunID),
			attrRunResumed.Bool(r.req.Resume != nil),
		))
	if rt.live = rt.span.IsRecording(); rt.live {
		rt.chatName = spanChat + " " + rt.model
	}
	if t.activeRuns.Enabled(ctx) {
		t.activeRuns.Add(ctx, 1, metric.WithAttributeSet(t.agentSet))
	}
	return ctx
}

// traceID is the hex trace id of the run's span, or "" when it has none.
func (r *run) traceID() string {
	if sc := r.tel.span.SpanContext(); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// event adds an event to the run's span.
func (r *run) event(name string, attrs ...attribute.KeyValue) {
	if r.tel.span.IsRecording() {
		r.tel.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// endTelemetry ends the run's span with its outcome, and counts the run ended. It runs
// once; later calls do nothing. A nil err for a cancelled run means the context's cause.
func (r *run) endTelemetry(reason EndReason, err error) {
	rt := &r.tel
	if rt.ended {
		return
	}
	rt.ended = true
	t := r.a.tel
	ctx := r.ctx
	if span := rt.span; span.IsRecording() {
		span.SetAttributes(
			attrEndReason.String(reason.String()),
			semconv.GenAIUsageInputTokens(int(r.usage.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(r.usage.OutputTokens)),
			attrModelCalls.Int64(r.usage.ModelCalls),
			attrToolCalls.Int64(r.usage.ToolCalls),
		)
		span.SetAttributes(detailedUsage(r.usage)...)
		switch reason {
		case EndFailed, EndMaxSteps:
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
			span.SetStatus(codes.Error, errorText(err))
		case EndStopped:
			if se := stopErr(err); se != nil {
				span.AddEvent(eventHookStop, trace.WithAttributes(attrHook.String(se.Hook), attrReason.String(se.Reason)))
			}
		case EndCancelled:
			if err == nil {
				err = context.Cause(r.ctx)
			}
			span.AddEvent(eventCancelled, trace.WithAttributes(attrReason.String(cancelReason(err))))
		case EndShutdown:
			span.AddEvent(eventShutdown)
		}
	}
	rt.span.End()
	if t.activeRuns.Enabled(ctx) {
		t.activeRuns.Add(ctx, -1, metric.WithAttributeSet(t.agentSet))
	}
	if t.runs.Enabled(ctx) {
		t.runs.Add(ctx, 1, metric.WithAttributes(t.agent, attrEndReason.String(reason.String())))
	}
}

// cancelReason says why a run was cancelled, in a word a dashboard can group by: the
// cause's own text may carry what a client wrote.
func cancelReason(cause error) string {
	switch {
	case errors.Is(cause, errConsumerGone):
		return "consumer_gone"
	case errors.Is(cause, context.DeadlineExceeded):
		return "deadline"
	default:
		return "cancelled"
	}
}

// errorType is the OpenTelemetry error.type the runtime records for a failure (of a model
// call, a run or an approval): what the first error in err's chain with an ErrorType()
// string method returns, unless empty; else a word for the runtime's own failures
// ("max_steps", "missing_finish_reason", "timeout", "model_error"); else "_OTHER".
func errorType(err error) string {
	t := errtype.Of(err, errtype.Known{Err: ErrMaxSteps, Type: "max_steps"}, errtype.Known{Err: ErrMissingFinishReason, Type: "missing_finish_reason"})
	if t == errtype.Other && err != nil {
		if _, ok := errors.AsType[*ModelError](err); ok {
			return "model_error"
		}
	}
	return t
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// startChat starts the span of one model call.
func (r *run) startChat(ctx context.Context, mreq *ModelRequest) (context.Context, trace.Span) {
	rt := &r.tel
	if !rt.live {
		return ctx, noSpan
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs,
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(rt.provider),
		semconv.GenAIRequestModel(rt.model),
		semconv.GenAIConversationID(r.info.ThreadID),
		attrStepIndex.Int(r.step),
	)
	if s := mreq.Settings; s.Temperature != nil || s.TopP != nil || s.MaxOutputTokens > 0 {
		if s.Temperature != nil {
			attrs = append(attrs, semconv.GenAIRequestTemperature(*s.Temperature))
		}
		if s.TopP != nil {
			attrs = append(attrs, semconv.GenAIRequestTopP(*s.TopP))
		}
		if s.MaxOutputTokens > 0 {
			attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(s.MaxOutputTokens)))
		}
	}
	ctx, span := r.a.tel.tracer.Start(ctx, rt.chatName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if r.a.tel.content && span.IsRecording() {
		span.SetAttributes(semconv.GenAIInputMessagesKey.String(messagesJSON(mreq.Messages, 0)))
	}
	return ctx, span
}

// detailedUsage returns the span attributes of what u says beyond input and output
// tokens, those it counts: the input read from and written to a prompt cache, and the
// output spent reasoning (counted in the input and output tokens too).
func detailedUsage(u Usage) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if u.CacheReadInputTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(u.CacheReadInputTokens)))
	}
	if u.CacheCreationInputTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheCreationInputTokens)))
	}
	if u.ReasoningTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokens(int(u.ReasoningTokens)))
	}
	return attrs
}

// endChat ends a model call's span and records its duration and tokens. ctx is the
// step's context: a call it cut short was interrupted or cancelled, which is no error.
func (r *run) endChat(ctx context.Context, span trace.Span, start time.Time, msg Message, u Usage, reason FinishReason, err error) {
	t := r.a.tel
	rt := &r.tel
	failed := err != nil && !errors.Is(err, errConsumerGone) && ctx.Err() == nil
	respModel := rt.responseModel()
	if span.IsRecording() {
		span.SetAttributes(
			semconv.GenAIResponseModel(respModel),
			semconv.GenAIResponseFinishReasons(reason.String()),
			semconv.GenAIUsageInputTokens(int(u.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(u.OutputTokens)),
		)
		span.SetAttributes(detailedUsage(u)...)
		switch {
		case failed:
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
			span.SetStatus(codes.Error, err.Error())
		case err != nil && ctx.Err() != nil:
			name := eventCancelled
			if errors.Is(context.Cause(ctx), errInterrupted) {
				name = eventInterrupted
			}
			span.AddEvent(name)
		}
		if t.content && len(msg.Parts) > 0 {
			span.SetAttributes(semconv.GenAIOutputMessagesKey.String(messagesJSON([]Message{msg}, reason)))
		}
	}
	span.End()

	// Metrics take the run's context, which carries its span (for exemplars); a step's
	// context may be cancelled already, which no instrument minds.
	mctx := r.ctx
	durationOn, tokensOn := t.opDuration.Enabled(mctx), t.tokenUsage.Enabled(mctx)
	if !durationOn && !tokensOn {
		return
	}
	if !rt.haveSets || rt.setsModel != respModel {
		base := []attribute.KeyValue{
			semconv.GenAIOperationNameChat, t.agent,
			semconv.GenAIProviderNameKey.String(rt.provider),
			semconv.GenAIRequestModel(rt.model), semconv.GenAIResponseModel(respModel),
		}
		rt.chatSet = attribute.NewSet(base...)
		rt.inputSet = attribute.NewSet(append(base, semconv.GenAITokenTypeInput)...)
		rt.outputSet = attribute.NewSet(append(base, semconv.GenAITokenTypeOutput)...)
		rt.setsModel, rt.haveSets = respModel, true
	}
	if durationOn {
		set := rt.chatSet
		if failed {
			set = attribute.NewSet(append(set.ToSlice(), semconv.ErrorTypeKey.String(errorType(err)))...)
		}
		t.opDuration.RecordSet(mctx, r.a.now().Sub(start).Seconds(), set)
	}
	if tokensOn && (u.InputTokens > 0 || u.OutputTokens > 0) {
		t.tokenUsage.RecordSet(mctx, u.InputTokens, rt.inputSet)
		t.tokenUsage.RecordSet(mctx, u.OutputTokens, rt.outputSet)
	}
}

// executorAttrs are gen_ai.tool.type and agentd.tool.executor of a call.
func executorAttrs(c *pcall) (toolType, executor attribute.KeyValue) {
	if c.entry != nil && c.entry.spec.Executor == ExecutorClient {
		return semconv.GenAIToolType(toolTypeClient), attrExecutor.String("client")
	}
	return semconv.GenAIToolType(toolTypeServer), attrExecutor.String("server")
}

// toolAttrs are the attributes naming a call on its spans.
func toolAttrs(c *pcall) []attribute.KeyValue {
	typ, executor := executorAttrs(c)
	return []attribute.KeyValue{semconv.GenAIToolName(c.Call.Name), semconv.GenAIToolCallID(c.Call.ID), typ, executor}
}

// metricToolName is the tool name metrics carry: a server tool's own, while client tools
// share one, since clients name them and a metric's series must stay bounded.
func metricToolName(c *pcall) attribute.KeyValue {
	if c.entry != nil && c.entry.spec.Executor == ExecutorClient {
		return semconv.GenAIToolName("_client")
	}
	return semconv.GenAIToolName(c.Call.Name)
}

// startTool starts the span of one execution, a child of the run's span. It may run on a
// parallel tool's goroutine.
func (r *run) startTool(c *pcall) (context.Context, trace.Span) {
	if !r.tel.live {
		return r.ctx, noSpan
	}
	ctx, span := r.a.tel.tracer.Start(r.ctx, spanExecuteTool+" "+c.Call.Name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append(toolAttrs(c), semconv.GenAIOperationNameExecuteTool)...))
	if r.a.tel.content && span.IsRecording() {
		span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(c.Call.Arguments))
	}
	return ctx, span
}

// startClientWait starts the span of the wait for a client's result: a client tool's
// Execute is that wait.
func (r *run) startClientWait(ctx context.Context, c *pcall) (context.Context, trace.Span) {
	if !r.tel.live {
		return ctx, noSpan
	}
	return r.a.tel.tracer.Start(ctx, spanAwaitClientTool+" "+c.Call.Name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(semconv.GenAIToolName(c.Call.Name), semconv.GenAIToolCallID(c.Call.ID)))
}

// toolOutcome is how one execution ended, for its spans and metrics.
type toolOutcome struct {
	errType   string // error.type of a failed call
	errText   string
	cancelled bool // the run ended while it ran
}

// endToolSpan ends an execute_tool or await_client_tool span.
func (r *run) endToolSpan(span trace.Span, d execDone, o toolOutcome, withResult bool) {
	if span.IsRecording() {
		switch {
		case d.parked: // the tool returned ErrInterrupt
			span.SetAttributes(attrParked.Bool(true))
		case o.cancelled:
			span.AddEvent(eventCancelled)
		case o.errType != "":
			span.SetAttributes(semconv.ErrorTypeKey.String(o.errType))
			span.SetStatus(codes.Error, o.errText)
		}
		if withResult && r.a.tel.content && !d.parked {
			span.SetAttributes(semconv.GenAIToolCallResultKey.String(d.out.String()))
		}
	}
	span.End()
}

// recordTool records an execution's duration.
func (r *run) recordTool(c *pcall, d execDone, o toolOutcome) {
	t := r.a.tel
	ctx := r.ctx
	if !t.toolDuration.Enabled(ctx) {
		return
	}
	_, executor := executorAttrs(c)
	attrs := []attribute.KeyValue{t.agent, metricToolName(c), executor}
	if o.errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(o.errType))
	}
	t.toolDuration.Record(ctx, d.duration.Seconds(), metric.WithAttributes(attrs...))
}

// startApproval starts the span of the wait for a decision.
func (r *run) startApproval(ctx context.Context, c *pcall) (context.Context, trace.Span) {
	if !r.tel.live {
		return ctx, noSpan
	}
	attrs := append(toolAttrs(c), attrApprovalID.String(c.ApprovalID))
	return r.a.tel.tracer.Start(ctx, spanAwaitApproval+" "+c.Call.Name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endApproval ends the wait for a decision and records how long it took. outcome is the
// Outcome's name, or "parked"; err is the failure of an Approve that failed.
func (r *run) endApproval(span trace.Span, c *pcall, wait time.Duration, outcome string, by DecidedBy, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(outcome))
		if by != DecidedByUnspecified {
			span.SetAttributes(attrDecidedBy.String(by.String()))
		}
		if outcome == "parked" {
			span.SetAttributes(attrParked.Bool(true))
		}
		if err != nil {
			// Approve failed, and the call was denied for it.
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
	t := r.a.tel
	ctx := r.ctx
	if t.approvalWait.Enabled(ctx) {
		t.approvalWait.Record(ctx, wait.Seconds(), metric.WithAttributes(t.agent, metricToolName(c), attrOutcome.String(outcome)))
	}
}

// The JSON shapes of gen_ai.input.messages and gen_ai.output.messages.
type otelMessage struct {
	Role         string     `json:"role"`
	Parts        []otelPart `json:"parts"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

type otelPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  any             `json:"response,omitempty"`
	MIMEType  string          `json:"mime_type,omitempty"`
	URI       string          `json:"uri,omitempty"`
}

// messagesJSON renders messages as the GenAI conventions' message JSON; reason, when
// set, is the output message's finish reason. Media go by type and URI, never by data.
func messagesJSON(msgs []Message, reason FinishReason) string {
	out := make([]otelMessage, 0, len(msgs))
	for _, m := range msgs {
		om := otelMessage{Role: m.Role.String(), Parts: make([]otelPart, 0, len(m.Parts))}
		if reason != FinishUnspecified {
			om.FinishReason = reason.String()
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case PartText:
				om.Parts = append(om.Parts, otelPart{Type: "text", Content: p.Text})
			case PartReasoning:
				om.Parts = append(om.Parts, otelPart{Type: "reasoning", Content: p.Text})
			case PartToolCall:
				op := otelPart{Type: "tool_call", ID: p.ToolCall.ID, Name: p.ToolCall.Name}
				if json.Valid([]byte(p.ToolCall.Arguments)) {
					op.Arguments = json.RawMessage(p.ToolCall.Arguments)
				} else if p.ToolCall.Arguments != "" {
					op.Arguments, _ = json.Marshal(p.ToolCall.Arguments)
				}
				om.Parts = append(om.Parts, op)
			case PartToolResult:
				var resp any = p.ToolResult.Output.Text
				if json.Valid(p.ToolResult.Output.JSON) {
					resp = json.RawMessage(p.ToolResult.Output.JSON)
				}
				om.Parts = append(om.Parts, otelPart{Type: "tool_call_response", ID: p.ToolResult.CallID, Response: resp})
			case PartMedia:
				typ := "blob"
				if p.Media.URI != "" {
					typ = "uri"
				}
				om.Parts = append(om.Parts, otelPart{Type: typ, MIMEType: p.Media.MIMEType, URI: p.Media.URI})
			}
		}
		out = append(out, om)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

// hookEventValue renders a hook event's value for its span event.
func hookEventValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
