package runtime

// jsonObject, jsonArray and jsonString carry decoded arguments to the validator. At every
// failing application it quotes the value with %v; these print as a short summary, so a
// message costs the same whatever the value holds. They validate as the plain types do:
// the validator goes by reflect.Kind.
type (
	jsonObject map[string]any
	jsonArray  []any
	jsonString string
)

func (o jsonObject) String() string {
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

// argsMeter converts decoded arguments for the validator and sums what validating them
// can cost by the schema's cost: for a value at depth d, cost.work[d] applications, each
// of which may print an error message (the value as these types print it, or a string or
// the property names in full, for minLength, maxLength, pattern and additionalProperties;
// the subschema's text) that the cost.calls[d] calls around it copy in turn, do work in
// proportion to the value's properties or items, match the value's bytes against regular
// expressions, and hash an array's items.
type argsMeter struct {
	cost     *schemaCost
	maxDepth int

	tooDeep bool
	values  int
	work    uint64 // subschema applications
	bytes   uint64 // estimated bytes allocated, and steps matching regular expressions
}

func (m *argsMeter) object(o map[string]any) jsonObject {
	m.bytes = m.cost.base
	v, _ := m.value(o, 0, 0)
	if o, ok := v.(jsonObject); ok {
		return o
	}
	return jsonObject(o)
}

// value converts v, at depth under a property name of nameLen bytes (0 for an item), in
// place, adds its cost, and returns it with its size for hashing.
func (m *argsMeter) value(v any, depth, nameLen int) (_ any, size uint64) {
	if depth > m.maxDepth {
		m.tooDeep = true
		return v, 0
	}
	m.values++
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
			if m.tooDeep {
				return v, size
			}
			c, n := m.value(e, depth+1, len(k))
			x[k] = c
			size = satAdd(size, n)
			printed = satAdd(printed, 4*uint64(len(k))+4)
			matched = satAdd(matched, uint64(len(k))+1)
			children++
		}
		v = jsonObject(x)
	case []any:
		for i, e := range x {
			if m.tooDeep {
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
	if depth >= len(m.cost.work) {
		return v, size // the validator does not look this deep
	}
	work := m.cost.work[depth]
	one := satMul(m.cost.calls[depth], satAdd(2*printed, m.cost.text))
	one = satAdd(one, 64*(children+1))
	one = satAdd(one, satMul(m.cost.match, matched))
	if array {
		one = satAdd(one, satMul(m.cost.hash, size))
	}
	m.work = satAdd(m.work, work)
	m.bytes = satAdd(m.bytes, satMul(work, one))
	return v, size
}
