package main

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestStatusLine(t *testing.T) {
	var stderr, stdout bytes.Buffer
	now := time.Unix(0, 0)
	st := &statusLine{w: &stderr, enabled: true, now: func() time.Time { return now }}
	sc := newScreen(&stdout, false, st)

	st.tick() // nothing to say
	st.set("waiting for the model")
	st.tick()
	now = now.Add(2 * time.Second)
	st.tick() // redrawn in place, the cursor put back where a person may be typing
	sc.write("12*7 = 84\n")
	want := "\r⠋ waiting for the model    0s" + "\x1b7\r⠙ waiting for the model    2s\x1b8" + "\r\x1b[K"
	if got := stderr.String(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if got := stdout.String(); got != "12*7 = 84\n" {
		t.Errorf("stdout = %q", got)
	}

	stderr.Reset()
	st.set("running calculate")
	st.tick()
	st.set("")
	st.tick()
	if got, want := stderr.String(), "\r⠋ running calculate    0s\r\x1b[K"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}

	off := &statusLine{w: &stderr, now: time.Now} // stderr is no terminal
	stderr.Reset()
	off.set("waiting for the model")
	off.tick()
	off.clear()
	if stderr.Len() != 0 {
		t.Errorf("a status was drawn on no terminal: %q", stderr.String())
	}
}

func TestScreenLines(t *testing.T) {
	var out bytes.Buffer
	sc := newScreen(&out, false, nil)
	sc.continueLine("text:m1", "")
	sc.write("Hello, ")
	sc.continueLine("text:m1", "")
	sc.write("world")
	sc.continueLine("call:c1", "⚙ calc ")
	sc.write(`{"x":`)
	sc.ask("approve calc? ")
	sc.line("an event came")
	sc.reprompt()
	sc.answered("y", true)
	sc.line("done")
	want := "Hello, world\n⚙ calc {\"x\":\napprove calc? \nan event came\napprove calc? y\ndone\n"
	if got := out.String(); got != want {
		t.Errorf("screen:\n%q\nwant\n%q", got, want)
	}
}

// vt is a terminal the tests show agentctl's output on: rows of cols cells and a cursor,
// with the control sequences agentctl writes (CR; LF, as CR LF, as a terminal's output
// processing makes it; ESC [ n A, G, J and K; ESC 7 and 8; SGR, ignored) and xterm's
// deferred wrap: a character written in the last column leaves the cursor there, and the
// next one starts the next row. Every character takes one column. It is safe for
// concurrent use.
type vt struct {
	mu        sync.Mutex
	cols      int
	rows      [][]rune
	row, col  int
	wrap      bool
	saved     [2]int
	pending   []byte // an unfinished escape sequence or UTF-8 character
	echoTyped bool   // a cooked terminal: typed keys are echoed (see typeKeys)
}

func newVT(cols int) *vt { return &vt{cols: cols, rows: [][]rune{nil}} }

// Width is the console's way to learn the terminal's width.
func (v *vt) Width() int { return v.cols }

func (v *vt) Write(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	b := append(v.pending, p...)
	v.pending = nil
	for len(b) > 0 {
		switch c := b[0]; {
		case c == '\r':
			v.col, v.wrap = 0, false
		case c == '\n':
			v.col, v.wrap = 0, false
			v.down()
		case c == '\b':
			v.col, v.wrap = max(v.col-1, 0), false
		case c == 0x1b:
			n := v.escape(b)
			if n == 0 {
				v.pending = append(v.pending, b...)
				return len(p), nil
			}
			b = b[n:]
			continue
		default:
			if !utf8.FullRune(b) {
				v.pending = append(v.pending, b...)
				return len(p), nil
			}
			r, size := utf8.DecodeRune(b)
			v.put(r)
			b = b[size:]
			continue
		}
		b = b[1:]
	}
	return len(p), nil
}

func (v *vt) down() {
	v.row++
	for len(v.rows) <= v.row {
		v.rows = append(v.rows, nil)
	}
}

func (v *vt) put(r rune) {
	if v.wrap {
		v.col, v.wrap = 0, false
		v.down()
	}
	line := v.rows[v.row]
	for len(line) <= v.col {
		line = append(line, ' ')
	}
	line[v.col] = r
	v.rows[v.row] = line
	if v.col == v.cols-1 {
		v.wrap = true
	} else {
		v.col++
	}
}

// escape applies the escape sequence b starts with and returns its length, or 0 when b
// holds only part of it.
func (v *vt) escape(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '7':
		v.saved = [2]int{v.row, v.col}
		return 2
	case '8':
		v.row, v.col, v.wrap = v.saved[0], v.saved[1], false
		return 2
	case '[':
	default:
		return 2
	}
	i := 2
	for i < len(b) && (b[i] < 0x40 || b[i] > 0x7e) {
		i++
	}
	if i == len(b) {
		return 0
	}
	n, err := strconv.Atoi(string(b[2:i]))
	if err != nil {
		n = 0
	}
	switch b[i] {
	case 'A':
		v.row, v.wrap = max(v.row-max(n, 1), 0), false
	case 'G':
		v.col, v.wrap = min(max(n, 1), v.cols)-1, false
	case 'K':
		if line := v.rows[v.row]; len(line) > v.col {
			v.rows[v.row] = line[:v.col]
		}
	case 'J':
		if line := v.rows[v.row]; len(line) > v.col {
			v.rows[v.row] = line[:v.col]
		}
		v.rows = v.rows[:v.row+1]
	}
	return i + 1
}

