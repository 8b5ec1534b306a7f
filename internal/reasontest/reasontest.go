package reasontest

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Set is one of the contract's closed lists of reasons.
type Set string

// The sets, each listed in the leading comment of one declaration of the contract.
const (
	Status Set = "status" // google.rpc.ErrorInfo.reason; AgentService's comment
	Run    Set = "run"    // RunError.reason in run_finished; RunError.reason's comment
	Ack    Set = "ack"    // RunError.reason in an input_ack; InputAck.error's comment
)

// anchors say where each set is listed: the comment of decl inside parent.
var anchors = []struct {
	set          Set
	parent, decl string
}{
	{Status, "", "service AgentService"},
	{Run, "RunError", "reason"},
	{Ack, "InputAck", "error"},
}

// closedPhrase must be in each list's comment: a list that does not say it is closed
// could be read as examples.
const closedPhrase = "agentd sends no other reason"

var (
	blockRE  = regexp.MustCompile(`^(message|service|enum|oneof)\s+(\w+)\s*\{`)
	fieldRE  = regexp.MustCompile(`^(?:repeated\s+|optional\s+)?[\w.]+\s+(\w+)\s*=\s*\d+`)
	bulletRE = regexp.MustCompile(`^-\s+([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)\s+—\s`)
	snakeRE  = regexp.MustCompile(`^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$`)
)

// Documented reads the closed lists of reasons from the .proto files in dir, by set. It
// fails when a list is missing, empty, listed twice, repeats a reason or does not say it
// is closed.
func Documented(dir string) (map[Set][]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.proto"))
	if err != nil {
		return nil, err
	}
	doc := map[Set][]string{}
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		scanProto(string(b), func(parent, decl string, comment []string) {
			for _, a := range anchors {
				if a.parent != parent || a.decl != decl {
					continue
				}
				if _, dup := doc[a.set]; dup {
					errs = append(errs, fmt.Errorf("%s: the %s reasons are listed twice", f, a.set))
				}
				list, err := bullets(comment)
				if err != nil {
					err = fmt.Errorf("%s: %s %s: %w", f, parent, decl, err)
				}
				errs = append(errs, err)
				doc[a.set] = list
			}
		})
	}
	for _, a := range anchors {
		if _, ok := doc[a.set]; !ok {
			errs = append(errs, fmt.Errorf("%s: no comment of %q in %q lists the %s reasons", dir, a.decl, a.parent, a.set))
		}
	}
	return doc, errors.Join(errs...)
}

// scanProto calls visit with the leading comment of every message, service, enum, oneof
// and field declaration of src, a buf-formatted .proto file (one declaration a line).
// parent is the name of the enclosing block, "" at the top level; decl is "message Name"
// (or service, enum, oneof) for a block, and the field's name for a field.
func scanProto(src string, visit func(parent, decl string, comment []string)) {
	var stack, comment []string
	for line := range strings.SplitSeq(src, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "//"):
			comment = append(comment, strings.TrimSpace(strings.TrimPrefix(t, "//")))
			continue
		case t == "":
			comment = nil
			continue
		}
		parent := ""
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		if m := blockRE.FindStringSubmatch(t); m != nil {
			visit(parent, m[1]+" "+m[2], comment)
			stack = append(stack, m[2])
		} else if m := fieldRE.FindStringSubmatch(t); m != nil {
			visit(parent, m[1], comment)
		} else if t == "}" && len(stack) > 0 {
			stack = stack[:len(stack)-1]
		}
		comment = nil
	}
}

// bullets returns the reasons a comment lists, one "- REASON — when" line each.
func bullets(comment []string) ([]string, error) {
	var list []string
	for _, l := range comment {
		if m := bulletRE.FindStringSubmatch(l); m != nil {
			if slices.Contains(list, m[1]) {
				return nil, fmt.Errorf("%s is listed twice", m[1])
			}
			list = append(list, m[1])
		}
	}
	switch {
	case len(list) == 0:
		return nil, errors.New(`no "- REASON — when" lines`)
	case !strings.Contains(strings.Join(comment, " "), closedPhrase):
		return nil, fmt.Errorf("the list does not say it is closed (%q)", closedPhrase)
	}
	return list, nil
}

// Use is a reason the code can send.
type Use struct {
	Reason string
	// Set is the set the reason travels in; "" where the code does not say (a reason
	// constant in itself, a Reason field set by assignment).
	Set Set
	// Const is the constant that names the reason; "" for a string literal.
	Const    string
	ConstPos token.Position
	// Pos is where the reason reaches the wire, or where Const is declared.
	Pos token.Position
}

