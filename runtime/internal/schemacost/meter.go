package schemacost

import "unicode/utf8"

// Object, jsonArray and jsonString carry decoded arguments to the validator. At every
// failing application it quotes the value with %v; these print as a short summary, so a
// message costs the same whatever the value holds. They validate as the plain types do:
// the validator goes by reflect.Kind.
type (
	Object     map[string]any
	jsonArray  []any
	jsonString string
)

func (o Object) String() string {
	if len(o) == 0 {
		return "{}"
	}
	return "{…}"
}

func (a jsonArray) String() string {
	if len(a) == 0 {
		return "[]"
	}
	return "[…]"
}

// maxQuotedString bounds the bytes of a string value an error message quotes with %v.
const maxQuotedString = 64

func (s jsonString) String() string {
	if len(s) <= maxQuotedString {
		return string(s)
	}
	return string(s[:cutAtRune(string(s), maxQuotedString)]) + "…"
}

// cutAtRune returns where to cut s to keep at most n bytes (n < len(s)) without splitting
// a character: n, or the start of the character byte n falls in.
func cutAtRune(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// Meter converts decoded arguments for the validator and sums what validating them
// can cost by the schema's Cost: for a value at depth d, cost.work[d] applications, each
// of which may print an error message (the value as these types print it, or a string or
// the property names in full, for minLength, maxLength, pattern and additionalProperties;
// the subschema's text) that the cost.calls[d] calls around it copy in turn, do work in
// proportion to the value's properties or items, match the value's bytes against regular
// expressions, and hash an array's items.
//
// Set Cost and MaxDepth, call [Meter.Measure] once, then read what it found. A Meter
// measures one call's arguments; it is not safe for concurrent use.
type Meter struct {
	// Cost is the schema's, from [Analyze].
	Cost *Cost
	// MaxDepth is the deepest the arguments may nest: the schema's [Limits.MaxArgsDepth].
	MaxDepth int

	// TooDeep says the arguments nest deeper than MaxDepth; Measure stopped there, and
	// the counts below are partial.
	TooDeep bool
	// Values counts the values of the arguments.
	Values int
	// Work is the subschema applications validating them can cost.
	Work uint64
	// Bytes is the estimated bytes validating them can allocate, and steps matching
	// regular expressions.
	Bytes uint64
}

// Measure converts the decoded arguments o for the validator, in place, sums what
// validating them can cost into m, and returns o as an [Object].
func (m *Meter) Measure(o map[string]any) Object {
	m.Bytes = m.Cost.base
	v, _ := m.value(o, 0, 0)
	if o, ok := v.(Object); ok {
		return o
	}
	return Object(o)
}

// value converts v, at depth under a property name of nameLen bytes (0 for an item), in
// place, adds its cost, and returns it with its size for hashing.
func (m *Meter) value(v any, depth, nameLen int) (_ any, size uint64) {
	if depth > m.MaxDepth {
		m.TooDeep = true
		return v, 0
	}
	m.Values++
	name := uint64(nameLen)
	var (
		printed  = 4*name + 64 // propertyNames messages quote the name
		matched  = name + 1    // propertyNames patterns match it
		children uint64
		array    bool
	)
	size = 16 + name
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if m.TooDeep {
				return v, size
			}
			c, n := m.value(e, depth+1, len(k))
			x[k] = c
			size = satAdd(size, n)
			printed = satAdd(printed, 4*uint64(len(k))+4)
			matched = satAdd(matched, uint64(len(k))+1)
			children++
		}
		v = Object(x)
	case []any:
		for i, e := range x {
			if m.TooDeep {
				return v, size
			}
			c, n := m.value(e, depth+1, 0)
			x[i] = c
			size = satAdd(size, n)
			children++
		}
		v, array = jsonArray(x), true
	case string:
		n := uint64(len(x))
		printed = satAdd(printed, 4*n)
		matched = satAdd(matched, n)
		size = satAdd(size, n)
		v = jsonString(x)
	}
	if depth >= len(m.Cost.work) {
		return v, size // the validator does not look this deep
	}
	work := m.Cost.work[depth]
	one := satMul(m.Cost.calls[depth], satAdd(2*printed, m.Cost.text))
	one = satAdd(one, 64*(children+1))
	one = satAdd(one, satMul(m.Cost.match, matched))
	if array {
		one = satAdd(one, satMul(m.Cost.hash, size))
	}
	m.Work = satAdd(m.Work, work)
	m.Bytes = satAdd(m.Bytes, satMul(work, one))
	return v, size
}
