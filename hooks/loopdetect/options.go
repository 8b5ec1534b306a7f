package loopdetect

// Option configures a [Hook].
type Option func(*options)

type options struct {
	soft, hard int
}

func defaultOptions() options { return options{soft: 3, hard: 5} }

// WithSoftLimit sets the number of identical calls at which the model is warned (3 by
// default). Zero or less turns warnings off.
func WithSoftLimit(n int) Option {
	return func(o *options) { o.soft = max(n, 0) }
}

// WithHardLimit sets the number of identical calls at which the run is stopped (5 by
// default); that call does not run. Zero or less never stops a run.
func WithHardLimit(n int) Option {
	return func(o *options) { o.hard = max(n, 0) }
}
