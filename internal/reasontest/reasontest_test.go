package reasontest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/reasontest"
)

// writeFiles writes files (name → content) under a new directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const contract = `syntax = "proto3";

// AgentService runs agents.
//
// Status reasons; agentd sends no other reason, and a new one is added here
// first:
//   - BAD_START — the start is wrong,
//     over two lines.
//   - INTERNAL — a fault.
service AgentService {
  // Run runs.
  rpc Run(RunRequest) returns (RunResponse);
}

// RunError describes a failure.
message RunError {
  // The code.
  int32 code = 1;
  // The run reasons; agentd sends no other
  // reason:
  //   - MAX_STEPS — too many steps.
  //   - INTERNAL — a fault.
  string reason = 2;
}

// InputAck answers.
message InputAck {
  // A RunError named reason elsewhere does not count:
  //   - NOT_A_REASON — ignored.
  string reason = 1;
  // Ack reasons; agentd sends no other reason:
  //   - RATE_LIMITED — too fast.
  RunError error = 3;
}
`

func TestDocumented(t *testing.T) {
	doc, err := reasontest.Documented(writeFiles(t, map[string]string{"a.proto": contract}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[reasontest.Set][]string{
		reasontest.Status: {"BAD_START", "INTERNAL"},
		reasontest.Run:    {"MAX_STEPS", "INTERNAL"},
		reasontest.Ack:    {"RATE_LIMITED"},
	}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("Documented (-want +got):\n%s", diff)
	}
}

func TestDocumentedRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ old, new, want string }{
		"open list":   {"Ack reasons; agentd sends no other reason:", "Ack reasons, such as:", "does not say it is closed"},
		"repeated":    {"//   - MAX_STEPS — too many steps.", "//   - INTERNAL — again.", "INTERNAL is listed twice"},
		"empty list":  {"//   - RATE_LIMITED — too fast.", "// RATE_LIMITED when too fast.", "no \"- REASON — when\" lines"},
		"no list":     {"  RunError error = 3;", "  RunError failure = 3;", `no comment of "error" in "InputAck"`},
		"second list": {"message InputAck {", "service AgentService {}\n\nmessage InputAck {", "listed twice"},
	} {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(contract, tc.old, tc.new, 1)
			if src == contract {
				t.Fatalf("%q is not in the contract", tc.old)
			}
			_, err := reasontest.Documented(writeFiles(t, map[string]string{"a.proto": src}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// code is a package that sends reasons every way Used follows.
const code = `package p

import (
	"github.com/agentd/agentd/gen/agentd/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

const (
	reasonBadStart = "BAD_START"
	reasonInternal = "INTERNAL"
	reasonUnused   = "NEVER_SENT"
	aliased        = reasonInternal
)

func statusError(reason, msg string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: "agentd"}
}

func invalid(why string) *errdetails.ErrorInfo { return statusError(reasonBadStart, why) }

func ackError(reason string) *agentdv1.RunError { return &agentdv1.RunError{Reason: reason} }

func runError(stopped bool) *agentdv1.RunError {
	mk := func(code int32, reason string) *agentdv1.RunError {
		return &agentdv1.RunError{Code: code, Reason: reason}
	}
	reason := "MAX_STEPS"
	if stopped {
		reason = aliased
	}
	return mk(1, reason)
}

func forward(re *agentdv1.RunError) *errdetails.ErrorInfo { return statusError(re.GetReason(), "") }

func engineError(draining bool) error {
	if draining {
		return &runs.Error{Code: 14, Reason: "DRAINING"}
	}
	return &runs.Error{Code: 13, Reason: reasonInternal}
}

func toStatus(e *runs.Error) *errdetails.ErrorInfo { return &errdetails.ErrorInfo{Reason: e.Reason} }

