package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentd/agentd/runtime/internal/schemacost"
)

func TestValidateContextReturnsWhileValidating(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"properties":{"s":{"type":"string","maxLength":10}}}`))
	if err != nil {
		t.Fatal(err)
	}
	args := `{"s":"` + strings.Repeat("x", 1<<18) + `"}` // invalid, and within the limits
	var v map[string]any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatal(err)
	}
	m := schemacost.Meter{Cost: &s.cost, MaxDepth: s.limits.MaxArgsDepth}
	m.Measure(v)
	if m.Bytes <= inlineCost || m.Bytes > uint64(s.limits.MaxArgsCost) {
		t.Fatalf("the arguments' estimated cost is %d bytes, want it between %d and %d for a validation in the background", m.Bytes, inlineCost, s.limits.MaxArgsCost)
	}

	// The validation starts only once ValidateContext has returned: it must not wait.
	ctx, cancel := context.WithCancel(t.Context())
	release := make(chan struct{})
	s.validating = func() {
		cancel()
		<-release
	}
	err = s.ValidateContext(ctx, args)
	close(release)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ValidateContext, cancelled while validating = %v, want context.Canceled", err)
	}
}
