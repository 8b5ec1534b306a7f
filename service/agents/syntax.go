package agents

import (
	"fmt"
	"regexp"
	"sort"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// yamlErrorRE splits a syntax error of package yaml into its line, if any, and its
// problem.
var yamlErrorRE = regexp.MustCompile(`^yaml: (?:line \d+: )?(.*)$`)

// A syntaxError is a YAML syntax error of the agents file, at the line and column of
// the text that the YAML parser could not take.
type syntaxError struct {
	file         string
	line, column int // 1-based; column 0: unknown
	problem      string
	// indent is set when the problem is the line's first token, which fits none of
	// the blocks open above it: a key or item indented unlike its siblings, nearly
	// always.
	indent bool
}

func (e *syntaxError) Error() string {
	where := fmt.Sprintf("%s:%d", e.file, e.line)
	if e.column > 0 {
		where += fmt.Sprintf(":%d", e.column)
	}
	msg := fmt.Sprintf("%s: YAML syntax error: %s", where, e.problem)
	if e.indent {
		msg += fmt.Sprintf("; check the indentation of line %d against the lines above it", e.line)
	}
	return msg
}

// locateSyntaxError returns err, yaml's error for data, at the line and column where
// data stops being YAML. yaml's own line is no guide: for an error found while
// parsing a block it names where the block starts, counted from 0, so an item
// indented one space too few on line 4 of an agents file is reported on line 1. The
// place is found instead as the shortest prefix of data that fails with the same
// problem: first in whole lines, then in characters of the last line.
func locateSyntaxError(file string, data []byte, err error) error {
	m := yamlErrorRE.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	problem := m[1]
	fails := func(prefix []byte) bool {
		var n yaml.Node
		err := yaml.Unmarshal(prefix, &n)
		if err == nil {
			return false
		}
		m := yamlErrorRE.FindStringSubmatch(err.Error())
		return m != nil && m[1] == problem
	}
	if !fails(data) {
		return fmt.Errorf("%s: %w", file, err)
	}
	// ends[i] is the end of line i+1, its newline included.
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	// Adding lines to a prefix that fails does not make it parse, so the shortest
	// failing one is found by bisection; the search needs only that the whole fails.
	line := sort.Search(len(ends), func(i int) bool { return fails(data[:ends[i]]) })
	start := 0
	if line > 0 {
		start = ends[line-1]
	}
	text := data[start:ends[line]]
	if len(text) == 0 {
		return &syntaxError{file: file, line: line + 1, problem: problem}
	}
	var starts []int // where the line's characters start, and its end
	for i := 0; i < len(text); {
		starts = append(starts, i)
		_, size := utf8.DecodeRune(text[i:])
		i += size
	}
	starts = append(starts, len(text))
	// The shortest prefix that fails ends with the character at.
	at := starts[sort.Search(len(starts)-1, func(i int) bool { return fails(data[:start+starts[i+1]]) })]
	column := utf8.RuneCount(text[:at]) + 1
	first := utf8.RuneCount(keyStartRE.Find(text)) + 1 // the column of the line's first token
	switch {
	case text[at] == '\n' || text[at] == '\r':
		column = 0 // the problem shows only with the line's end: no column to name
	case text[at] == ':' && blockProblem(problem):
		// A key is taken once its colon is read, but the key is what fits no block.
		// A block's key is the first token of its line, after any item indicators.
		column = first
	}
	return &syntaxError{file: file, line: line + 1, column: column, problem: problem, indent: blockProblem(problem) && column == first}
}

// keyStartRE matches what precedes a block mapping's key on its line.
var keyStartRE = regexp.MustCompile(`^[ \t]*(?:-[ \t]+)*`)

// blockProblem reports whether problem is the parser's for a token that fits none of
// the blocks open before it.
func blockProblem(problem string) bool {
	return problem == "did not find expected '-' indicator" || problem == "did not find expected key"
}
