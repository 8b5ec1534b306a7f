package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"regexp/syntax"
	"strings"
	"testing"
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
	m := argsMeter{cost: &s.cost, maxDepth: s.limits.MaxArgsDepth}
	m.object(v)
	if m.bytes <= inlineCost || m.bytes > uint64(s.limits.MaxArgsCost) {
		t.Fatalf("the arguments' estimated cost is %d bytes, want it between %d and %d for a validation in the background", m.bytes, inlineCost, s.limits.MaxArgsCost)
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

func TestPatternSizeBoundsTheProgram(t *testing.T) {
	for _, p := range []string{
		``, `a`, `^[a-z]{1,64}$`, `(?:ab|cd){1000}`, `^\d{4}-\d{2}-\d{2}$`, `(a*)+b?`, `[\p{L}\p{N}]{3,}`,
		`^[a-zA-Z0-9.!#$%&'*+/=?^_{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$`,
		`(?i)hello|world|(x{2,5}y{0,3}){10}`, `((a{3}){3}){3}`, `a{0}`, `(?:)`, `\b(?:foo|bar)\b`,
		`(a|b|c)*`, `a+?b*?`, `(?s).*`, `[^a]`, `(?:a{2,}){3}`, `x{1000}`, `(?:(?:a{10}){10}){10}`, `^$`, `\Aabc\z`,
		`(?m)^a$`, `(?:a|ab)(?:c|bcd)(?:d*)`, `[a-c]{2,7}?`, `(?U)a+`,
	} {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if est := patternSize(p); est < uint64(len(prog.Inst)) {
			t.Errorf("patternSize(%q) = %d, below the %d instructions of its program", p, est, len(prog.Inst))
		}
	}
}
