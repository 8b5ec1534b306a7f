package schemacost

import (
	"regexp/syntax"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
