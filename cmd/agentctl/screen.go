package main

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"
	"golang.org/x/text/width"
)

// screen writes what a person reads on stdout. It keeps track of where its cursor is, so
// that streamed text, tool calls and notices each start on a line of their own, and it
// shows the open prompt again after output interrupted it. On a terminal whose input
// agentctl echoes itself (see [console]) the prompt and what is typed after it stay on
// the bottom line instead, below the output. It is not safe for concurrent use.
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
	if st != nil {
		st.out = w
	}
	return &screen{w: w, color: color, status: st, col0: true}
}

// write writes s as it is.
func (sc *screen) write(s string) {
	if s == "" {
		return
	}
	if c := consoleFor(sc.w); c != nil {
		c.mu.Lock()
		c.prompt = sc.prompt
		c.status.clearLocked()
		c.hideInput()
		c.output(s)
		c.showInput()
		sc.col0 = c.col0
		c.mu.Unlock()
		sc.dirty = true
		return
	}
	sc.status.clear()
	_, _ = io.WriteString(sc.w, s)
	sc.col0 = strings.HasSuffix(s, "\n")
	sc.dirty = true
}

// atLineStart reports whether the output's cursor is at the start of a line.
func (sc *screen) atLineStart() bool {
	if c := consoleFor(sc.w); c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		sc.col0 = c.col0
	}
	return sc.col0
}

