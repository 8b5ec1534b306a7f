package fallback

import (
	"context"
	"errors"
	"iter"
	"strings"

	"github.com/agentd/agentd/runtime"
)

// New returns a model that calls models in order, as the package documentation says.
// Its Name is the first model's. With one model, New returns it. New panics when models
// is empty. The result is safe for concurrent use when the models are.
func New(models ...runtime.Model) runtime.Model {
	switch len(models) {
	case 0:
		panic("fallback: New needs at least one model")
	case 1:
		return models[0]
	}
	return &chain{models: append([]runtime.Model(nil), models...)}
}

type chain struct {
	models []runtime.Model
}

func (c *chain) Name() string { return c.models[0].Name() }

func (c *chain) Stream(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	return func(yield func(runtime.ModelEvent, error) bool) {
		var failed []ModelError
		for _, m := range c.models {
			first := true
			var failure error
			for ev, err := range m.Stream(ctx, req) {
				if first && err != nil && ctx.Err() == nil {
					failure = err
					break
				}
				first = false
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

// Retryable reports whether a retry of the whole chain may help: whether every model's
// error says so. The adapters' errors say no once they have retried.
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
