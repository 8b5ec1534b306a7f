package builtin

import "time"

// Option configures the tools made by [Tools], [CurrentTime] and [SaveNote].
type Option func(*options)

type options struct {
	now   func() time.Time
	notes *Notes
}

func newOptions(opts []Option) options {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClock makes the tools read the time from now instead of [time.Now], for
// deterministic tests. A nil now keeps time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithNotes makes [Tools] store notes in n, where the caller can list them. Without it,
// Tools makes a store of its own that nobody else can read. [SaveNote] takes its store as
// an argument and ignores this option.
func WithNotes(n *Notes) Option {
	return func(o *options) { o.notes = n }
}
