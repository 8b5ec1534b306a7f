package audit

// Option configures a [Hook].
type Option func(*options)

type options struct {
	arguments, outputs bool
}

// WithArguments logs tool call arguments as they are. By default they are redacted.
func WithArguments(log bool) Option {
	return func(o *options) { o.arguments = log }
}

// WithOutputs logs tool call outputs, and hooks' answers, as they are. By default they
// are redacted.
func WithOutputs(log bool) Option {
	return func(o *options) { o.outputs = log }
}
