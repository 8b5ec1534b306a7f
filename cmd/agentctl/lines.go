package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"unicode"

	"golang.org/x/term"
)

// line is one line of input, without its line ending, or the end of the input.
type line struct {
	text string
	eof  bool
	err  error // why the input ended, when not at io.EOF
}

// lineReader reads lines from an input on a goroutine of its own, one line per request:
// nothing is read from the terminal unless agentctl asked, so that an editor it starts
// has the terminal to itself.
//
// Once echo has given it a console, it reads key by key instead, with the terminal's
// echo and line editing off (cbreak mode), and shows what is typed on the console's
// input line: Backspace, Ctrl-U and Ctrl-W edit it, Enter sends it, Ctrl-D on an empty
// line ends the input; Ctrl-C is still the terminal's interrupt.
//
// Its methods are for one goroutine (the run's loop). The reading goroutine ends at stop
// once it waits for a request; one blocked reading the input ends with the input, which is
// why stop does not wait for it (a terminal's read cannot be interrupted).
type lineReader struct {
	want  chan struct{}
	lines chan line
	done  chan struct{}
	asked bool // a request is out and its line not yet taken
	ended bool // the end of the input was delivered

	in      io.Reader
	con     *console // set by echo: the reading goroutine reads keys
	noEcho  bool     // echo failed to turn the terminal's echo off: lines are read as typed
	restore func()   // puts the terminal's mode back, when echo changed it
}

func newLineReader(in io.Reader) *lineReader {
	lr := &lineReader{want: make(chan struct{}, 1), lines: make(chan line), done: make(chan struct{}), in: in}
	go lr.read(bufio.NewReader(in))
	return lr
}

func (lr *lineReader) read(br *bufio.Reader) {
	var end *line
	for {
		select {
		case <-lr.want:
		case <-lr.done:
			return
		}
		l := end
		if l == nil {
			// con is set before the request that is read here is sent, and never changes.
			if lr.con != nil {
				l, end = readKeys(br, lr.con)
			} else {
				l, end = readLine(br)
			}
		}
		select {
		case lr.lines <- *l:
		case <-lr.done:
			return
		}
		if l.eof {
			return
		}
	}
}

// readLine reads a line as the terminal sends it, once Enter is pressed. end is set when
// the input ended: l is then the end, or a last line without its line ending, which comes
// first.
func readLine(br *bufio.Reader) (l, end *line) {
	s, err := br.ReadString('\n')
	if err == nil {
		return &line{text: trimEOL(s)}, nil
	}
	end = &line{eof: true}
	if !errors.Is(err, io.EOF) {
		end.err = err
	}
	if s != "" {
		return &line{text: trimEOL(s)}, end
	}
	return end, end
}

// readKeys reads a line key by key, showing it on c's input line as it is typed, and
// returns it as readLine does.
func readKeys(br *bufio.Reader, c *console) (l, end *line) {
	c.mu.Lock()
	if c.submitted {
		c.commitInput() // the last line sent was taken without a word to the screen
	}
	c.mu.Unlock()
	for {
		r, _, err := br.ReadRune()
		if err != nil {
			end = &line{eof: true}
			if !errors.Is(err, io.EOF) {
				end.err = err
			}
			if text, ok := c.submit(false); ok {
				return &line{text: text}, end
			}
			return end, end
		}
		switch r {
		case '\r', '\n':
			text, _ := c.submit(true)
			if r == '\r' {
				skipLF(br)
			}
			return &line{text: text}, nil
		case 0x04: // Ctrl-D: the end of the input on an empty line, as in a terminal
			if _, typed := c.submit(false); !typed {
				end = &line{eof: true}
				return end, end
			}
		case 0x1b: // an escape sequence (an arrow key, say): nothing to edit with
			skipEscape(br)
		default:
			c.key(r)
		}
	}
}

// skipLF drops the line feed of a CR LF.
func skipLF(br *bufio.Reader) {
	if br.Buffered() > 0 {
		if b, err := br.Peek(1); err == nil && b[0] == '\n' {
			_, _ = br.ReadByte()
		}
	}
}

// skipEscape drops the rest of an escape sequence whose ESC was read: a CSI sequence
// (ESC [ parameters final), an SS3 one (ESC O and one character), or ESC and one
// character. A terminal sends a key's sequence at once: an ESC with nothing after it
// yet is the Escape key alone.
func skipEscape(br *bufio.Reader) {
	if br.Buffered() == 0 {
		return
	}
	b, err := br.ReadByte()
	switch {
	case err != nil:
	case b == 'O':
		_, _ = br.ReadByte()
	case b == '[':
		for {
			b, err := br.ReadByte()
			if err != nil || (b >= 0x40 && b <= 0x7e) {
				return
			}
		}
	}
}

