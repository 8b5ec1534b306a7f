package guardrail

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/agentd/agentd/runtime"
)

// DenyList returns a guardrail that trips when the checked text (GuardCheck.Text) matches
// one of patterns or holds one of keywords. An empty spec.Name means [DenyListName], zero
// spec.Stages means runtime.GuardInput|runtime.GuardOutput; at a tool stage it checks the
// call's arguments or its result as the model reads them.
//
// Patterns are RE2 regular expressions (package regexp's syntax), matched anywhere in
// the text as it is: anchor them, or add (?i), to say otherwise. Keywords are matched as
// substrings, ignoring case and compatibility forms: the text and the keyword are both
// NFKC-normalised and Unicode case-folded first, so "secret" matches "SECRETS",
// "Secretary" and "ＳＥＣＲＥＴ", and "strasse" matches "Straße". A keyword that must only
// match whole words is a pattern: `(?i)\bsecret\b`.
//
// The trip's Reason is `matched the rule "<rule>"` and its Details hold the rule under
// "rule": the first pattern in patterns that matches, else the first keyword in keywords
// the text holds, as given. The reason reaches the run's client and logs, and, at a tool
// stage with runtime.GuardCorrect, the model.
//
// DenyList refuses no patterns and no keywords, a pattern that does not compile, and an
// empty or blank keyword; its error names the one at fault ("patterns[2]: …").
func DenyList(spec runtime.GuardSpec, patterns, keywords []string) (runtime.Guardrail, error) {
	spec = withDefaults(spec, DenyListName, runtime.GuardInput|runtime.GuardOutput)
	if len(patterns) == 0 && len(keywords) == 0 {
		return nil, configError(spec.Name, "no patterns and no keywords")
	}
	d := &denyList{spec: spec, keywords: slices.Clone(keywords)}
	alts := make([]string, len(patterns))
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, configError(spec.Name, "patterns[%d]: %v", i, err)
		}
		d.patterns = append(d.patterns, re)
		alts[i] = "(?:" + p + ")"
	}
	if len(patterns) > 1 {
		// One pass over the text for every pattern. Each alternative's flags stay within
		// its group. Patterns past the regexp package's size limits together, or whose
		// \Q runs to their end, do not compile as one: each is then matched on its own.
		d.any, _ = regexp.Compile(strings.Join(alts, "|"))
	}
	for i, k := range keywords {
		if strings.TrimSpace(k) == "" {
			return nil, configError(spec.Name, "keywords[%d] is empty", i)
		}
		f := foldKey(k)
		if strings.TrimSpace(f) == "" {
			return nil, configError(spec.Name, "keywords[%d] (%q) is empty once normalised", i, k)
		}
		d.folded = append(d.folded, f)
	}
	return d, nil
}

// denyList is the guardrail DenyList returns. It is safe for concurrent use: nothing in
// it changes once it is built.
type denyList struct {
	runtime.NoHooks
	spec     runtime.GuardSpec
	patterns []*regexp.Regexp
	// any is patterns as one alternation, to rule out a match in one pass; nil when there
	// is one pattern or none, or when they do not compile as one.
	any *regexp.Regexp
	// keywords are as given, folded as matched (foldKey).
	keywords, folded []string
}

// Guard returns the guardrail's spec.
func (d *denyList) Guard() runtime.GuardSpec { return guardSpec(d.spec) }

// Check trips when in.Text matches a pattern or holds a keyword.
func (d *denyList) Check(_ context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
	rule, ok := d.match(in.Text)
	if !ok {
		return nil, nil
	}
	return &runtime.Trip{Reason: fmt.Sprintf("matched the rule %q", rule), Details: map[string]string{"rule": rule}}, nil
}

// match returns the rule text breaks: the first matching pattern, else the first keyword
// it holds.
func (d *denyList) match(text string) (string, bool) {
	if d.any == nil || d.any.MatchString(text) {
		for _, re := range d.patterns {
			if re.MatchString(text) {
				return re.String(), true
			}
		}
	}
	if len(d.folded) > 0 {
		t := foldKey(text)
		for i, k := range d.folded {
			if strings.Contains(t, k) {
				return d.keywords[i], true
			}
		}
	}
	return "", false
}

// fold is Unicode case folding; it is stateless, safe for concurrent use.
var fold = cases.Fold()

// foldKey returns s as keywords are matched: NFKC-normalised, then case-folded, so that
// "ＡＢＣ", "ABC" and "abc" compare equal, and "ß" matches "ss".
func foldKey(s string) string {
	return fold.String(norm.NFKC.String(s))
}
