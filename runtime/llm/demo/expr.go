package demo

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// wordOpRE matches an operator written as a word between two operands: "12 times 7",
// "3 divided by 4", "2 to the power of 8".
var wordOpRE = regexp.MustCompile(`(?i)([0-9.)])\s*\b(plus|minus|times|x|multiplied\s+by|divided\s+by|over|mod|modulo|to\s+the\s+power\s+of)\b\s*([0-9.(\-])`)

var wordOps = map[string]string{
	"plus": "+", "minus": "-", "times": "*", "x": "*", "multiplied by": "*",
	"divided by": "/", "over": "/", "mod": "%", "modulo": "%", "to the power of": "^",
}

// tightXRE matches "12x7".
var tightXRE = regexp.MustCompile(`(\d)[xX](\d)`)

// dateRE matches a date such as 2026-11-30 or 30/11/2026, which is not arithmetic.
var dateRE = regexp.MustCompile(`^\d{1,4}\s*([-/.])\s*\d{1,2}\s*([-/.])\s*\d{1,4}$`)

// findExpression returns the longest arithmetic expression in s, with operators written
// as words replaced by symbols, or "" if s holds none. An expression has at least one
// operator between two operands; "-5" or a date is not one.
func findExpression(s string) string {
	if len(s) > 4096 {
		return "" // nobody asks for arithmetic in an essay; keeps the scan cheap
	}
	s = normalizeOps(s)
	best := ""
	for _, run := range exprRuns(s) {
		run = trimExpr(run)
		if len(run) > len(best) && isArithmetic(run) {
			best = run
		}
	}
	return best
}

// phraseRules rewrite arithmetic asked in words into an expression: "add 2 and 3",
// "subtract 3 from 10", "multiply 3 by 4", "divide 10 by 4", "15% of 80", "square root
// of 16". Each runs once over the message, in this order.
var phraseRules = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`(?i)\b(?:add|sum\s+of)\s+(-?[0-9.]+)\s+(?:and|to|plus)\s+(-?[0-9.]+)`), "$1 + $2"},
	{regexp.MustCompile(`(?i)\bsubtract\s+(-?[0-9.]+)\s+from\s+(-?[0-9.]+)`), "$2 - $1"},
	{regexp.MustCompile(`(?i)\b(?:multiply|product\s+of)\s+(-?[0-9.]+)\s+(?:by|and|with)\s+(-?[0-9.]+)`), "$1 * $2"},
	{regexp.MustCompile(`(?i)\bdivide\s+(-?[0-9.]+)\s+by\s+(-?[0-9.]+)`), "$1 / $2"},
	{regexp.MustCompile(`(?i)([0-9.]+)\s*(?:%|percent)\s+of\s+(-?[0-9.]+)`), "$1 / 100 * $2"},
	{regexp.MustCompile(`(?i)\bsquare\s+root\s+of\s+([0-9.]+)`), "sqrt($1)"},
}

// normalizeOps replaces operators written as words with symbols.
func normalizeOps(s string) string {
	for _, r := range phraseRules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	s = tightXRE.ReplaceAllString(s, "$1*$2")
	// Matches overlap ("1 plus 2 plus 3" shares the 2), so replace one at a time.
	for range 64 {
		m := wordOpRE.FindStringSubmatchIndex(s)
		if m == nil {
			break
		}
		word := strings.ToLower(strings.Join(strings.Fields(s[m[4]:m[5]]), " "))
		s = s[:m[3]] + " " + wordOps[word] + " " + s[m[6]:]
	}
	return s
}

// exprRuns splits s into runs of characters an expression may hold.
func exprRuns(s string) []string {
	var runs []string
	start := -1
	flush := func(end int) {
		if start >= 0 {
			runs = append(runs, s[start:end])
			start = -1
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n := 0
		switch {
		case strings.ContainsRune("0123456789.+-*/%^() ×÷−", r):
			n = size
		case r == 'e' || r == 'E':
			// An exponent: a digit before, and a digit (after an optional sign) after.
			j := i + 1
			if j < len(s) && (s[j] == '+' || s[j] == '-') {
				j++
			}
			if i > 0 && isDigit(s[i-1]) && j < len(s) && isDigit(s[j]) {
				n = 1
			}
		default:
			for _, fn := range []string{"sqrt", "abs"} {
				if len(s)-i >= len(fn) && strings.EqualFold(s[i:i+len(fn)], fn) && strings.HasPrefix(strings.TrimLeft(s[i+len(fn):], " "), "(") {
					n = len(fn)
				}
			}
		}
		if n == 0 {
			flush(i)
			i += size
			continue
		}
		if start < 0 {
			start = i
		}
		i += n
	}
	flush(len(s))
	return runs
}

// trimExpr trims what cannot start or end an expression, and unmatched parentheses at
// its ends: "(what is 2+2)" gives the run "2+2)".
func trimExpr(s string) string {
	for {
		before := s
		s = strings.TrimSpace(s)
		s = strings.TrimRight(s, ".+-*/%^(×÷− ")
		s = strings.TrimLeft(s, "*/%^)×÷ ")
		open, closed := strings.Count(s, "("), strings.Count(s, ")")
		switch {
		case open > closed && strings.HasPrefix(s, "("):
			s = s[1:]
		case closed > open && strings.HasSuffix(s, ")"):
			s = s[:len(s)-1]
		}
		if s == before {
			return s
		}
	}
}

// isArithmetic reports whether s has an operator between two operands, or is a function
// applied to a number ("sqrt(16)"), and is not a date.
func isArithmetic(s string) bool {
	if dateRE.MatchString(s) {
		return false
	}
	if l := strings.ToLower(s); (strings.HasPrefix(l, "sqrt") || strings.HasPrefix(l, "abs")) && strings.ContainsAny(s, "0123456789") {
		return true
	}
	operand := false // an operand came before
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= '0' && r <= '9' || r == ')' {
			operand = true
		}
		if operand && strings.ContainsRune("+-*/%^×÷−", r) && strings.ContainsAny(s[i+size:], "0123456789") {
			return true
		}
		i += size
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
