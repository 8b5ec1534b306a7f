package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// With a console, lines are read key by key and edited on the input line: Backspace
// deletes, escape sequences (arrow keys) are dropped, Ctrl-D ends the input only on an
// empty line, and CR LF is one Enter.
func TestLineReaderEditsKeys(t *testing.T) {
	v := newVT(80)
	lr := newLineReader(strings.NewReader("ab\x7fc\r\nde\x1b[A\x04f\x1bOP\n\x04"))
	lr.echo(v, nil)
	defer lr.stop()
	var got []line
	for range 3 {
		lr.request()
		l := <-lr.recv()
		lr.took(l)
		got = append(got, l)
	}
	want := []line{{text: "ac"}, {text: "def"}, {eof: true}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(line{})); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	// Each line sent stays on the screen, after the input mark.
	if rows, _, _ := v.screen(); !slices.Equal(rows, []string{"› ac", "› def", ""}) {
		t.Errorf("terminal:\n%s", v)
	}
}

// A reader whose input is no terminal shows nothing itself unless a session asks it to:
// its lines are read as typed.
func TestLineReaderWithoutConsole(t *testing.T) {
	lr := newLineReader(strings.NewReader("ab\x7fc\n"))
	defer lr.stop()
	lr.request()
	l := <-lr.recv()
	lr.took(l)
	if l.text != "ab\x7fc" {
		t.Errorf("line %q, want it as typed", l.text)
	}
}
