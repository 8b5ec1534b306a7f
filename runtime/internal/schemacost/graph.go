package schemacost

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// This file computes, for a schema that jsonschema-go v0.4.3 has resolved, what validating
// arguments against it can cost (see [Limits]). It follows references the way that
// version does; a reference it cannot follow the same way makes the schema refused, so
// the bound never rests on a guess.

// The $schema values jsonschema-go reads as draft-07; any other is read as draft 2020-12.
const (
	draft7SchemaURI    = "http://json-schema.org/draft-07/schema#"
	draft7SecSchemaURI = "https://json-schema.org/draft-07/schema#"
)

// Cost is what compiling learnt about the cost of validating against a schema: [Analyze]
// returns it, and a [Meter] sums it over the values of one call's arguments. Nothing
// changes a Cost once Analyze has returned it, so it is safe for concurrent use.
type Cost struct {
	// work[d] is the most subschema applications a value at depth d of the arguments
	// costs; calls[d] the most nested calls of the validator down to one of them. Both are
	// zero past the depths the schema reaches.
	work, calls []uint64
	// text bounds what one application prints of the schema in an error message (the
	// subschema's name, quoted enums and consts, the names in an anyOf) and its fixed work
	// (looking up each of its properties, comparing its enum).
	text uint64
	// match bounds the steps per byte of a string or property name that one application
	// spends matching the subschema's regular expressions.
	match uint64
	// hash is the cost per byte of hashing an array's items, if a subschema has
	// uniqueItems.
	hash uint64
	// base is what any validation allocates: the validator's state, and the regular
	// expressions' matching machines (up to 32 KiB and some bytes per instruction, on
	// first use).
	base uint64
}

// satMax caps the saturating arithmetic below: counts past it read as "too many".
const satMax = 1 << 62

func satAdd(a, b uint64) uint64 { return min(a+b, satMax) } // a, b <= satMax

func satMul(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > satMax/b {
		return satMax
	}
	return min(a*b, satMax)
}

// FormatCount formats n, a count from the saturating arithmetic of this package (such as
// [Meter.Work] or [Meter.Bytes]), for an error message: a count that reached the cap reads
// "more than 4611686018427387904".
func FormatCount(n uint64) string {
	if n >= satMax {
		return "more than " + strconv.FormatUint(satMax, 10)
	}
	return strconv.FormatUint(n, 10)
}

// JSONNesting returns how deeply the objects and arrays of JSON text b nest. It reads b as
// it is, without checking that it is valid JSON.
func JSONNesting(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// eachChild calls f with every subschema directly inside s and the JSON Pointer segment that
// leads to it, as jsonschema-go builds its paths, in a fixed order.
func eachChild(s *jsonschema.Schema, f func(seg string, c *jsonschema.Schema)) {
	one := func(kw string, c *jsonschema.Schema) {
		if c != nil {
			f("/"+kw, c)
		}
	}
	list := func(kw string, cs []*jsonschema.Schema) {
		for i, c := range cs {
			if c != nil {
				f("/"+kw+"/"+strconv.Itoa(i), c)
			}
		}
	}
	byName := func(kw string, m map[string]*jsonschema.Schema) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if c := m[k]; c != nil {
				f("/"+kw+"/"+pointerEscaper.Replace(k), c)
			}
		}
	}
	byName("$defs", s.Defs)
	one("additionalItems", s.AdditionalItems)
	one("additionalProperties", s.AdditionalProperties)
	list("allOf", s.AllOf)
	list("anyOf", s.AnyOf)
	one("contains", s.Contains)
	one("contentSchema", s.ContentSchema)
	byName("definitions", s.Definitions)
	byName("dependencies", s.DependencySchemas)
	byName("dependentSchemas", s.DependentSchemas)
	one("else", s.Else)
	one("if", s.If)
	one("items", s.Items)
	list("items", s.ItemsArray)
	one("not", s.Not)
	list("oneOf", s.OneOf)
	byName("patternProperties", s.PatternProperties)
	list("prefixItems", s.PrefixItems)
	byName("properties", s.Properties)
	one("propertyNames", s.PropertyNames)
	one("then", s.Then)
	one("unevaluatedItems", s.UnevaluatedItems)
	one("unevaluatedProperties", s.UnevaluatedProperties)
}

var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~0", "~", "~1", "/")
)

