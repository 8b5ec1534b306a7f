package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Chain folds several Hooks into one, in order: the first runs first. A run's hooks are
// always one chain in one order: the server-wide hooks first (those the gRPC
// interceptors install, the outermost interceptor's first, which a server passes as
// [Request.Hooks]), then the agent's own ([Config.Hooks]).
//
//   - Observers (AfterRun, OnEvent) reach every hook, one after another.
//   - A hook's error is logged and the chain goes on; a panic is recovered, logged, and
//     the chain goes on.
//   - BeforeModel, BeforeTool and AfterTool thread their input: each hook sees what the
//     previous one rewrote.
//   - A *StopError wins: the chain returns it at once, the hooks after the one that
//     stopped do not see that point, and the run stops. They still see the events and
//     AfterRun.
//
// Nil hooks are skipped and chains are flattened. The result implements [PerRun]: its
// ForRun returns the chain of one run, each hook that implements PerRun replaced by what
// its ForRun returns; the runtime calls it at the start of every run. log receives the
// failures; nil means slog.Default(). A run folds the request's and the agent's hooks
// into a chain of its own, which logs to the agent's Config.Logger.
func Chain(log *slog.Logger, hs ...Hooks) Hooks {
	if log == nil {
		log = slog.Default()
	}
	c := chain{log: log}
	for _, h := range hs {
		c.add(h)
	}
	return c
}

type chain struct {
	hs  []Hooks
	log *slog.Logger
}

// add appends h, flattening a chain and skipping nil.
func (c *chain) add(h Hooks) {
	switch h := h.(type) {
	case nil:
	case chain:
		c.hs = append(c.hs, h.hs...)
	default:
		c.hs = append(c.hs, h)
	}
}

// ForRun returns the chain of the run in: c itself when none of its hooks keeps state
// per run.
func (c chain) ForRun(in *RunInfo) Hooks {
	var run *chain
	for i, h := range c.hs {
		pr, ok := h.(PerRun)
		if !ok {
			if run != nil {
				run.hs = append(run.hs, h)
			}
			continue
		}
		if run == nil {
			run = &chain{log: c.log, hs: make([]Hooks, i, len(c.hs))}
			copy(run.hs, c.hs[:i])
		}
		run.add(c.forRun(in, i, pr))
	}
	if run == nil {
		return c
	}
	return *run
}

// forRun calls the ForRun of hook i, recovering a panic: the hook then sits the run out.
func (c chain) forRun(in *RunInfo, i int, pr PerRun) (h Hooks) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("hook panicked", "point", "ForRun", "hook", fmt.Sprintf("%T", pr), "index", i, "panic", fmt.Sprint(p))
			h = nil
		}
	}()
	return pr.ForRun(in)
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