// Used returns every reason that the Go files under dir (tests and testdata aside) can put
// on the wire, each package on its own. A reason reaches the wire as the Reason of an
// ErrorInfo literal or of a runs.Error literal (the run engine's errors, which the wire
// makes statuses of: Status), or of a RunError literal (Run); a parameter that reaches
// one makes its function's calls reach it too, in the same set unless wrappers names the
// function (ackError builds a RunError, but an ack's). Every package-level constant whose
// name starts with "reason" is a use too, in no particular set. Used fails on any value
// that reaches a reason and that it cannot follow to a constant or a literal.
func Used(dir string, wrappers map[string]Set) ([]Use, error) {
	byDir := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var uses []Use
	var errs []error
	for _, d := range slices.Sorted(maps.Keys(byDir)) {
		files := byDir[d]
		p := &pkg{fset: token.NewFileSet(), wrappers: wrappers, consts: map[string]constDecl{}, litNames: map[*ast.FuncLit]*ast.Ident{}, calleeIdents: map[*ast.Ident]bool{}, definers: map[*ast.Ident]bool{}, followed: map[followKey]bool{}}
		for _, f := range files {
			af, err := parser.ParseFile(p.fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			p.files = append(p.files, af)
		}
		p.analyse()
		uses = append(uses, p.uses...)
		errs = append(errs, p.errs...)
	}
	return uses, errors.Join(errs...)
}

type constDecl struct {
	value string
	pos   token.Pos
}

// fn is a function a reason may flow through.
type fn struct {
	name   string // "" for a closure that is not assigned to a name
	params []string
	body   *ast.BlockStmt
	outer  *fn // the function a closure is declared in; nil for a declared function
	pos    token.Pos
}

// call is a call expression and the functions it is in, outermost first.
type call struct {
	expr *ast.CallExpr
	name string
	in   []*fn
}

// sink is where a reason reaches the wire: a Reason field of a literal, or of an
// assignment (weak: followed only to a literal or constant, see resolveWeak).
type sink struct {
	value ast.Expr
	set   Set
	in    []*fn
	weak  bool
}

type followKey struct {
	f   *fn
	arg int
	set Set
}

type pkg struct {
	fset     *token.FileSet // its files, all of one package
	files    []*ast.File
	wrappers map[string]Set

	consts       map[string]constDecl
	litNames     map[*ast.FuncLit]*ast.Ident
	calls        []call
	sinks        []sink
	idents       []*ast.Ident
	calleeIdents map[*ast.Ident]bool // the names of called functions
	definers     map[*ast.Ident]bool // the names in function declarations and closure assignments
	followed     map[followKey]bool

	uses []Use
	errs []error
}

func (p *pkg) analyse() {
	p.collectConsts()
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				p.definers[fd.Name] = true
				if fd.Body != nil {
					p.walk(fd.Body, []*fn{{name: fd.Name.Name, params: paramNames(fd.Type), body: fd.Body, pos: fd.Pos()}})
				}
				continue
			}
			p.walk(d, nil)
		}
	}
	for name, c := range p.consts {
		if strings.HasPrefix(name, "reason") && len(name) > len("reason") {
			p.uses = append(p.uses, Use{Reason: c.value, Const: name, ConstPos: p.fset.Position(c.pos), Pos: p.fset.Position(c.pos)})
		}
	}
	for _, s := range p.sinks {
		if s.weak {
			p.resolveWeak(s.value)
		} else {
			p.resolve(s.value, s.in, s.set)
		}
	}
}

// collectConsts records the package-level constants with a string value.
func (p *pkg) collectConsts() {
	exprs := map[string]ast.Expr{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						exprs[n.Name] = vs.Values[i]
						p.consts[n.Name] = constDecl{pos: n.Pos()}
					}
				}
			}
		}
	}
	var value func(e ast.Expr, depth int) (string, bool)
	value = func(e ast.Expr, depth int) (string, bool) {
		switch e := ast.Unparen(e).(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				v, err := strconv.Unquote(e.Value)
				return v, err == nil
			}
		case *ast.Ident:
			if x, ok := exprs[e.Name]; ok && depth < 10 {
				return value(x, depth+1)
			}
		}
		return "", false
	}
	for name, x := range exprs {
		v, ok := value(x, 0)
		if !ok {
			delete(p.consts, name)
			continue
		}
		c := p.consts[name]
		c.value = v
		p.consts[name] = c
	}
}

