package main

import (
	"bytes"
	"testing"
	"time"
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