// CheckShape checks the limits that need no references followed: how deeply
// subschemas nest, how many references there are, and how large the regular expressions
// are. It runs before the schema is resolved, which compiles the regular expressions.
// A schema past a limit is refused with an error wrapping [ErrTooComplex]; limits must
// have its defaults set ([Limits.WithDefaults]).
func CheckShape(root *jsonschema.Schema, limits Limits) error {
	var (
		refs, deepest int
		deepestAt     string
		patterns      uint64
	)
	var walk func(s *jsonschema.Schema, path string, depth int)
	walk = func(s *jsonschema.Schema, path string, depth int) {
		if depth > deepest {
			deepest, deepestAt = depth, path
		}
		if depth > limits.MaxDepth {
			return // refused below; the rest need not be counted
		}
		if s.Ref != "" {
			refs++
		}
		if s.DynamicRef != "" {
			refs++
		}
		if s.Pattern != "" {
			patterns = satAdd(patterns, patternSize(s.Pattern))
		}
		for p := range s.PatternProperties {
			patterns = satAdd(patterns, patternSize(p))
		}
		eachChild(s, func(seg string, c *jsonschema.Schema) { walk(c, path+seg, depth+1) })
	}
	walk(root, "", 1)
	switch {
	case deepest > limits.MaxDepth:
		return fmt.Errorf("%w: subschemas nest more than %d deep (at %s); the limit is %d", ErrTooComplex, limits.MaxDepth, deepestAt, limits.MaxDepth)
	case refs > limits.MaxRefs:
		return fmt.Errorf("%w: the schema has %d $ref and $dynamicRef keywords; the limit is %d", ErrTooComplex, refs, limits.MaxRefs)
	case patterns > uint64(limits.MaxPatternSize):
		return fmt.Errorf("%w: the regular expressions of pattern and patternProperties compile to about %s instructions together; the limit is %d", ErrTooComplex, FormatCount(patterns), limits.MaxPatternSize)
	}
	return nil
}

// patternSize estimates from above the instructions of the program that regexp compiles p
// to; zero if p does not parse (resolving the schema reports it). The estimate writes
// repetitions out, as the compiler does, without building anything that large.
func patternSize(p string) uint64 {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0
	}
	return satAdd(regexpSize(re), 3) // and the program's start, failure and match
}