// walk records the calls, sinks and identifiers under n, which is in the functions in.
func (p *pkg) walk(n ast.Node, in []*fn) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			f := &fn{params: paramNames(n.Type), body: n.Body, pos: n.Pos()}
			if id := p.litNames[n]; id != nil {
				f.name = id.Name
			}
			if len(in) > 0 {
				f.outer = in[len(in)-1]
			}
			p.walk(n.Body, append(slices.Clip(in), f))
			return false
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if i >= len(n.Rhs) {
					break
				}
				if lit, ok := n.Rhs[i].(*ast.FuncLit); ok {
					if id, ok := l.(*ast.Ident); ok {
						p.litNames[lit] = id
						p.definers[id] = true
					}
				}
				if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" {
					p.sinks = append(p.sinks, sink{value: n.Rhs[i], weak: true})
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if i < len(n.Values) {
					if lit, ok := n.Values[i].(*ast.FuncLit); ok {
						p.litNames[lit] = id
						p.definers[id] = true
					}
				}
			}
		case *ast.CallExpr:
			if id := calleeIdent(n.Fun); id != nil {
				p.calleeIdents[id] = true
				p.calls = append(p.calls, call{expr: n, name: id.Name, in: in})
			}
		case *ast.CompositeLit:
			p.compositeSink(n, in)
		case *ast.Ident:
			p.idents = append(p.idents, n)
		}
		return true
	})
}

// compositeSink records the Reason of an ErrorInfo, runs.Error or RunError literal.
func (p *pkg) compositeSink(lit *ast.CompositeLit, in []*fn) {
	var set Set
	switch typeName(lit.Type) {
	case "ErrorInfo":
		set = Status
	case "RunError":
		set = Run
	case "Error":
		// runs.Error, or Error inside package runs itself.
		if sel, ok := lit.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, "runs") || isIdent(lit.Type, "Error") && p.name() == "runs" {
			set = Status
		}
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			if set != "" {
				p.errorf(el.Pos(), "a %s literal without field names: name its fields, so its reason can be checked", typeName(lit.Type))
				return
			}
			continue
		}
		if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Reason" {
			p.sinks = append(p.sinks, sink{value: kv.Value, set: set, in: in, weak: set == ""})
		}
	}
}

// name is the package's name.
func (p *pkg) name() string {
	if len(p.files) == 0 {
		return ""
	}
	return p.files[0].Name.Name
}

// resolve follows e, which reaches a reason of set in the functions in, to the constants
// and literals it can hold.
func (p *pkg) resolve(e ast.Expr, in []*fn, set Set) {
	switch x := ast.Unparen(e).(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			v, _ := strconv.Unquote(x.Value)
			p.uses = append(p.uses, Use{Reason: v, Set: set, Pos: p.fset.Position(x.Pos())})
			return
		}
	case *ast.Ident:
		for i := len(in) - 1; i >= 0; i-- {
			f := in[i]
			values, declared := p.assigned(f.body, x.Name)
			arg := slices.Index(f.params, x.Name)
			if !declared && arg < 0 {
				continue
			}
			for _, v := range values {
				p.resolve(v, in[:i+1], set)
			}
			if !declared {
				p.follow(f, arg, set) // a parameter, perhaps assigned to as well
			}
			return
		}
		if c, ok := p.consts[x.Name]; ok {
			p.uses = append(p.uses, Use{Reason: c.value, Set: set, Const: x.Name, ConstPos: p.fset.Position(c.pos), Pos: p.fset.Position(x.Pos())})
			return
		}
	case *ast.CallExpr:
		// A reason read back from a RunError or ErrorInfo was checked where it was made.
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "GetReason" && len(x.Args) == 0 {
			return
		}
	case *ast.SelectorExpr:
		// So was one read back from a runs.Error (its Reason field), which the wire
		// makes a status of.
		if x.Sel.Name == "Reason" {
			return
		}
	}
	p.errorf(e.Pos(), "cannot tell which %s reason this is: use a constant, a local variable set to constants, or a parameter", set)
}

// resolveWeak follows the value of a Reason field whose type is unknown: only a string
// that looks like a reason counts.
func (p *pkg) resolveWeak(e ast.Expr) {
	var v, name string
	var cpos token.Position
	switch x := ast.Unparen(e).(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return
		}
		v, _ = strconv.Unquote(x.Value)
	case *ast.Ident:
		c, ok := p.consts[x.Name]
		if !ok {
			return
		}
		v, name, cpos = c.value, x.Name, p.fset.Position(c.pos)
	default:
		return
	}
	if snakeRE.MatchString(v) {
		p.uses = append(p.uses, Use{Reason: v, Const: name, ConstPos: cpos, Pos: p.fset.Position(e.Pos())})
	}
}