// key edits the input line with key r and draws it again.
func (c *console) key(r rune) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r {
	case 0x7f, '\b': // Backspace
		if n := len(c.buf); n > 0 {
			c.buf = c.buf[:n-1]
		}
	case 0x15: // Ctrl-U: the whole line
		c.buf = nil
	case 0x17: // Ctrl-W: the word before the cursor
		n := len(c.buf)
		for n > 0 && unicode.IsSpace(c.buf[n-1]) {
			n--
		}
		for n > 0 && !unicode.IsSpace(c.buf[n-1]) {
			n--
		}
		c.buf = c.buf[:n]
	case '\t':
		c.buf = append(c.buf, ' ')
	default:
		if unicode.IsControl(r) {
			return
		}
		c.buf = append(c.buf, r)
	}
	c.redrawInput()
}

// submit returns what is typed and whether anything is. With send, the line is sent: it
// stays shown, unchanged, until it is taken (answered) or the next is read.
func (c *console) submit(send bool) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if send {
		c.submitted = true
	}
	return string(c.buf), len(c.buf) > 0
}

func trimEOL(s string) string {
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
	}
	if n := len(s); n > 0 && s[n-1] == '\r' {
		s = s[:n-1]
	}
	return s
}

// echo makes the reader show what is typed itself, on the console of out, with status
// the status line that shares it: the reader turns the terminal's echo off, if its input
// is a terminal, and reads key by key from the next request on. It does nothing while a
// line is being read as typed, and for good when the terminal's echo cannot be turned
// off (the reader then goes on reading lines as typed). A later call only changes the
// status line, for the next session of a chat.
func (lr *lineReader) echo(out io.Writer, status *statusLine) {
	if lr == nil || lr.noEcho || lr.ended {
		return
	}
	if lr.con != nil {
		lr.con.mu.Lock()
		lr.con.status = status
		lr.con.mu.Unlock()
		return
	}
	if lr.asked {
		return
	}
	con := openConsole(out)
	if con == nil {
		lr.noEcho = true
		return
	}
	if err := lr.takeTerminal(); err != nil {
		con.close()
		lr.noEcho = true
		return
	}
	con.mu.Lock()
	con.status = status
	con.mu.Unlock()
	lr.con = con
}

// suspend gives the terminal back as it was, with nothing of the input line on it, for
// another program (an editor) to use; resume takes it again.
func (lr *lineReader) suspend() {
	if lr == nil || lr.con == nil {
		return
	}
	lr.con.mu.Lock()
	lr.con.status.clearLocked()
	lr.con.hideInput()
	lr.con.mu.Unlock()
	if lr.restore != nil {
		lr.restore()
		lr.restore = nil
	}
}

// resume takes the terminal again after suspend.
func (lr *lineReader) resume() {
	if lr == nil || lr.con == nil {
		return
	}
	_ = lr.takeTerminal()
}

// takeTerminal turns the echo and line editing of the reader's input off, when it is a
// terminal, keeping in restore what turns them on again.
func (lr *lineReader) takeTerminal() error {
	f, ok := lr.in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	restore, err := cbreak(f)
	if err != nil {
		return err
	}
	lr.restore = restore
	return nil
}

// request asks for the next line, unless one was asked for already or the input ended.
func (lr *lineReader) request() {
	if lr == nil || lr.asked || lr.ended {
		return
	}
	lr.asked = true
	lr.want <- struct{}{}
}

// recv returns the channel the requested line comes on, or nil when none was requested:
// a select case on it fires only for a line agentctl asked for.
func (lr *lineReader) recv() <-chan line {
	if lr == nil || !lr.asked {
		return nil
	}
	return lr.lines
}

// took records that the requested line was taken from recv.
func (lr *lineReader) took(l line) {
	lr.asked = false
	if l.eof {
		lr.ended = true
	}
}

// stop ends the reading goroutine once it is not blocked reading the input, erases the
// input line that can no longer be sent, and gives the terminal its mode back.
func (lr *lineReader) stop() {
	if lr == nil {
		return
	}
	close(lr.done)
	if lr.con != nil {
		lr.con.close()
	}
	if lr.restore != nil {
		lr.restore()
	}
}