func regexpSize(re *syntax.Regexp) uint64 {
	switch re.Op {
	case syntax.OpLiteral:
		return max(uint64(len(re.Rune)), 1)
	case syntax.OpCapture:
		return 2 + regexpSize(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return 1 + regexpSize(re.Sub[0])
	case syntax.OpRepeat:
		n := re.Max
		if n < 0 {
			n = re.Min + 1
		}
		return satMul(uint64(max(n, 1)), regexpSize(re.Sub[0])+1)
	case syntax.OpConcat, syntax.OpAlternate:
		n := uint64(len(re.Sub))
		for _, sub := range re.Sub {
			n = satAdd(n, regexpSize(sub))
		}
		return n
	}
	return 1
}

// sgNode is a subschema in the graph of a schema, or a virtual node standing for the
// subschemas a $dynamicRef may land on.
type sgNode struct {
	s       *jsonschema.Schema // nil for a virtual node
	name    string             // as the validator names it: its $id, else its path
	base    int32              // the node whose URI its references resolve against
	uri     *url.URL           // of a base: the root, or a subschema with an $id
	anchors map[string]sgAnchor
	reached bool

	// The subschemas the validator applies to the same value: every one of same, and at
	// most one of each group of alts (then or else; the landings of a $dynamicRef).
	same []int32
	alts [][]int32
	// The subschemas it applies to the values inside an object; -1 for none.
	props                    []int32
	pats                     []int32
	addl, unevalProps, names int32
	// The subschemas it applies to the items of an array: prefix[i] to item i, items to
	// the items past prefix; -1 for none.
	prefix                   []int32
	items, contains, unevalI int32
}

type sgAnchor struct {
	node    int32
	dynamic bool
}

// schemaGraph is a schema's subschemas with its references followed.
type schemaGraph struct {
	draft7  bool
	nodes   []sgNode
	index   map[*jsonschema.Schema]int32
	uris    map[string]int32 // URI -> base, as the validator's resolvedURIs
	dynamic map[string]int32 // dynamic anchor -> virtual node
}

// Analyze builds the graph of a resolved schema, refuses it if a subschema applies to
// the same value through itself or if validating one value can cost more than
// limits.MaxWork (with an error wrapping [ErrTooComplex]), and returns what validating
// against it can cost. A reference it cannot follow as jsonschema-go does is refused too.
// limits must have its defaults set ([Limits.WithDefaults]).
func Analyze(root *jsonschema.Schema, limits Limits) (Cost, error) {
	g := &schemaGraph{
		draft7:  root.Schema == draft7SchemaURI || root.Schema == draft7SecSchemaURI,
		index:   map[*jsonschema.Schema]int32{},
		uris:    map[string]int32{},
		dynamic: map[string]int32{},
	}
	if err := g.addTree(root); err != nil {
		return Cost{}, err
	}
	if err := g.link(); err != nil {
		return Cost{}, err
	}
	g.reach()
	order, err := g.sameOrder()
	if err != nil {
		return Cost{}, err
	}
	cost, err := g.count(order, limits)
	if err != nil {
		return Cost{}, err
	}
	g.errorCosts(&cost)
	return cost, nil
}

// unresolvable is the error for a reference this analysis does not follow: one to an
// absent subschema, which the validator follows to nil and then panics on, and any the
// validator would follow in a way this analysis does not know (none that it knows of).
func unresolvable(at, ref string, why string) error {
	return fmt.Errorf("parameters schema: %s: cannot follow reference %q: %s", at, ref, why)
}

// addTree adds the subschemas of root as nodes and gives them their bases, URIs and
// anchors, as the validator's resolveURIs does.
func (g *schemaGraph) addTree(root *jsonschema.Schema) error {
	var add func(s *jsonschema.Schema, path string, base int32) error
	add = func(s *jsonschema.Schema, path string, base int32) error {
		i := int32(len(g.nodes))
		g.nodes = append(g.nodes, sgNode{s: s, name: path, addl: -1, unevalProps: -1, names: -1, items: -1, contains: -1, unevalI: -1})
		g.index[s] = i
		if i == 0 {
			g.nodes[0].name = "root"
			g.nodes[0].uri = &url.URL{}
			g.uris[""] = 0
		}
		if s.ID != "" {
			g.nodes[i].name = s.ID
			// Draft-07 ignores the keywords beside $ref, $id among them.
			if !(g.draft7 && s.Ref != "") {
				id, err := url.Parse(s.ID)
				if err != nil {
					return fmt.Errorf("parameters schema: %s: $id: %w", path, err)
				}
				if g.draft7 && id.Fragment != "" {
					if err := g.anchor(base, strings.TrimPrefix(s.ID, "#"), i, false); err != nil {
						return err
					}
				} else {
					u := g.nodes[base].uri.ResolveReference(id)
					key := u.String()
					if j, dup := g.uris[key]; dup && j != i {
						return fmt.Errorf("parameters schema: %s and %s have the same $id %s", g.nodes[j].name, path, key)
					}
					g.uris[key] = i
					g.nodes[i].uri = u
					base = i
				}
			}
		}
		g.nodes[i].base = base
		if !g.draft7 {
			if err := g.anchor(base, s.Anchor, i, false); err != nil {
				return err
			}
			if err := g.anchor(base, s.DynamicAnchor, i, true); err != nil {
				return err
			}
		}
		var err error
		eachChild(s, func(seg string, c *jsonschema.Schema) {
			if err == nil {
				err = add(c, path+seg, base)
			}
		})
		return err
	}
	return add(root, "", 0)
}

func (g *schemaGraph) anchor(base int32, name string, node int32, dynamic bool) error {
	if name == "" {
		return nil
	}
	b := &g.nodes[base]
	if prev, dup := b.anchors[name]; dup {
		return fmt.Errorf("parameters schema: %s and %s declare the same anchor %q", g.nodes[prev.node].name, g.nodes[node].name, name)
	}
	if b.anchors == nil {
		b.anchors = map[string]sgAnchor{}
	}
	b.anchors[name] = sgAnchor{node, dynamic}
	return nil
}

// link gives every node its edges, with the references resolved as the validator's
// resolveRefs does, and only for the keywords its validate applies in the schema's draft.
func (g *schemaGraph) link() error {
	idx := func(c *jsonschema.Schema) int32 {
		if c == nil {
			return -1
		}
		return g.index[c]
	}
	idxs := func(cs []*jsonschema.Schema) []int32 {
		out := make([]int32, 0, len(cs))
		for _, c := range cs {
			out = append(out, idx(c))
		}
		return out
	}
	sorted := func(m map[string]*jsonschema.Schema) []int32 {
		out := make([]int32, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, idx(m[k]))
		}
		return out
	}
	for i := range g.nodes {
		n := &g.nodes[i]
		s := n.s
		if s.Ref != "" {
			t, _, err := g.resolveRef(int32(i), s.Ref)
			if err != nil {
				return err
			}
			n.same = append(n.same, t)
			if g.draft7 {
				continue // draft-07 ignores the keywords beside $ref
			}
		}
		if s.DynamicRef != "" {
			t, dynamic, err := g.resolveRef(int32(i), s.DynamicRef)
			if err != nil {
				return err
			}
			if dynamic {
				t = g.dynamicNode(g.nodes[t].s.DynamicAnchor)
				n = &g.nodes[i] // dynamicNode may have grown g.nodes
			}
			n.same = append(n.same, t)
		}
		n.same = append(n.same, idxs(s.AllOf)...)
		n.same = append(n.same, idxs(s.AnyOf)...)
		n.same = append(n.same, idxs(s.OneOf)...)
		if s.Not != nil {
			n.same = append(n.same, idx(s.Not))
		}
		if s.If != nil {
			n.same = append(n.same, idx(s.If))
			var alt []int32
			for _, c := range []*jsonschema.Schema{s.Then, s.Else} {
				if c != nil {
					alt = append(alt, idx(c))
				}
			}
			if len(alt) > 0 {
				n.alts = append(n.alts, alt)
			}
		}
		if g.draft7 {
			n.same = append(n.same, sorted(s.DependencySchemas)...)
		} else {
			n.same = append(n.same, sorted(s.DependentSchemas)...)
		}

		n.props = sorted(s.Properties)
		n.pats = sorted(s.PatternProperties)
		// additionalProperties false (or {"not":{}}) is checked without applying it.
		if a := s.AdditionalProperties; a != nil && !(a.Not != nil && reflect.ValueOf(*a.Not).IsZero()) {
			n.addl = idx(a)
		}
		n.names = idx(s.PropertyNames)
		n.unevalProps = idx(s.UnevaluatedProperties)

		switch {
		case !g.draft7:
			n.prefix, n.items = idxs(s.PrefixItems), idx(s.Items)
		case s.ItemsArray != nil:
			n.prefix, n.items = idxs(s.ItemsArray), idx(s.AdditionalItems)
		default:
			n.items = idx(s.Items)
		}
		n.contains = idx(s.Contains)
		n.unevalI = idx(s.UnevaluatedItems)
	}
	return nil
}

