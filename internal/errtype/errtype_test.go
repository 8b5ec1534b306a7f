package errtype

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type typed string

func (t typed) Error() string     { return string(t) }
func (t typed) ErrorType() string { return string(t) }

func TestOf(t *testing.T) {
	errKnown := errors.New("known")
	known := Known{Err: errKnown, Type: "known"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, Other},
		{"a method names it", fmt.Errorf("wrapped: %w", typed("rate_limited")), "rate_limited"},
		{"an empty method does not", fmt.Errorf("%w: %w", typed(""), errKnown), "known"},
		{"known", fmt.Errorf("wrapped: %w", errKnown), "known"},
		{"known before a deadline", fmt.Errorf("%w: %w", errKnown, context.DeadlineExceeded), "known"},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), "timeout"},
		{"anything else", errors.New("boom"), Other},
	}
	for _, tt := range tests {
		if got := Of(tt.err, known); got != tt.want {
			t.Errorf("%s: Of(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
}