func refuse() *agentdv1.RunError { return ackError("RATE_LIMITED") }
`

func TestUsed(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"p/p.go":            code,
		"p/p_test.go":       "package p\n\nconst reasonTest = \"IN_A_TEST\"\n",
		"p/testdata/x/x.go": "package x\n\nconst reasonData = \"IN_TESTDATA\"\n",
		"p/sub/sub.go":      "package sub\n\nconst reasonSub = \"IN_SUBPACKAGE\"\n",
		"p/sub/literal.go":  "package sub\n\nvar e = agentdv1.RunError{Reason: \"FROM_A_VAR\"}\n",
	})
	uses, err := reasontest.Used(dir, map[string]reasontest.Set{"ackError": reasontest.Ack})
	if err != nil {
		t.Fatal(err)
	}
	var gots []string
	for _, u := range uses {
		gots = append(gots, string(u.Set)+" "+u.Reason+" "+u.Const+" "+filepath.Base(u.Pos.Filename))
	}
	slices.Sort(gots)
	want := []string{
		" BAD_START reasonBadStart p.go",
		" INTERNAL reasonInternal p.go",
		" IN_SUBPACKAGE reasonSub sub.go",
		" NEVER_SENT reasonUnused p.go",
		"ack RATE_LIMITED  p.go",
		"run FROM_A_VAR  literal.go",
		"run INTERNAL aliased p.go",
		"run MAX_STEPS  p.go",
		"status BAD_START reasonBadStart p.go",
		"status DRAINING  p.go",
		"status INTERNAL reasonInternal p.go",
	}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("Used (-want +got):\n%s", diff)
	}
}

func TestUsedRefusesWhatItCannotFollow(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"call": {
			`func f() *agentdv1.RunError { return &agentdv1.RunError{Reason: pick()} }`,
			"cannot tell which run reason",
		},
		"concatenation": {
			`func f(s string) *errdetails.ErrorInfo { return &errdetails.ErrorInfo{Reason: "BAD_" + s} }`,
			"cannot tell which status reason",
		},
		"package variable": {
			"var reasonX = \"X\"\n\nfunc f() *agentdv1.RunError { return &agentdv1.RunError{Reason: reasonX} }",
			"cannot tell which run reason",
		},
		"anonymous wrapper": {
			`func f() *agentdv1.RunError { return func(r string) *agentdv1.RunError { return &agentdv1.RunError{Reason: r} }("X") }`,
			"assign it to a name",
		},
		"wrapper as a value": {
			"func wrap(r string) *agentdv1.RunError { return &agentdv1.RunError{Reason: r} }\n\nvar w = wrap",
			"wrap passes on a run reason and is used as a value",
		},
		"positional fields": {
			`var e = errdetails.ErrorInfo{"X", "agentd", nil}`,
			"without field names",
		},
		"parameter of an unfollowed call": {
			"func wrap(r string) *agentdv1.RunError { return &agentdv1.RunError{Reason: r} }\n\nfunc g(x string) { wrap(x) }\n\nfunc h() { g(pick()) }",
			"cannot tell which run reason",
		},
	} {
		t.Run(name, func(t *testing.T) {
			src := "package p\n\nimport (\n\t\"github.com/agentd/agentd/gen/agentd/v1\"\n\t\"google.golang.org/genproto/googleapis/rpc/errdetails\"\n)\n\nfunc pick() string { return \"\" }\n\n" + tc.src + "\n"
			_, err := reasontest.Used(writeFiles(t, map[string]string{"p.go": src}), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	doc := map[reasontest.Set][]string{
		reasontest.Status: {"BAD_START", "INTERNAL"},
		reasontest.Run:    {"INTERNAL"},
		reasontest.Ack:    {"RATE_LIMITED"},
	}
	uses := []reasontest.Use{
		{Reason: "BAD_START", Set: reasontest.Status, Const: "reasonBadStart"},
		{Reason: "INTERNAL", Set: reasontest.Status, Const: "reasonInternal"},
		{Reason: "INTERNAL", Set: reasontest.Run, Const: "reasonInternal"},
		{Reason: "RATE_LIMITED", Set: reasontest.Ack},                       // a literal
		{Reason: "NEW_ONE", Set: reasontest.Ack, Const: "reasonNewOne"},     // undocumented
		{Reason: "BAD_START", Set: reasontest.Run, Const: "reasonBadStart"}, // documented in another set
		{Reason: "ORPHAN", Const: "reasonOrphan"},                           // a constant in no list
	}
	for i := range uses {
		if uses[i].Const != "" {
			uses[i].ConstPos.Filename = "reasons.go"
		}
	}
	uses[1].ConstPos.Filename = "errors.go"
	probs := reasontest.Diff(doc, uses, reasontest.Rules{Exact: true, ConstFile: "reasons.go"})
	want := []string{
		"-: BAD_START is sent among the run reasons, and the contract does not list it there",
		"-: NEW_ONE is sent among the ack reasons, and the contract does not list it there",
		"-: reason ORPHAN is in none of the contract's lists",
		"-: reason RATE_LIMITED is a string literal: name it in reasons.go",
		"errors.go: reason constant reasonInternal is declared outside reasons.go",
	}
	if diff := cmp.Diff(want, probs); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}

	// Exact: a listed reason nothing sends in its set.
	probs = reasontest.Diff(doc, uses[:3], reasontest.Rules{Exact: true})
	if want := []string{"the contract lists RATE_LIMITED among the ack reasons, and the code never sends it as one"}; !cmp.Equal(want, probs) {
		t.Errorf("Diff, exact: %q, want %q", probs, want)
	}
	if probs := reasontest.Diff(doc, uses[:3], reasontest.Rules{}); len(probs) > 0 {
		t.Errorf("Diff, not exact: %q, want nothing", probs)
	}
}
