package budget

import "time"

// Option configures a [Hook].
type Option func(*options)

type options struct {
	maxTokens, maxToolCalls int64
	maxDuration             time.Duration
	now                     func() time.Time
}

// WithMaxTokens bounds the input plus output tokens of a run; zero or less is no bound.
func WithMaxTokens(n int64) Option {
	return func(o *options) { o.maxTokens = max(n, 0) }
}

// WithMaxToolCalls bounds the tool calls of a run; zero or less is no bound.
func WithMaxToolCalls(n int64) Option {
	return func(o *options) { o.maxToolCalls = max(n, 0) }
}

// WithMaxDuration bounds the wall time of a run, checked before each model and tool call;
// zero or less is no bound.
func WithMaxDuration(d time.Duration) Option {
	return func(o *options) { o.maxDuration = max(d, 0) }
}

// WithClock sets the clock used for [WithMaxDuration]; nil means time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}
