package builtin

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of [Evaluate]. They bound its time and stack whatever the input.
const (
	// MaxExpressionLen is the longest expression, in characters.
	MaxExpressionLen = 256
	// MaxDepth bounds the nesting of parentheses, function calls, signs and powers.
	MaxDepth = 32
)

// Evaluate returns the value of an arithmetic expression. The grammar, loosest binding
// first:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | power
//	power   = primary [ ("^" | "**") unary ]         right-associative
//	primary = number | "(" expr ")" | ("sqrt" | "abs") "(" expr ")"
//
// Numbers are decimals with an optional exponent (1.5, .5, 2e3). "×", "÷" and "−" are
// read as "*", "/" and "-". % is the remainder with the sign of the dividend, as in
// [math.Mod]. The value is rounded to 15 significant digits, which hides binary
// floating-point noise (0.1 + 0.2 is 0.3).
//
// An expression longer than [MaxExpressionLen] or nested deeper than [MaxDepth], a syntax
// error, a division by zero and a result that is not a finite real number are errors that
// say what is wrong and where, for a model to correct itself.
func Evaluate(expr string) (float64, error) {
	if n := utf8.RuneCountInString(expr); n > MaxExpressionLen {
		return 0, fmt.Errorf("the expression has %d characters, more than %d", n, MaxExpressionLen)
	}
	if strings.TrimSpace(expr) == "" {
		return 0, errors.New("the expression is empty")
	}
	p := &parser{src: expr}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if p.skipSpace(); p.pos < len(p.src) {
		return 0, p.unexpected()
	}
	v, err = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 15, 64), 64)
	if err != nil {
		return 0, errors.New("the result is too large")
	}
	if v == 0 {
		v = 0 // no negative zero
	}
	return v, nil
}

// parser evaluates while it parses: the grammar is small enough that a tree would add
// nothing.
type parser struct {
	src   string
	pos   int // byte offset of the next character
	depth int
}

// errorf returns an error at the current position, counted in characters from 1.
func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("at position %d: %s", utf8.RuneCountInString(p.src[:p.pos])+1, fmt.Sprintf(format, args...))
}

func (p *parser) unexpected() error {
	if p.pos >= len(p.src) {
		return p.errorf("unexpected end of the expression")
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return p.errorf("unexpected %q", r)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.pos]) >= 0 {
		p.pos++
	}
}

// accept consumes the first of tokens found at the current position (after spaces).
func (p *parser) accept(tokens ...string) bool {
	p.skipSpace()
	for _, t := range tokens {
		if strings.HasPrefix(p.src[p.pos:], t) {
			p.pos += len(t)
			return true
		}
	}
	return false
}

// enter counts one level of nesting; leave must follow.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errorf("the expression nests more than %d levels deep", MaxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// checked turns a value that is not a finite real number into an error.
func (p *parser) checked(v float64) (float64, error) {
	switch {
	case math.IsNaN(v):
		return 0, p.errorf("the result is not a real number")
	case math.IsInf(v, 0):
		return 0, p.errorf("the result is too large")
	}
	return v, nil
}

func (p *parser) expr() (float64, error) {
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for {
		var sign float64
		switch {
		case p.accept("+"):
			sign = 1
		case p.accept("-", "−"):
			sign = -1
		default:
			return v, nil
		}
		r, err := p.term()
		if err != nil {
			return 0, err
		}
		if v, err = p.checked(v + sign*r); err != nil {
			return 0, err
		}
	}
}

func (p *parser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		p.skipSpace()
		at := p.pos
		var op byte
		switch {
		case p.accept("*", "×"):
			op = '*'
		case p.accept("/", "÷"):
			op = '/'
		case p.accept("%"):
			op = '%'
		default:
			return v, nil
		}
		r, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch op {
		case '*':
			v *= r
		case '/', '%':
			if r == 0 {
				p.pos = at
				return 0, p.errorf("division by zero")
			}
			if op == '/' {
				v /= r
			} else {
				v = math.Mod(v, r)
			}
		}
		if v, err = p.checked(v); err != nil {
			return 0, err
		}
	}
}

func (p *parser) unary() (float64, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	switch {
	case p.accept("-", "−"):
		v, err := p.unary()
		return -v, err
	case p.accept("+"):
		return p.unary()
	}
	return p.power()
}

func (p *parser) power() (float64, error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if !p.accept("**", "^") {
		return base, nil
	}
	exp, err := p.unary()
	if err != nil {
		return 0, err
	}
	if base == 0 && exp < 0 {
		return 0, p.errorf("division by zero: 0 to a negative power")
	}
	return p.checked(math.Pow(base, exp))
}

func (p *parser) primary() (float64, error) {
	p.skipSpace()
	if p.accept("(") {
		return p.group()
	}
	if p.pos >= len(p.src) {
		return 0, p.errorf("unexpected end of the expression, want a number")
	}
	c := p.src[p.pos]
	switch {
	case c >= '0' && c <= '9' || c == '.':
		return p.number()
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return p.call()
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return 0, p.errorf("unexpected %q, want a number or \"(\"", r)
}

// group parses the rest of a parenthesised expression.
func (p *parser) group() (float64, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if !p.accept(")") {
		if p.pos >= len(p.src) {
			return 0, p.errorf("missing \")\"")
		}
		return 0, p.unexpected()
	}
	return v, nil
}

// call parses sqrt(x) or abs(x).
func (p *parser) call() (float64, error) {
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9') {
			break
		}
		p.pos++
	}
	name := p.src[start:p.pos]
	var fn func(float64) float64
	switch strings.ToLower(name) {
	case "sqrt":
		fn = math.Sqrt
	case "abs":
		fn = math.Abs
	default:
		p.pos = start
		return 0, p.errorf("unknown name %q: only numbers, operators, parentheses, sqrt() and abs() are allowed", name)
	}
	if !p.accept("(") {
		return 0, p.errorf("want \"(\" after %s", name)
	}
	v, err := p.group()
	if err != nil {
		return 0, err
	}
	return p.checked(fn(v))
}

func (p *parser) number() (float64, error) {
	start := p.pos
	digits := 0
	for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
		p.pos++
		digits++
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
			p.pos++
			digits++
		}
	}
	if digits == 0 {
		p.pos = start
		return 0, p.errorf("unexpected \".\", want a number")
	}
	// An exponent only when digits follow: "2e" is a number and an unknown name.
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		i := p.pos + 1
		if i < len(p.src) && (p.src[i] == '+' || p.src[i] == '-') {
			i++
		}
		if i < len(p.src) && isDigit(p.src[i]) {
			for i < len(p.src) && isDigit(p.src[i]) {
				i++
			}
			p.pos = i
		}
	}
	v, err := strconv.ParseFloat(p.src[start:p.pos], 64)
	if err != nil {
		// Only a range error is possible here: the text is a well-formed number.
		at := p.pos
		p.pos = start
		err = p.errorf("the number %s is too large", p.src[start:at])
		return 0, err
	}
	return v, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