// resolveRef resolves the reference ref of node i as the validator's resolveRef does. For a
// $dynamicRef to a dynamic anchor, dynamic is true: the validator picks the subschema when
// validating, among those with that $dynamicAnchor.
func (g *schemaGraph) resolveRef(i int32, ref string) (_ int32, dynamic bool, _ error) {
	at := g.nodes[i].name
	u, err := url.Parse(ref)
	if err != nil {
		return 0, false, unresolvable(at, ref, err.Error())
	}
	u = g.nodes[g.nodes[i].base].uri.ResolveReference(u)
	doc := *u
	doc.Fragment = ""
	b, ok := g.uris[doc.String()]
	if !ok {
		return 0, false, unresolvable(at, ref, "no subschema has that URI")
	}
	frag := u.Fragment
	if frag != "" && !strings.HasPrefix(frag, "/") {
		a, ok := g.nodes[b].anchors[frag]
		if !ok {
			return 0, false, unresolvable(at, ref, "no such anchor")
		}
		return a.node, a.dynamic, nil
	}
	t, err := g.pointer(g.nodes[b].s, frag)
	if err != nil {
		return 0, false, unresolvable(at, ref, err.Error())
	}
	return g.index[t], false, nil
}

// pointer returns the subschema that JSON Pointer ptr leads to from s, as the validator's
// dereferenceJSONPointer does, except that a pointer to an absent subschema, which the
// validator follows to a nil schema and then panics on, is an error.
func (g *schemaGraph) pointer(s *jsonschema.Schema, ptr string) (*jsonschema.Schema, error) {
	var segs []string
	if ptr != "" {
		if ptr[0] != '/' {
			return nil, errors.New("a JSON Pointer must begin with '/'")
		}
		segs = strings.Split(ptr[1:], "/")
		if strings.Contains(ptr, "~") {
			for i := range segs {
				segs[i] = pointerUnescaper.Replace(segs[i])
			}
		}
	}
	var (
		list  []*jsonschema.Schema
		named map[string]*jsonschema.Schema
		kind  = 's' // s: at a schema, l: at a list of them, m: at a map of them
	)
	for _, seg := range segs {
		switch kind {
		case 's':
			if s == nil {
				return nil, errors.New("it passes through an absent subschema")
			}
			kind = 's'
			switch seg {
			case "$defs":
				kind, named = 'm', s.Defs
			case "definitions":
				kind, named = 'm', s.Definitions
			case "dependencies":
				kind, named = 'm', s.DependencySchemas
			case "dependentSchemas":
				kind, named = 'm', s.DependentSchemas
			case "patternProperties":
				kind, named = 'm', s.PatternProperties
			case "properties":
				kind, named = 'm', s.Properties
			case "allOf":
				kind, list = 'l', s.AllOf
			case "anyOf":
				kind, list = 'l', s.AnyOf
			case "oneOf":
				kind, list = 'l', s.OneOf
			case "prefixItems":
				kind, list = 'l', s.PrefixItems
			case "items":
				if s.Items == nil {
					kind, list = 'l', s.ItemsArray
				} else {
					s = s.Items
				}
			case "additionalItems":
				s = s.AdditionalItems
			case "additionalProperties":
				s = s.AdditionalProperties
			case "contains":
				s = s.Contains
			case "contentSchema":
				s = s.ContentSchema
			case "else":
				s = s.Else
			case "if":
				s = s.If
			case "not":
				s = s.Not
			case "propertyNames":
				s = s.PropertyNames
			case "then":
				s = s.Then
			case "unevaluatedItems":
				s = s.UnevaluatedItems
			case "unevaluatedProperties":
				s = s.UnevaluatedProperties
			default:
				return nil, fmt.Errorf("%q is not a keyword holding subschemas", seg)
			}
		case 'l':
			if seg == "-" || len(seg) > 1 && seg[0] == '0' {
				return nil, fmt.Errorf("bad index %q", seg)
			}
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(list) {
				return nil, fmt.Errorf("bad index %q", seg)
			}
			kind, s = 's', list[n]
		case 'm':
			c, ok := named[seg]
			if !ok {
				return nil, fmt.Errorf("no subschema named %q", seg)
			}
			kind, s = 's', c
		}
	}
	if kind != 's' || s == nil {
		return nil, errors.New("it points to no subschema")
	}
	return s, nil
}

