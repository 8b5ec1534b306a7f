package fallback

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/errtype"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// New returns a model that calls models in order, as the package documentation says,
// without logging the fallbacks (a [Chain] with no Logger). Its Name is the first
// model's. With one model, New returns it. New panics when models is empty. The result
// is safe for concurrent use when the models are.
func New(models ...runtime.Model) runtime.Model {
	switch len(models) {
	case 0:
		panic("fallback: New needs at least one model")
	case 1:
		return models[0]
	}
	return &Chain{Models: slices.Clone(models)}
}

// Chain is a [runtime.Model] that calls its Models in order, as the package
// documentation says. Its fields must not change once it is in use; it is then safe for
// concurrent use when its models are.
type Chain struct {
	// Models are tried in order; the chain's Name is the first one's. A chain without
	// models fails every call.
	Models []runtime.Model
	// Logger, if not nil, gets a warning each time the chain moves on from a failed
	// model, logged with the call's context (so that a handler can add its trace): the
	// two models' names and the failure's text, never the request.
	Logger *slog.Logger
}

var _ runtime.Model = (*Chain)(nil)

// Name returns the first model's name, or "" when there is none.
func (c *Chain) Name() string {
	if len(c.Models) == 0 {
		return ""
	}
	return c.Models[0].Name()
}

// Stream calls the models in order until one emits, or one's failure says the next
// cannot help; see the package documentation.
func (c *Chain) Stream(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	return func(yield func(runtime.ModelEvent, error) bool) {
		var failed []ModelError
		for i, m := range c.Models {
			if i > 0 {
				c.fellBack(ctx, failed[i-1], m.Name())
			}
			first := true
			var failure error
			var info runtime.ModelEvent // the model's report of the served model, held
			for ev, err := range m.Stream(ctx, req) {
				if first {
					if err == nil && ev.Kind == runtime.ModelResponseInfo {
						info = ev // a report alone does not commit the chain to m
						continue
					}
					if err != nil && provider.NextMayHelp(ctx, err) {
						failure = err
						break
					}
					first = false
					if err == nil && !answering(ctx, yield, i, m.Name(), info) {
						return
					}
				}
				if !yield(ev, err) || err != nil {
					return
				}
			}
			if failure == nil {
				return
			}
			failed = append(failed, ModelError{Model: m.Name(), Err: failure})
		}
		yield(runtime.ModelEvent{}, &Error{Errors: failed})
	}
}

// The span event of a fallback, and its attributes besides error.type; and the
// attributes of the call's span that name the fallback that answered.
const (
	eventFallback = "gen_ai.model.fallback"
	attrFromModel = attribute.Key("agentd.fallback.from_model")
	attrToModel   = attribute.Key("agentd.fallback.to_model")
	attrModel     = attribute.Key("agentd.fallback.model")
	attrIndex     = attribute.Key("agentd.fallback.index")
)

// answering yields, before the first event of the chain's model i, named name, the
// report of the model that serves the call: the model's own, held until now, if it made
// one. A fallback (i > 0) always reports, its own model's name when it made no report,
// and names itself on the call's span.
func answering(ctx context.Context, yield func(runtime.ModelEvent, error) bool, i int, name string, info runtime.ModelEvent) bool {
	if i > 0 {
		trace.SpanFromContext(ctx).SetAttributes(attrModel.String(name), attrIndex.Int(i))
		if info.Name == "" {
			info = runtime.ModelEvent{Kind: runtime.ModelResponseInfo, Index: -1, Name: modelOf(name)}
		}
	}
	if info.Kind != runtime.ModelResponseInfo {
		return true
	}
	return yield(info, nil)
}

// modelOf returns the model of a "provider:model" name, as the runtime splits it.
func modelOf(name string) string {
	if p, m, ok := strings.Cut(name, ":"); ok && p != "" {
		return m
	}
	return name
}

// fellBack reports the move from the failed model to the next one: an event on the
// call's span, and a warning.
func (c *Chain) fellBack(ctx context.Context, from ModelError, to string) {
	trace.SpanFromContext(ctx).AddEvent(eventFallback, trace.WithAttributes(
		attrFromModel.String(from.Model), attrToModel.String(to), semconv.ErrorTypeKey.String(errorType(from.Err))))
	if c.Logger != nil {
		c.Logger.WarnContext(ctx, "model failed before answering; falling back to the next model",
			"from_model", from.Model, "to_model", to, "error", from.Err.Error())
	}
}

// errorType is the error.type of a model's failure, named as the runtime names it.
func errorType(err error) string {
	return errtype.Of(err, errtype.Known{Err: runtime.ErrMissingFinishReason, Type: "missing_finish_reason"})
}

// ModelError is the failure of one model of a chain.
type ModelError struct {
	Model string
	Err   error
}

// Error is the failure of every model of a chain, before any emitted anything.
type Error struct {
	// Errors holds each model's failure, in the chain's order.
	Errors []ModelError
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("every model failed: ")
	for i, me := range e.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(me.Model + ": " + me.Err.Error())
	}
	return b.String()
}

// Unwrap returns the models' errors, so that errors.Is and errors.As see each.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, me := range e.Errors {
		errs[i] = me.Err
	}
	return errs
}

// Retryable reports whether calling the chain again later may help: whether every
// model's error says so (the adapters' errors do for a transient failure, once their
// own retries are spent). Nothing in agentd calls again: the run fails.
func (e *Error) Retryable() bool {
	for _, me := range e.Errors {
		re, ok := errors.AsType[interface {
			error
			Retryable() bool
		}](me.Err)
		if !ok || !re.Retryable() {
			return false
		}
	}
	return len(e.Errors) > 0
}