// newline ends the current line, if one is open.
func (sc *screen) newline() {
	if !sc.atLineStart() {
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
	if c := consoleFor(sc.w); c != nil {
		c.mu.Lock()
		c.prompt = prompt
		c.status.clearLocked()
		c.hideInput()
		c.showInput()
		c.mu.Unlock()
	} else {
		sc.write(prompt)
	}
	sc.prompt = prompt
	sc.dirty = false
}

// reprompt shows the open prompt again if output came after it. The console's prompt
// needs no showing again: it stays below the output.
func (sc *screen) reprompt() {
	if sc.prompt != "" && sc.dirty && consoleFor(sc.w) == nil {
		sc.ask(sc.prompt)
	}
}

// answered records that the person answered the prompt with s: a terminal echoed it and
// moved to the next line, other input is echoed here, so that the output reads as a
// transcript. On a console the line typed, and its prompt, stay where they are, as the
// transcript's line, and the output goes on below them.
func (sc *screen) answered(s string, echo bool) {
	switch c := consoleFor(sc.w); {
	case c != nil:
		c.mu.Lock()
		if c.commitInput() {
			sc.owner = ""
		}
		sc.col0 = c.col0
		c.mu.Unlock()
	case echo:
		sc.write(s + "\n")
		sc.owner = ""
	default:
		sc.col0 = true
		sc.owner = ""
	}
	sc.prompt = ""
}

// closePrompt ends the open prompt, which nothing answered (the input ended): it stays on
// its line, and the output goes on below it.
func (sc *screen) closePrompt() {
	if c := consoleFor(sc.w); c != nil {
		c.mu.Lock()
		c.commitInput()
		sc.col0 = c.col0
		c.mu.Unlock()
	}
	sc.prompt = ""
	sc.newline()
}

// redrawn records that another program had the terminal (an editor): the cursor is at
// the start of a line, and nothing of agentctl's input is on the screen.
func (sc *screen) redrawn() {
	if c := consoleFor(sc.w); c != nil {
		c.mu.Lock()
		c.col0, c.width, c.inputRows = true, 0, 0
		c.mu.Unlock()
	}
	sc.col0 = true
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
//
// On a console the status shares the bottom line with the input: it is drawn only while
// nothing is typed and no prompt is open, and its methods take the console's lock.
type statusLine struct {
	w       io.Writer
	enabled bool
	now     func() time.Time
	text    string
	since   time.Time
	frame   int
	drawn   bool
	out     io.Writer // the screen's, whose console, if any, the status shares
}

// lock takes the lock of the console the status shares, if any, and returns its unlock.
func (st *statusLine) lock() (c *console, unlock func()) {
	if st == nil {
		return nil, func() {}
	}
	if c = consoleFor(st.out); c == nil {
		return nil, func() {}
	}
	c.mu.Lock()
	return c, c.mu.Unlock
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// set changes what the status says; "" hides it.
func (st *statusLine) set(text string) {
	if st == nil || text == st.text {
		return
	}
	_, unlock := st.lock()
	defer unlock()
	st.clearLocked()
	st.text, st.since, st.frame = text, st.now(), 0
}

// active reports whether there is a status to draw.
func (st *statusLine) active() bool { return st != nil && st.enabled && st.text != "" }

// tick draws the status, the next spinner frame each time.
func (st *statusLine) tick() {
	if !st.active() {
		return
	}
	c, unlock := st.lock()
	defer unlock()
	if c != nil && c.inputRows > 0 {
		return // the input has the line
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
		_, unlock := st.lock()
		defer unlock()
		st.drawn = false
	}
}

// clear erases the status from the screen.
func (st *statusLine) clear() {
	if st == nil {
		return
	}
	_, unlock := st.lock()
	defer unlock()
	st.clearLocked()
}

// clearLocked is clear for a caller that holds the console's lock, if there is a
// console.
func (st *statusLine) clearLocked() {
	if st == nil || !st.drawn {
		return
	}
	_, _ = io.WriteString(st.w, "\r\x1b[K")
	st.drawn = false
}

// console is a terminal that agentctl both shows the run on and reads typed lines from,
// with the terminal's echo off: what is typed is shown on the bottom line (the input
// line), after the open prompt or, with none, after inputMark, and the output is written
// above it. Output that ends inside a line (streamed text) goes on at its end, the input
// line below it, so that what is typed never lands inside the output. The console keeps
// where the output's cursor is, and what the input line holds and how many rows it takes.
//
// The screens writing to one writer share its console, found with consoleFor: those of
// a chat and of its turns' sessions. It is safe for concurrent use: the line reader's
// goroutine draws the input line as keys come, the session's goroutine writes the output,
// both under mu.
type console struct {
	mu     sync.Mutex
	w      io.Writer
	status *statusLine // the current session's, cleared before the input line is drawn
	closed bool        // the line reader stopped: nothing is drawn any more

	// col0 says the output's cursor is at the start of a line; width is how many columns
	// the output's unfinished line takes; last is its last character, with the style it
	// was written in.
	col0  bool
	width int
	last  string

	prompt    string // the open prompt, if any
	buf       []rune // what is typed after it
	submitted bool   // Enter delivered buf as a line: it is shown until the line is taken
	inputRows int    // the rows the input line takes on the screen; 0: it is not drawn
}

// inputMark starts the input line when no prompt is open: a line typed then steers the
// run, or is the next turn of a chat.
const inputMark = "› "

var consoles = struct {
	sync.Mutex
	m map[io.Writer]*console
}{m: map[io.Writer]*console{}}

// consoleFor returns the console that writes to w, or nil.
func consoleFor(w io.Writer) *console {
	if w == nil || !reflect.TypeOf(w).Comparable() {
		return nil
	}
	consoles.Lock()
	defer consoles.Unlock()
	return consoles.m[w]
}

// openConsole returns the console that writes to w, made and registered if there is
// none; the output's cursor is taken to be at the start of a line.
func openConsole(w io.Writer) *console {
	if w == nil || !reflect.TypeOf(w).Comparable() {
		return nil
	}
	consoles.Lock()
	defer consoles.Unlock()
	c := consoles.m[w]
	if c == nil {
		c = &console{w: w, col0: true}
		consoles.m[w] = c
	}
	return c
}

// close erases the input line, which the person can no longer send, and unregisters c.
func (c *console) close() {
	c.mu.Lock()
	c.status.clearLocked()
	c.hideInput()
	c.closed = true
	c.mu.Unlock()
	consoles.Lock()
	if consoles.m[c.w] == c {
		delete(consoles.m, c.w)
	}
	consoles.Unlock()
}

// cols returns the terminal's width, or 80 when it cannot tell.
func (c *console) cols() int {
	if t, ok := c.w.(interface{ Width() int }); ok {
		return t.Width()
	}
	if f, ok := c.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return 80
}

// output writes s, output of the run, where the output's cursor is, which the input line
// does not hold (hideInput).
func (c *console) output(s string) {
	_, _ = io.WriteString(c.w, s)
	style := "" // the SGR sequence in force
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n' || r == '\r':
			c.width, c.last = 0, ""
		case r == '\x1b':
			size = escapeLen(s[i:])
			if seq := s[i : i+size]; strings.HasSuffix(seq, "m") {
				style = seq
				if seq == "\x1b[0m" || seq == "\x1b[m" {
					style = ""
				}
			}
		case r == '\t':
			c.width += 8 - c.width%8
			c.last = " "
		default:
			if w := runeWidth(r); w > 0 {
				c.width += w
				c.last = string(r)
				if style != "" {
					c.last = style + c.last + "\x1b[0m"
				}
			}
		}
		i += size
	}
	c.col0 = strings.HasSuffix(s, "\n")
}

// showInput draws the input line, when there is one: a prompt is open or something is
// typed. It goes on the output's line when that is empty, else on the next.
func (c *console) showInput() {
	if c.closed || c.inputRows > 0 || (c.prompt == "" && len(c.buf) == 0) {
		return
	}
	text := c.prompt
	if text == "" {
		text = inputMark
	}
	text += string(c.buf)
	lead := "\r"
	if !c.col0 {
		lead = "\n"
	}
	_, _ = io.WriteString(c.w, lead+text)
	cols := c.cols()
	c.inputRows = max(1, (textWidth(text)+cols-1)/cols)
}

// hideInput erases the input line and puts the cursor back at the end of the output.
func (c *console) hideInput() {
	if c.inputRows == 0 {
		return
	}
	seq := "\r"
	if c.inputRows > 1 {
		seq += fmt.Sprintf("\x1b[%dA", c.inputRows-1)
	}
	seq += "\x1b[J"
	if !c.col0 {
		// The output's line ends on the row above. When it fills that row to the end,
		// the cursor waited there for the next character to wrap; writing its last
		// character again puts it back in that state.
		cols := c.cols()
		switch col := c.width % cols; {
		case col > 0 || c.width == 0 || c.last == "":
			seq += fmt.Sprintf("\x1b[A\x1b[%dG", col+1)
		default:
			seq += fmt.Sprintf("\x1b[A\x1b[%dG%s", cols-textWidth(c.last)+1, c.last)
		}
	}
	_, _ = io.WriteString(c.w, seq)
	c.inputRows = 0
}

// redrawInput draws the input line again, after what it holds changed.
func (c *console) redrawInput() {
	c.status.clearLocked()
	c.hideInput()
	c.showInput()
}

// commitInput leaves the input line on the screen as a line of the transcript and puts
// the output's cursor on the line after it, and empties the input. It reports whether
// there was a line to leave.
func (c *console) commitInput() bool {
	shown := c.inputRows > 0
	if shown && !c.closed {
		_, _ = io.WriteString(c.w, "\n")
		c.col0, c.width = true, 0
	}
	c.inputRows, c.buf, c.submitted, c.prompt = 0, nil, false, ""
	return shown
}

// escapeLen returns the length of the escape sequence s starts with: a CSI sequence
// (ESC [ parameters final) or ESC and one character.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	if s[1] != '[' {
		return 2
	}
	for i := 2; i < len(s); i++ {
		if s[i] >= 0x40 && s[i] <= 0x7e {
			return i + 1
		}
	}
	return len(s)
}

// textWidth returns the columns s takes on a terminal, its escape sequences left out.
func textWidth(s string) int {
	w := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\x1b' {
			size = escapeLen(s[i:])
		} else {
			w += runeWidth(r)
		}
		i += size
	}
	return w
}

// runeWidth returns the columns r takes on a terminal: none for control characters and
// combining marks, two for the wide and fullwidth characters of Unicode's East Asian Width
// (CJK, and most emoji), else one.
func runeWidth(r rune) int {
	if r < 0x20 || r == 0x7f || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == 0x200b {
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}