// dynamicNode returns the virtual node for the subschemas with $dynamicAnchor name, adding
// it the first time.
func (g *schemaGraph) dynamicNode(name string) int32 {
	if v, ok := g.dynamic[name]; ok {
		return v
	}
	var landings []int32
	for i, n := range g.nodes {
		if n.s != nil && n.s.DynamicAnchor == name {
			landings = append(landings, int32(i))
		}
	}
	v := int32(len(g.nodes))
	g.nodes = append(g.nodes, sgNode{name: "$dynamicAnchor " + name, alts: [][]int32{landings}, addl: -1, unevalProps: -1, names: -1, items: -1, contains: -1, unevalI: -1})
	g.dynamic[name] = v
	return v
}

// edges calls f with every node n's edges lead to.
func (n *sgNode) edges(f func(int32)) {
	for _, t := range n.same {
		f(t)
	}
	for _, alt := range n.alts {
		for _, t := range alt {
			f(t)
		}
	}
	for _, ts := range [][]int32{n.props, n.pats, n.prefix} {
		for _, t := range ts {
			f(t)
		}
	}
	for _, t := range []int32{n.addl, n.unevalProps, n.names, n.items, n.contains, n.unevalI} {
		if t >= 0 {
			f(t)
		}
	}
}

// reach marks the nodes that validating can apply: those the root leads to.
func (g *schemaGraph) reach() {
	stack := []int32{0}
	g.nodes[0].reached = true
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		g.nodes[i].edges(func(t int32) {
			if !g.nodes[t].reached {
				g.nodes[t].reached = true
				stack = append(stack, t)
			}
		})
	}
}

