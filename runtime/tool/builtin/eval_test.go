package builtin_test

import (
	"math"
	"strings"
	"testing"

	"github.com/agentd/agentd/runtime/tool/builtin"
)

func TestEvaluate(t *testing.T) {
	tests := []struct {
		expr string
		want float64
	}{
		{"2+2", 4},
		{"12*7", 84},
		{" 12 * 7 ", 84},
		{"(3+4)/2", 3.5},
		{"1 - 2 - 3", -4},
		{"2 * 3 + 4", 10},
		{"2 + 3 * 4", 14},
		{"2 * (3 + 4)", 14},
		{"10 / 4", 2.5},
		{"7 % 3", 1},
		{"-7 % 3", -1},
		{"7.5 % 2", 1.5},
		{"2^10", 1024},
		{"2**10", 1024},
		{"2^3^2", 512}, // right-associative
		{"-2^2", -4},   // the sign binds looser than the power
		{"(-2)^2", 4},
		{"2^-1", 0.5},
		{"--3", 3},
		{"-+-3", 3},
		{"+5", 5},
		{".5 + 1.", 1.5},
		{"1.5e3", 1500},
		{"2E-2", 0.02},
		{"0.1 + 0.2", 0.3},
		{"1/3", 0.333333333333333},
		{"-0", 0},
		{"0 * -1", 0},
		{"sqrt(16)", 4},
		{"SQRT(2)^2", 2},
		{"abs(-3.5)", 3.5},
		{"abs(2 - sqrt(49))", 5},
		{"12 × 7", 84},
		{"84 ÷ 7", 12},
		{"10 − 4", 6},
		{"((((1))))", 1},
		{"\t3\n*\r2", 6},
		{"4^0.5", 2},
	}
	for _, tt := range tests {
		got, err := builtin.Evaluate(tt.expr)
		if err != nil {
			t.Errorf("Evaluate(%q): %v", tt.expr, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Evaluate(%q) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{"", "the expression is empty"},
		{"   ", "the expression is empty"},
		{"1/0", "at position 2: division by zero"},
		{"1 / (2 - 2)", "at position 3: division by zero"},
		{"5 % 0", "at position 3: division by zero"},
		{"0^-1", "division by zero: 0 to a negative power"},
		{"2 +", "at position 4: unexpected end of the expression, want a number"},
		{"2 3", `at position 3: unexpected '3'`},
		{"(1+2", `missing ")"`},
		{"(1+2 3)", `at position 6: unexpected '3'`},
		{"1+2)", `at position 4: unexpected ')'`},
		{"2(3)", `at position 2: unexpected '('`},
		{"x + 1", `at position 1: unknown name "x"`},
		{"pi", `unknown name "pi"`},
		{"sqrt 4", `want "(" after sqrt`},
		{"sqrt(-1)", "the result is not a real number"},
		{"(-8)^(1/3)", "the result is not a real number"},
		{"10^400", "the result is too large"},
		{"1e400", "the number 1e400 is too large"},
		{"9e307 * 10", "the result is too large"},
		{"2e", `unexpected 'e'`},
		{".", `unexpected ".", want a number`},
		{"1..2", `unexpected '.'`},
		{"1 ** ** 2", `unexpected '*', want a number`},
		{"1 = 1", `unexpected '='`},
		{"é", `at position 1: unexpected 'é'`},
		{"1 + é", `at position 5: unexpected 'é'`},
		{"eval(1)", `unknown name "eval"`},
		{strings.Repeat("1+", 128) + "1", "the expression has 257 characters, more than 256"},
		{strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40), "nests more than 32 levels deep"},
		{strings.Repeat("-", 40) + "1", "nests more than 32 levels deep"},
		{strings.Repeat("2^", 40) + "1", "nests more than 32 levels deep"},
		{strings.Repeat("sqrt(", 40) + "1" + strings.Repeat(")", 40), "nests more than 32 levels deep"},
	}
	for _, tt := range tests {
		got, err := builtin.Evaluate(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Evaluate(%.40q) = %v, %v; want an error containing %q", tt.expr, got, err, tt.want)
		}
	}
}

func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{"2+2", "(3+4)/2", "-2^2", "sqrt(16)*abs(-1)", "1e3%7", "((1))", "2**-0.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		v, err := builtin.Evaluate(expr)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("Evaluate(%q) = %v with no error, want a finite number", expr, v)
		}
	})
}
