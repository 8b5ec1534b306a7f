package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// screen writes what a person reads on stdout. It keeps track of where its cursor is, so
// that streamed text, tool calls and notices each start on a line of their own, and it
// shows the open prompt again after output interrupted it. It is not safe for concurrent
// use.
type screen struct {
	w      io.Writer
	color  bool
	status *statusLine
	col0   bool   // the cursor is at the start of a line
	owner  string // what the current, unfinished line belongs to ("text:<id>", "call:<id>")
	prompt string // the open prompt, if any
	dirty  bool   // something was written after the prompt
}

func newScreen(w io.Writer, color bool, st *statusLine) *screen {
	return &screen{w: w, color: color, status: st, col0: true}
}

// write writes s as it is.
func (sc *screen) write(s string) {
	if s == "" {
		return
	}
	sc.status.clear()
	_, _ = io.WriteString(sc.w, s)
	sc.col0 = strings.HasSuffix(s, "\n")
	sc.dirty = true
}

// newline ends the current line, if one is open.
func (sc *screen) newline() {
	if !sc.col0 {
		sc.write("\n")
	}
	sc.owner = ""
}

// line writes s on a line of its own.
func (sc *screen) line(s string) {
	sc.newline()
	sc.write(s + "\n")
}

// continueLine makes the current line owner's, starting a new one with prefix when it
// belongs to something else.
func (sc *screen) continueLine(owner, prefix string) {
	if sc.owner == owner {
		return
	}
	sc.newline()
	sc.write(prefix)
	sc.owner = owner
}

// ask shows a prompt and leaves the cursor after it.
func (sc *screen) ask(prompt string) {
	sc.newline()
	sc.write(prompt)
	sc.prompt = prompt
	sc.dirty = false
}

// reprompt shows the open prompt again if output came after it.
func (sc *screen) reprompt() {
	if sc.prompt != "" && sc.dirty {
		sc.ask(sc.prompt)
	}
}

// answered records that the person answered the prompt with s: a terminal echoed it and
// moved to the next line, other input is echoed here, so that the output reads as a
// transcript.
func (sc *screen) answered(s string, echo bool) {
	if echo {
		sc.write(s + "\n")
	} else {
		sc.col0 = true
	}
	sc.prompt = ""
	sc.owner = ""
}

// Styles, for a terminal.
func (sc *screen) style(code, s string) string {
	if !sc.color || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (sc *screen) dim(s string) string    { return sc.style("2", s) }
func (sc *screen) bold(s string) string   { return sc.style("1", s) }
func (sc *screen) red(s string) string    { return sc.style("31", s) }
func (sc *screen) green(s string) string  { return sc.style("32", s) }
func (sc *screen) yellow(s string) string { return sc.style("33", s) }
func (sc *screen) cyan(s string) string   { return sc.style("36", s) }

// statusLine is the line on stderr that says what agentctl waits for ("waiting for the
// model"), with a spinner and the seconds waited. It is drawn only on a terminal, and only
// while stdout's cursor is at the start of a line, so that it never breaks streamed text.
// Redraws put the cursor back where it was, so that a steer being typed after the status
// keeps its echo. It is not safe for concurrent use.
type statusLine struct {
	w       io.Writer
	enabled bool
	now     func() time.Time
	text    string
	since   time.Time
	frame   int
	drawn   bool
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// set changes what the status says; "" hides it.
func (st *statusLine) set(text string) {
	if st == nil || text == st.text {
		return
	}
	st.clear()
	st.text, st.since, st.frame = text, st.now(), 0
}

// active reports whether there is a status to draw.
func (st *statusLine) active() bool { return st != nil && st.enabled && st.text != "" }

// tick draws the status, the next spinner frame each time.
func (st *statusLine) tick() {
	if !st.active() {
		return
	}
	secs := int(st.now().Sub(st.since).Seconds())
	s := fmt.Sprintf("%s %s %4ds", spinner[st.frame%len(spinner)], st.text, secs)
	st.frame++
	if st.drawn {
		_, _ = io.WriteString(st.w, "\x1b7\r"+s+"\x1b8") // save the cursor, redraw, restore it
	} else {
		_, _ = io.WriteString(st.w, "\r"+s)
		st.drawn = true
	}
}

// moved records that the cursor left the status's line (a typed line's Enter): the line
// stays as it is, and the next tick draws the status afresh.
func (st *statusLine) moved() {
	if st != nil {
		st.drawn = false
	}
}

// clear erases the status from the screen.
func (st *statusLine) clear() {
	if st == nil || !st.drawn {
		return
	}
	_, _ = io.WriteString(st.w, "\r\x1b[K")
	st.drawn = false
}
