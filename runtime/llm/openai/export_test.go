package openai

import (
	"context"
	"time"
)

// SetSleep replaces the wait between retries, so that tests see the waits without
// waiting.
func SetSleep(m *Model, sleep func(ctx context.Context, d time.Duration) error) {
	m.retry.Sleep = sleep
}

// Unquote is unquote, for its own test.
var Unquote = unquote