// sameOrder returns the reached nodes ordered so that each comes after every node it
// applies to the same value, or an error naming a cycle of them: validating would go round
// it for ever (the validator has no guard, and overflows the stack).
func (g *schemaGraph) sameOrder() ([]int32, error) {
	const (
		unseen = iota
		open
		done
	)
	state := make([]uint8, len(g.nodes))
	order := make([]int32, 0, len(g.nodes))
	var path []int32
	var visit func(i int32) error
	visit = func(i int32) error {
		state[i] = open
		path = append(path, i)
		n := &g.nodes[i]
		for _, group := range append([][]int32{n.same}, n.alts...) {
			for _, t := range group {
				switch state[t] {
				case open:
					at := slices.Index(path, t)
					var names []string
					for _, p := range append(path[at:], t) {
						if g.nodes[p].s != nil {
							names = append(names, g.nodes[p].name)
						}
					}
					return fmt.Errorf("%w: a subschema applies to the same value through itself (%s: $ref, allOf, anyOf and the like), so validating would never end", ErrTooComplex, strings.Join(names, " → "))
				case unseen:
					if err := visit(t); err != nil {
						return err
					}
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		order = append(order, i)
		return nil
	}
	for i := range g.nodes {
		if g.nodes[i].reached && state[i] == unseen {
			if err := visit(int32(i)); err != nil {
				return nil, err
			}
		}
	}
	return order, nil
}

// count computes, for each depth d of the arguments up to limits.MaxArgsDepth, the most
// applications a value at depth d costs (work) and the most nested validator calls down to
// one of them (calls), and refuses the schema if work exceeds limits.MaxWork.
//
// With A_d(s) the most applications at a value d levels below one that s is applied to:
// A_0(s) = 1 + the sum of A_0 over the subschemas s applies to the same value (the larger
// of then and else; the largest landing of a $dynamicRef); and A_d(s) for d > 0 is the
// same sum of A_d plus, for the values inside, the worst of: a property, which gets
// properties[k] or additionalProperties, every patternProperties, unevaluatedProperties,
// and (d = 1) propertyNames on its name; an item, which gets prefixItems[i] or items (in
// draft-07 items[i] or additionalItems), contains and unevaluatedItems, each at A_(d-1).
// A property matching several of them gets them all, and each subschema applying at a
// level contributes its own worst, so the sums bound every value's count. work[d] is
// A_d(root).
func (g *schemaGraph) count(order []int32, limits Limits) (Cost, error) {
	n := len(g.nodes)
	work0, calls0 := make([]uint64, n), make([]uint64, n)
	prev, prevCalls := make([]uint64, n), make([]uint64, n)
	cur, curCalls := make([]uint64, n), make([]uint64, n)
	var cost Cost
	for d := 0; d <= limits.MaxArgsDepth; d++ {
		for _, i := range order {
			node := &g.nodes[i]
			var a, c uint64
			if node.s != nil {
				if d == 0 {
					a, c = 1, 1
				} else {
					a, c = g.inside(node, d, prev, prevCalls, work0, calls0)
					if a > 0 {
						c++
					}
				}
			}
			for _, t := range node.same {
				if cur[t] > 0 {
					a = satAdd(a, cur[t])
					c = max(c, satAdd(curCalls[t], 1))
				}
			}
			for _, alt := range node.alts {
				var worst uint64
				for _, t := range alt {
					if cur[t] > 0 {
						worst = max(worst, cur[t])
						c = max(c, satAdd(curCalls[t], 1))
					}
				}
				a = satAdd(a, worst)
			}
			if node.s == nil && c > 0 {
				c-- // a virtual node is no call of its own
			}
			cur[i], curCalls[i] = a, c
		}
		if d == 0 {
			copy(work0, cur)
			copy(calls0, curCalls)
		}
		if cur[0] == 0 {
			break // nothing applies this deep, nor deeper
		}
		if cur[0] > uint64(limits.MaxWork) {
			return Cost{}, fmt.Errorf("%w: validating one value of the arguments (at depth %d) could take %s subschema applications; the limit is %d: the subschemas that anyOf, allOf, oneOf, $ref and the like apply to one value add up, and so do those that several keywords apply to one property or item", ErrTooComplex, d, FormatCount(cur[0]), limits.MaxWork)
		}
		cost.work = append(cost.work, cur[0])
		cost.calls = append(cost.calls, curCalls[0])
		prev, cur = cur, prev
		prevCalls, curCalls = curCalls, prevCalls
		clear(cur)
		clear(curCalls)
	}
	return cost, nil
}

// inside returns what applying node costs at the values d > 0 levels inside, given the
// costs at d-1 levels (prev, prevCalls) and at the same level (work0, calls0).
func (g *schemaGraph) inside(node *sgNode, d int, prev, prevCalls, work0, calls0 []uint64) (work, calls uint64) {
	at := func(t int32) uint64 {
		if t < 0 {
			return 0
		}
		calls = max(calls, prevCalls[t])
		return prev[t]
	}
	worst := func(ts []int32) (w uint64) {
		for _, t := range ts {
			w = max(w, at(t))
		}
		return w
	}
	sum := func(ts []int32) (w uint64) {
		for _, t := range ts {
			w = satAdd(w, at(t))
		}
		return w
	}
	object := satAdd(satAdd(max(worst(node.props), at(node.addl)), sum(node.pats)), at(node.unevalProps))
	if d == 1 && node.names >= 0 {
		object = satAdd(object, work0[node.names])
		calls = max(calls, calls0[node.names])
	}
	array := satAdd(satAdd(max(worst(node.prefix), at(node.items)), at(node.contains)), at(node.unevalI))
	return max(object, array), calls
}

// errorCosts sets what one application can cost in error text, in fixed work and in
// matching regular expressions, the worst over the reached subschemas.
func (g *schemaGraph) errorCosts(cost *Cost) {
	cost.base = 8 << 10
	for _, n := range g.nodes {
		if !n.reached || n.s == nil {
			continue
		}
		s := n.s
		text := uint64(len(n.name)) + 16 + 96 // "validating <name>: ", and the message's words
		if s.Enum != nil {
			text = satAdd(text, printedSize(s.Enum))
		}
		if s.Const != nil {
			text = satAdd(text, printedSize(*s.Const))
		}
		text = satAdd(text, 4*uint64(len(s.Pattern)+len(s.Type)))
		for _, t := range s.Types {
			text = satAdd(text, 4*uint64(len(t))+4)
		}
		for _, r := range s.Required {
			text = satAdd(text, 4*uint64(len(r))+4)
		}
		for _, m := range []map[string][]string{s.DependentRequired, s.DependencyStrings} {
			for k, rs := range m {
				text = satAdd(text, 4*uint64(len(k))+8)
				for _, r := range rs {
					text = satAdd(text, 4*uint64(len(r))+4)
				}
			}
		}
		for _, c := range slices.Concat(s.AnyOf, s.OneOf, []*jsonschema.Schema{s.Not, s.Contains}) {
			if c != nil {
				text = satAdd(text, uint64(len(c.String()))+2)
			}
		}
		for _, m := range []map[string]*jsonschema.Schema{s.Properties, s.DependentSchemas, s.DependencySchemas} {
			for k := range m {
				text = satAdd(text, uint64(len(k))+16)
			}
		}
		cost.text = max(cost.text, text)

		match := 1 + uint64(len(s.PatternProperties))
		if s.Pattern != "" {
			match = satAdd(match, patternSize(s.Pattern))
		}
		for p := range s.PatternProperties {
			match = satAdd(match, patternSize(p))
		}
		cost.match = max(cost.match, match)
		if match > 1 {
			cost.base = max(cost.base, 48<<10+64*match)
		}
		if s.UniqueItems {
			cost.hash = 16
		}
	}
}

// printedSize bounds the length of decoded JSON value v printed by fmt with %v, %s or %q.
func printedSize(v any) uint64 {
	switch v := v.(type) {
	case string:
		return 4*uint64(len(v)) + 16
	case []any:
		var n uint64 = 16
		for _, e := range v {
			n = satAdd(n, printedSize(e)+2)
		}
		return n
	case map[string]any:
		var n uint64 = 16
		for k, e := range v {
			n = satAdd(n, 4*uint64(len(k))+printedSize(e)+4)
		}
		return n
	}
	return 40 // a number as %!s(float64=-1.2345678901234567e-308), a bool, null
}
