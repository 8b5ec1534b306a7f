package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

func TestParseCommand(t *testing.T) {
	getenv := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want command
	}{
		{
			name: "defaults",
			args: []string{"agents"},
			want: command{name: "agents", conn: connConfig{addr: "localhost:50051", plaintext: true}},
		},
		{
			name: "connection flags before and after the command, run flags around the prompt",
			args: []string{"--plaintext", "-H", "a: 1", "run", "--agent", "demo", "what", "is", "-H", "B : 2", "12*7?", "--json", "--max-time", "1m"},
			want: command{
				name: "run",
				conn: connConfig{addr: "localhost:50051", plaintext: true, headers: headerFlags{"a: 1", "B : 2"}, maxTime: time.Minute},
				run:  runConfig{prompt: "what is 12*7?", agent: "demo", json: true},
			},
		},
		{
			name: "-- ends the flags",
			args: []string{"run", "--", "--json", "is", "a", "prompt"},
			want: command{name: "run", conn: connConfig{addr: "localhost:50051", plaintext: true}, run: runConfig{prompt: "--json is a prompt"}},
		},
		{
			name: "the environment fills what the command line does not say",
			args: []string{"--addr", "flag:1", "run", "--resume", "f.json", "--deny", ""},
			env:  map[string]string{"AGENTCTL_ADDR": "env:1", "AGENTCTL_PLAINTEXT": "true", "AGENTCTL_MAX_TIME": "5s", "AGENTCTL_H": "x: y"},
			want: command{
				name: "run",
				conn: connConfig{addr: "flag:1", plaintext: true, maxTime: 5 * time.Second},
				run:  runConfig{resume: "f.json", denySet: true},
			},
		},
		{
			name: "run on a thread the server keeps",
			args: []string{"run", "--history", "thread", "--thread", "thread_1", "hello"},
			want: command{name: "run", conn: connConfig{addr: "localhost:50051", plaintext: true}, run: runConfig{prompt: "hello", thread: "thread_1", history: historyFlag(agentdv1.History_HISTORY_THREAD)}},
		},
		{
			name: "attach, its flags after the run id",
			args: []string{"attach", "run_1", "--after", "12", "--json", "--plaintext"},
			want: command{name: "attach", conn: connConfig{addr: "localhost:50051", plaintext: true}, attach: attachConfig{runID: "run_1", after: 12, json: true}},
		},
		{
			name: "chat",
			args: []string{"chat", "--thread", "thread_1", "--agent", "demo", "--auto-approve"},
			want: command{name: "chat", conn: connConfig{addr: "localhost:50051", plaintext: true}, run: runConfig{thread: "thread_1", agent: "demo", autoApprove: true}},
		},
		{
			name: "TLS to an address that is not loopback",
			args: []string{"--addr", "agentd.example:443", "agents"},
			want: command{name: "agents", conn: connConfig{addr: "agentd.example:443"}},
		},
		{
			name: "plain text to a loopback IP",
			args: []string{"--addr", "[::1]:50051", "agents"},
			want: command{name: "agents", conn: connConfig{addr: "[::1]:50051", plaintext: true}},
		},
		{
			name: "TLS to loopback with a TLS flag",
			args: []string{"--addr", "127.0.0.1:50051", "--cacert", "ca.pem", "agents"},
			want: command{name: "agents", conn: connConfig{addr: "127.0.0.1:50051", cacert: "ca.pem"}},
		},
		{
			name: "TLS to loopback when asked",
			args: []string{"--plaintext=false", "agents"},
			want: command{name: "agents", conn: connConfig{addr: "localhost:50051"}},
		},
		{
			name: "threads lists by default",
			args: []string{"threads", "--json"},
			want: command{name: "threads", conn: connConfig{addr: "localhost:50051", plaintext: true}, threads: threadsConfig{action: "list", json: true}},
		},
		{
			name: "threads show",
			args: []string{"threads", "show", "thread_1"},
			want: command{name: "threads", conn: connConfig{addr: "localhost:50051", plaintext: true}, threads: threadsConfig{action: "show", id: "thread_1"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCommand(tc.args, getenv(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(command{}, connConfig{}, runConfig{}, attachConfig{}, threadsConfig{}), cmpopts.IgnoreFields(connConfig{}, "given")); diff != "" {
				t.Errorf("parseCommand(%q) (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	for in, want := range map[string][2]string{
		"authorization: Bearer abc": {"authorization", "Bearer abc"},
		"X-Trace:a:b":               {"x-trace", "a:b"},
		"  k  :  v  ":               {"k", "v"},
		"empty:":                    {"empty", ""},
	} {
		name, value, err := parseHeader(in)
		if err != nil || name != want[0] || value != want[1] {
			t.Errorf("parseHeader(%q) = %q, %q, %v; want %q, %q", in, name, value, err, want[0], want[1])
		}
	}
	for _, in := range []string{"novalue", ": v", ""} {
		if _, _, err := parseHeader(in); err == nil {
			t.Errorf("parseHeader(%q): no error", in)
		}
	}
}

func TestLineReaderReadsOnlyWhenAsked(t *testing.T) {
	in := &countingReader{r: strings.NewReader("one\r\ntwo\nlast"), n: make(chan struct{}, 100)}
	lr := newLineReader(in)
	defer lr.stop()
	if lr.recv() != nil {
		t.Fatal("recv is ready before a request")
	}
	time.Sleep(10 * time.Millisecond)
	if n := in.reads(); n != 0 {
		t.Fatalf("%d reads before any request", n)
	}
	var got []line
	for range 4 {
		lr.request()
		lr.request() // a second request before the line is taken asks for nothing more
		l := <-lr.recv()
		lr.took(l)
		got = append(got, l)
	}
	want := []line{{text: "one"}, {text: "two"}, {text: "last"}, {eof: true}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(line{})); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	lr.request() // after the end: nothing
	if lr.recv() != nil {
		t.Error("recv is ready after the end of input")
	}
}

type countingReader struct {
	r io.Reader
	n chan struct{}
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.n <- struct{}{}
	return c.r.Read(p)
}

func (c *countingReader) reads() int { return len(c.n) }

// The commands agentctl prints repeat the connection flags of the command line, wherever
// they stood, and not --max-time.
func TestPrintedCommandsRepeatTheConnectionFlags(t *testing.T) {
	cmd, err := parseCommand([]string{"--addr", "agentd.example:443", "--max-time", "1m", "-H", "authorization: Bearer ${T}", "attach", "run_1", "--expand-headers", "--cacert", "ca pem.crt"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got := env{connArgs: cmd.conn.given}.command("attach", "run_1", "--after", "7")
	want := "agentctl -H 'authorization: Bearer ${T}' --addr agentd.example:443 --cacert 'ca pem.crt' --expand-headers attach run_1 --after 7"
	if got != want {
		t.Errorf("printed command\n%s\nwant\n%s", got, want)
	}
}

// A printed command shows no secret a -H value holds, unless it names the variable that
// holds it.
func TestPrintedCommandsHideSecrets(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-H", "authorization: Bearer sk-live-123"}, "agentctl -H 'authorization: Bearer …' attach run_1"},
		{[]string{"-H", "x-api-key: abc"}, "agentctl -H 'x-api-key: …' attach run_1"},
		{[]string{"-H", "authorization: Bearer ${T}", "--expand-headers"}, "agentctl -H 'authorization: Bearer ${T}' --expand-headers attach run_1"},
		{[]string{"-H", "x-tenant: acme"}, "agentctl -H 'x-tenant: acme' attach run_1"},
	} {
		cmd, err := parseCommand(append(tc.args, "attach", "run_1"), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if got := (env{connArgs: cmd.conn.given}).command("attach", "run_1"); got != tc.want {
			t.Errorf("%q: printed %s, want %s", tc.args, got, tc.want)
		}
	}
}
