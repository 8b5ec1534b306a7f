package errorbreaker

// Option configures a [Hook].
type Option func(*options)

type options struct {
	threshold int
}

// WithThreshold sets the number of failed tool calls in a row that stops a run (5 by
// default). Zero or less never stops a run.
func WithThreshold(n int) Option {
	return func(o *options) { o.threshold = max(n, 0) }
}