// screen returns the rows, without their trailing blanks, and where the cursor is.
func (v *vt) screen() (rows []string, row, col int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.rows {
		rows = append(rows, strings.TrimRight(string(r), " "))
	}
	return rows, v.row, v.col
}

func (v *vt) String() string {
	rows, row, col := v.screen()
	return fmt.Sprintf("%s\n(cursor at row %d, column %d)", strings.Join(rows, "\n"), row, col)
}

// waitRows waits until the terminal shows want as its last rows, and fails the test after
// a while.
func (v *vt) waitRows(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows, _, _ := v.screen()
		if len(rows) >= len(want) && slices.Equal(rows[len(rows)-len(want):], want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal does not end with\n%s\nit shows\n%s", strings.Join(want, "\n"), v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newConsole returns a screen on a console that writes to v, and the console, closed
// when the test ends.
func newConsole(t *testing.T, v *vt) (*screen, *console) {
	t.Helper()
	c := openConsole(v)
	t.Cleanup(c.close)
	return newScreen(v, false, nil), c
}

func typeOn(c *console, s string) {
	for _, r := range s {
		c.key(r)
	}
}

// What is typed while text streams stays on the line below it; the text goes on where it
// stopped, whole.
func TestConsoleKeepsTypingApart(t *testing.T) {
	v := newVT(80)
	sc, c := newConsole(t, v)
	sc.line("● run")
	sc.continueLine("text:m1", "")
	sc.write("Hello, ")
	typeOn(c, "and th")
	sc.write("world, ")
	sc.write("this streams on.")
	typeOn(c, "en left")
	if rows, _, col := v.screen(); !slices.Equal(rows, []string{"● run", "Hello, world, this streams on.", "› and then left"}) || col != len("› and then left")-2 {
		t.Fatalf("while typing:\n%s", v)
	}
	sc.answered("and then left", false)
	sc.line("↳ steer sent")
	sc.continueLine("text:m1", "")
	sc.write("More.\n")
	want := []string{"● run", "Hello, world, this streams on.", "› and then left", "↳ steer sent", "More.", ""}
	if rows, _, _ := v.screen(); !slices.Equal(rows, want) {
		t.Errorf("terminal:\n%s\nwant\n%s", v, strings.Join(want, "\n"))
	}
}

// The output's line and the input line may each take several rows: text that fills its
// row to the end goes on at the start of the next, and an input line of two rows is
// erased whole.
func TestConsoleWraps(t *testing.T) {
	v := newVT(10)
	sc, c := newConsole(t, v)
	sc.write("0123456789") // the whole row: the cursor waits at its end
	typeOn(c, "abcdefghijkl")
	if rows, _, _ := v.screen(); !slices.Equal(rows, []string{"0123456789", "› abcdefgh", "ijkl"}) {
		t.Fatalf("typed:\n%s", v)
	}
	sc.write("ABC")
	sc.write("DEFGHIJKLMN")
	typeOn(c, "\x7f\x7f")
	want := []string{"0123456789", "ABCDEFGHIJ", "KLMN", "› abcdefgh", "ij"}
	if rows, _, _ := v.screen(); !slices.Equal(rows, want) {
		t.Fatalf("terminal:\n%s\nwant\n%s", v, strings.Join(want, "\n"))
	}
	// A line ending right after a full row: the cursor waits at the row's end, and the
	// line feed takes it to the start of the next.
	sc.write("OPQRST\n")
	typeOn(c, "x")
	sc.write("end\n")
	want = []string{"0123456789", "ABCDEFGHIJ", "KLMNOPQRST", "end", "› abcdefgh", "ijx"}
	if rows, _, _ := v.screen(); !slices.Equal(rows, want) {
		t.Errorf("terminal:\n%s\nwant\n%s", v, strings.Join(want, "\n"))
	}
}

// A prompt opens the input line; the answer stays after it, as a transcript's line.
func TestConsolePrompt(t *testing.T) {
	v := newVT(80)
	sc, c := newConsole(t, v)
	sc.ask("approve rm? [y]es/[n]o: ")
	typeOn(c, "yes, why not\x17\x17\x7f\x7f")
	sc.line("? ls needs your approval") // an event while the prompt is open
	want := []string{"? ls needs your approval", "approve rm? [y]es/[n]o: yes"}
	if rows, _, _ := v.screen(); !slices.Equal(rows, want) {
		t.Fatalf("terminal:\n%s\nwant\n%s", v, strings.Join(want, "\n"))
	}
	typeOn(c, "\x15y")
	sc.answered("y", false)
	sc.line("✓ rm approved")
	want = []string{"? ls needs your approval", "approve rm? [y]es/[n]o: y", "✓ rm approved", ""}
	if rows, _, _ := v.screen(); !slices.Equal(rows, want) {
		t.Errorf("terminal:\n%s\nwant\n%s", v, strings.Join(want, "\n"))
	}
}

// textWidth counts the columns a terminal gives text: wide CJK and emoji take two,
// combining marks and escape sequences none.
func TestTextWidth(t *testing.T) {
	for s, want := range map[string]int{"abc": 3, "世界": 4, "ok 😀": 5, "e\u0301": 1, "\x1b[1mbold\x1b[0m": 4, "ﾊ": 1, "Ａ": 2} {
		if got := textWidth(s); got != want {
			t.Errorf("textWidth(%q) = %d, want %d", s, got, want)
		}
	}
}
