package main

import (
	"bufio"
	"errors"
	"io"
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
// Its methods are for one goroutine (the run's loop). The reading goroutine ends at stop
// once it waits for a request; one blocked reading the input ends with the input, which is
// why stop does not wait for it (a terminal's read cannot be interrupted).
type lineReader struct {
	want  chan struct{}
	lines chan line
	done  chan struct{}
	asked bool // a request is out and its line not yet taken
	ended bool // the end of the input was delivered
}

func newLineReader(in io.Reader) *lineReader {
	lr := &lineReader{want: make(chan struct{}, 1), lines: make(chan line), done: make(chan struct{})}
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
			s, err := br.ReadString('\n')
			switch {
			case err == nil:
				l = &line{text: trimEOL(s)}
			default:
				end = &line{eof: true}
				if !errors.Is(err, io.EOF) {
					end.err = err
				}
				if s != "" { // a last line without its line ending comes first
					l = &line{text: trimEOL(s)}
				} else {
					l = end
				}
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

func trimEOL(s string) string {
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
	}
	if n := len(s); n > 0 && s[n-1] == '\r' {
		s = s[:n-1]
	}
	return s
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

// stop ends the reading goroutine once it is not blocked reading the input.
func (lr *lineReader) stop() {
	if lr != nil {
		close(lr.done)
	}
}
