package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Chain folds several Hooks into one, in order: the first runs first.
//
//   - Observers (AfterRun, OnEvent) run one after another.
//   - A hook's error is logged and the chain goes on; a panic is recovered, logged, and
//     the chain goes on.
//   - BeforeModel, BeforeTool and AfterTool thread their input: each hook sees what the
//     previous one rewrote.
//   - A *StopError wins: the chain returns it at once and the run stops.
//   - OnError: every hook is asked; any retry wins.
//
// Nil hooks are skipped. log receives the failures; nil means slog.Default().
func Chain(log *slog.Logger, hs ...Hooks) Hooks {
	if log == nil {
		log = slog.Default()
	}
	c := chain{log: log}
	for _, h := range hs {
		switch h := h.(type) {
		case nil:
		case chain:
			c.hs = append(c.hs, h.hs...)
		default:
			c.hs = append(c.hs, h)
		}
	}
	return c
}

type chain struct {
	hs  []Hooks
	log *slog.Logger
}

// call runs f for each hook, recovering panics; a StopError ends the chain.
func (c chain) call(ctx context.Context, point string, f func(Hooks) error) (err error) {
	for i, h := range c.hs {
		if err := c.safe(ctx, point, i, h, f); err != nil {
			if _, ok := errors.AsType[*StopError](err); ok {
				return err
			}
			c.log.WarnContext(ctx, "hook failed", "point", point, "hook", fmt.Sprintf("%T", h), "error", err)
		}
	}
	return nil
}

func (c chain) safe(ctx context.Context, point string, i int, h Hooks, f func(Hooks) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.ErrorContext(ctx, "hook panicked", "point", point, "hook", fmt.Sprintf("%T", h), "index", i, "panic", fmt.Sprint(p))
			err = nil
		}
	}()
	return f(h)
}

func (c chain) BeforeRun(ctx context.Context, in *RunInfo) error {
	return c.call(ctx, "BeforeRun", func(h Hooks) error { return h.BeforeRun(ctx, in) })
}

func (c chain) AfterRun(ctx context.Context, in *RunInfo, fin *RunFinished) {
	c.call(ctx, "AfterRun", func(h Hooks) error { h.AfterRun(ctx, in, fin); return nil })
}

func (c chain) BeforeModel(ctx context.Context, in *ModelCall) error {
	return c.call(ctx, "BeforeModel", func(h Hooks) error { return h.BeforeModel(ctx, in) })
}

func (c chain) AfterModel(ctx context.Context, in *ModelResponse) error {
	return c.call(ctx, "AfterModel", func(h Hooks) error { return h.AfterModel(ctx, in) })
}

func (c chain) BeforeTool(ctx context.Context, in *ToolCallInput) error {
	return c.call(ctx, "BeforeTool", func(h Hooks) error { return h.BeforeTool(ctx, in) })
}

func (c chain) AfterTool(ctx context.Context, in *ToolCallOutput) error {
	return c.call(ctx, "AfterTool", func(h Hooks) error { return h.AfterTool(ctx, in) })
}

func (c chain) OnEvent(ctx context.Context, in *RunInfo, ev Event) {
	for i, h := range c.hs {
		c.safe(ctx, "OnEvent", i, h, func(h Hooks) error { h.OnEvent(ctx, in, ev); return nil })
	}
}

func (c chain) OnError(ctx context.Context, in *ModelFailure) bool {
	retry := false
	c.call(ctx, "OnError", func(h Hooks) error {
		if h.OnError(ctx, in) {
			retry = true
		}
		return nil
	})
	return retry
}
