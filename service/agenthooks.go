package service

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentd/agentd/hooks/audit"
	"github.com/agentd/agentd/hooks/budget"
	"github.com/agentd/agentd/hooks/errorbreaker"
	"github.com/agentd/agentd/hooks/loopdetect"
	"github.com/agentd/agentd/hooks/remote"
	"github.com/agentd/agentd/runtime"
)

// HooksConfig enables and tunes an agent's hooks. They run after the hooks the server's
// interceptors install and [RegistryOptions.Hooks], in this order: loopdetect, budget,
// errorbreaker, the remote hooks in the order listed, and audit last, so it records what
// the others decided. Only [RegistryOptions.PostHooks] (agentd's --audit) come later.
type HooksConfig struct {
	// LoopDetect warns the model, and then stops the run, when it calls the same tool
	// with the same arguments again and again.
	LoopDetect *LoopDetectConfig `yaml:"loopdetect,omitempty"`
	// Budget stops a run past a token, tool-call or wall-time budget.
	Budget *BudgetConfig `yaml:"budget,omitempty"`
	// ErrorBreaker stops a run after consecutive failed tool calls.
	ErrorBreaker *ErrorBreakerConfig `yaml:"errorbreaker,omitempty"`
	// Audit logs one record per tool call and per decision.
	Audit *AuditConfig `yaml:"audit,omitempty"`
	// Remote are hooks served by agentd.hooks.v1.HookService at the given addresses.
	Remote []RemoteHookConfig `yaml:"remote,omitempty"`
}

// LoopDetectConfig tunes loopdetect; zero limits take its defaults (3 and 5).
type LoopDetectConfig struct {
	SoftLimit int `yaml:"soft_limit,omitempty"`
	HardLimit int `yaml:"hard_limit,omitempty"`
}

// BudgetConfig sets a run's budgets; zero means no budget of that kind.
type BudgetConfig struct {
	MaxTokens    int64    `yaml:"max_tokens,omitempty"`
	MaxToolCalls int64    `yaml:"max_tool_calls,omitempty"`
	MaxDuration  Duration `yaml:"max_duration,omitempty"`
}

// ErrorBreakerConfig tunes errorbreaker; a zero threshold takes its default (5).
type ErrorBreakerConfig struct {
	Threshold int `yaml:"threshold,omitempty"`
}

// AuditConfig tunes audit. Arguments and outputs are redacted unless set.
type AuditConfig struct {
	Arguments bool `yaml:"arguments,omitempty"`
	Outputs   bool `yaml:"outputs,omitempty"`
}

// RemoteHookConfig names a remote hook.
type RemoteHookConfig struct {
	// Address of the HookService, host:port (plaintext; keep it on loopback or a
	// private network).
	Address string `yaml:"address"`
	// Points are the hook points called: before_run, before_model, after_model,
	// before_tool, after_tool, after_run. Empty means before_tool and after_tool.
	Points []string `yaml:"points,omitempty"`
	// Timeout bounds each call; zero means 2s.
	Timeout Duration `yaml:"timeout,omitempty"`
	// FailClosed stops the run when the hook cannot answer; by default the run goes on.
	FailClosed bool `yaml:"fail_closed,omitempty"`
}

// build makes the agent's hooks. The returned closers release remote connections.
func (h HooksConfig) build(log *slog.Logger) (runtime.Hooks, []func() error, error) {
	var hs []runtime.Hooks
	var closers []func() error
	if c := h.LoopDetect; c != nil {
		var opts []loopdetect.Option
		if c.SoftLimit != 0 {
			opts = append(opts, loopdetect.WithSoftLimit(c.SoftLimit))
		}
		if c.HardLimit != 0 {
			opts = append(opts, loopdetect.WithHardLimit(c.HardLimit))
		}
		hs = append(hs, loopdetect.New(opts...))
	}
	if c := h.Budget; c != nil {
		hs = append(hs, budget.New(budget.WithMaxTokens(c.MaxTokens), budget.WithMaxToolCalls(c.MaxToolCalls), budget.WithMaxDuration(time.Duration(c.MaxDuration))))
	}
	if c := h.ErrorBreaker; c != nil {
		var opts []errorbreaker.Option
		if c.Threshold != 0 {
			opts = append(opts, errorbreaker.WithThreshold(c.Threshold))
		}
		hs = append(hs, errorbreaker.New(opts...))
	}
	var errs []error
	for i, c := range h.Remote {
		if c.Address == "" {
			errs = append(errs, fmt.Errorf("hooks.remote[%d].address: must be set", i))
			continue
		}
		opts := []remote.Option{remote.WithLogger(log), remote.WithFailClosed(c.FailClosed)}
		if c.Timeout != 0 {
			opts = append(opts, remote.WithTimeout(time.Duration(c.Timeout)))
		}
		if len(c.Points) > 0 {
			var points []remote.Point
			for _, s := range c.Points {
				p, err := remote.ParsePoint(s)
				if err != nil {
					errs = append(errs, fmt.Errorf("hooks.remote[%d].points: %v", i, err))
					continue
				}
				points = append(points, p)
			}
			opts = append(opts, remote.WithPoints(points...))
		}
		rh, err := remote.Dial(c.Address, opts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("hooks.remote[%d]: %v", i, err))
			continue
		}
		closers = append(closers, rh.Close)
		hs = append(hs, rh)
	}
	if c := h.Audit; c != nil {
		hs = append(hs, audit.New(log, audit.WithArguments(c.Arguments), audit.WithOutputs(c.Outputs)))
	}
	if len(errs) > 0 {
		closeAll(closers)
		return nil, nil, errors.Join(errs...)
	}
	if len(hs) == 0 {
		return nil, nil, nil
	}
	return runtime.Chain(log, hs...), closers, nil
}