// follow makes the calls of f reach a reason of set with their argument arg.
func (p *pkg) follow(f *fn, arg int, set Set) {
	if s, ok := p.wrappers[f.name]; ok && f.outer == nil {
		set = s
	}
	if f.name == "" {
		p.errorf(f.pos, "a function literal passes its parameter on as a %s reason: assign it to a name, so its calls can be checked", set)
		return
	}
	key := followKey{f, arg, set}
	if p.followed[key] {
		return
	}
	p.followed[key] = true
	for _, c := range p.calls {
		if c.name != f.name || (f.outer != nil && !slices.Contains(c.in, f.outer)) {
			continue
		}
		if arg < len(c.expr.Args) {
			p.resolve(c.expr.Args[arg], c.in, set)
		}
	}
	// A function used as a value could be called where its arguments are not seen.
	for _, id := range p.idents {
		if id.Name == f.name && !p.calleeIdents[id] && !p.definers[id] && p.within(id, f) {
			p.errorf(id.Pos(), "%s passes on a %s reason and is used as a value: call it, so its reasons can be checked", f.name, set)
		}
	}
}

// within reports whether id is where f's name refers to f: anywhere for a declared
// function, in the body of the function that declares it for a closure.
func (p *pkg) within(id *ast.Ident, f *fn) bool {
	return f.outer == nil || (f.outer.body.Pos() <= id.Pos() && id.Pos() < f.outer.body.End())
}

// assigned returns the values assigned to the local variable name in body, and whether
// body declares it.
func (p *pkg) assigned(body *ast.BlockStmt, name string) ([]ast.Expr, bool) {
	var values []ast.Expr
	declared := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				id, ok := l.(*ast.Ident)
				if !ok || id.Name != name {
					continue
				}
				if n.Tok == token.DEFINE {
					declared = true
				}
				if len(n.Lhs) == len(n.Rhs) {
					values = append(values, n.Rhs[i])
				} else {
					values = append(values, n.Rhs[0]) // a call's results: not followed, so an error
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if id.Name != name {
					continue
				}
				declared = true
				if i < len(n.Values) {
					values = append(values, n.Values[i])
				}
			}
		case *ast.RangeStmt:
			for _, x := range []ast.Expr{n.Key, n.Value} {
				if id, ok := x.(*ast.Ident); ok && id.Name == name {
					declared = true
					values = append(values, n.X) // not followed, so an error
				}
			}
		}
		return true
	})
	return values, declared
}

func (p *pkg) errorf(pos token.Pos, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", p.fset.Position(pos), fmt.Sprintf(format, args...)))
}

func paramNames(ft *ast.FuncType) []string {
	var names []string
	for _, field := range ft.Params.List {
		if len(field.Names) == 0 {
			names = append(names, "_")
		}
		for _, n := range field.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

// calleeIdent is the name a call calls: f(…), x.f(…), f[T](…).
func calleeIdent(e ast.Expr) *ast.Ident {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	case *ast.IndexExpr:
		return calleeIdent(e.X)
	case *ast.IndexListExpr:
		return calleeIdent(e.X)
	}
	return nil
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// Rules are what [Diff] checks beyond each use being documented in its set.
type Rules struct {
	// Exact makes a documented reason that no use sends in its set an error too, so the
	// lists stay exact.
	Exact bool
	// ConstFile, when set, is the file name every reason constant is declared in; a
	// reason given as a string literal is an error.
	ConstFile string
}

// Diff lists what is wrong with uses against doc, one line a problem, sorted; none when
// they agree.
func Diff(doc map[Set][]string, uses []Use, r Rules) []string {
	var probs []string
	sent := map[Set]map[string]bool{}
	for _, u := range uses {
		var sets []Set
		for s, list := range doc {
			if slices.Contains(list, u.Reason) {
				sets = append(sets, s)
			}
		}
		switch {
		case u.Set == "" && len(sets) == 0:
			probs = append(probs, fmt.Sprintf("%s: reason %s is in none of the contract's lists", u.Pos, u.Reason))
		case u.Set != "" && !slices.Contains(sets, u.Set):
			probs = append(probs, fmt.Sprintf("%s: %s is sent among the %s reasons, and the contract does not list it there", u.Pos, u.Reason, u.Set))
		}
		switch {
		case r.ConstFile == "":
		case u.Const == "":
			probs = append(probs, fmt.Sprintf("%s: reason %s is a string literal: name it in %s", u.Pos, u.Reason, r.ConstFile))
		case filepath.Base(u.ConstPos.Filename) != r.ConstFile:
			probs = append(probs, fmt.Sprintf("%s: reason constant %s is declared outside %s", u.ConstPos, u.Const, r.ConstFile))
		}
		if sent[u.Set] == nil {
			sent[u.Set] = map[string]bool{}
		}
		sent[u.Set][u.Reason] = true
	}
	if r.Exact {
		for s, list := range doc {
			for _, reason := range list {
				if !sent[s][reason] {
					probs = append(probs, fmt.Sprintf("the contract lists %s among the %s reasons, and the code never sends it as one", reason, s))
				}
			}
		}
	}
	slices.Sort(probs)
	return slices.Compact(probs)
}
