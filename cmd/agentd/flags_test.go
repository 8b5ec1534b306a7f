package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// --version asks for the version, and nothing else; AGENTD_VERSION, which an image may
// well set to its tag, is not the flag.
func TestVersionFlag(t *testing.T) {
	if _, err := parseConfig([]string{"--version"}, env(nil), io.Discard); !errors.Is(err, errVersion) {
		t.Errorf("--version: %v, want errVersion", err)
	}
	if _, err := parseConfig(nil, env(map[string]string{"AGENTD_VERSION": "1.4.2"}), io.Discard); err != nil {
		t.Errorf("AGENTD_VERSION=1.4.2: %v, want it ignored", err)
	}
	var usage strings.Builder
	parseConfig([]string{"-h"}, env(nil), &usage)
	if !strings.Contains(usage.String(), "-version") {
		t.Errorf("-h does not list -version:\n%s", usage.String())
	}
}

// --log-format picks the handler: text or json as asked, json on what is not a
// terminal by default (a pipe, a file, a collector), and nothing else is taken.
func TestLogFormat(t *testing.T) {
	var b strings.Builder
	for format, want := range map[string]string{"text": "level=INFO msg=hello", "json": `"msg":"hello"`, "": `"msg":"hello"`} {
		b.Reset()
		slog.New(logHandler(format, &b, nil)).Info("hello")
		if !strings.Contains(b.String(), want) {
			t.Errorf("--log-format %q logged %q, want %q in it", format, b.String(), want)
		}
	}
	if _, err := parseConfig([]string{"--log-format", "yaml"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Errorf("--log-format yaml: %v, want it refused", err)
	}
}

// A value a flag cannot take is refused saying what the flag wants, on the command line
// and in the flag's variable alike, and naming where it came from.
func TestFlagValueErrorsSayWhatIsWanted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--drain-period", "5"}, want: `invalid value "5" for flag -drain-period: want a duration with a unit, such as 5s or 1m30s`},
		{env: map[string]string{"AGENTD_DRAIN_PERIOD": "5"}, want: `invalid value "5" for AGENTD_DRAIN_PERIOD: want a duration with a unit, such as 5s or 1m30s`},
		{args: []string{"--max-runs=lots"}, want: `invalid value "lots" for flag -max-runs: want a whole number, such as 1024`},
		{args: []string{"--max-runs=99999999999999999999"}, want: `invalid value "99999999999999999999" for flag -max-runs: out of range`},
		{env: map[string]string{"AGENTD_STORE_MAX_BYTES": "64MiB"}, want: `invalid value "64MiB" for AGENTD_STORE_MAX_BYTES: want a whole number of bytes, such as 67108864 (64 MiB)`},
		{args: []string{"--audit=yes"}, want: `invalid boolean value "yes" for -audit: want true or false`},
		{env: map[string]string{"AGENTD_RATE_LIMIT": "fast"}, want: `invalid value "fast" for AGENTD_RATE_LIMIT: want a number, such as 2.5`},
		{args: []string{"--log-level=loud"}, want: `invalid value "loud" for flag -log-level: want debug, info, warn or error`},
	} {
		var stderr strings.Builder
		_, err := parseConfig(tc.args, env(tc.env), &stderr)
		if err == nil || err.Error() != tc.want {
			t.Errorf("parseConfig(%q, %v) error = %v, want %s", tc.args, tc.env, err, tc.want)
		}
		if stderr.Len() > 0 {
			t.Errorf("parseConfig(%q, %v) wrote %q, want nothing but the error", tc.args, tc.env, stderr.String())
		}
	}
	// Every flag that can refuse a value says what it wants, whatever its type.
	fs, _ := newFlagSet(&config{})
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(flag.Getter).Get().(string); ok || f.Name == "version" {
			return
		}
		for _, c := range []struct {
			args []string
			env  map[string]string
			from string
		}{
			{args: []string{"--" + f.Name + "=x5"}, from: " -" + f.Name + ":"},
			{env: map[string]string{envName(f.Name): "x5"}, from: envName(f.Name) + ":"},
		} {
			_, err := parseConfig(c.args, env(c.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.from+" want ") || strings.Contains(err.Error(), "parse error") {
				t.Errorf("--%s x5 (%q, %v): %v, want an error from %s saying what it wants", f.Name, c.args, c.env, err, c.from)
			}
		}
	})
}

// A variable whose value failed to parse is reported alone: its flag is not then checked
// as if it held 0, nor are the flags checked against it.
func TestConfigEnvironmentParseFailureIsNotValidated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{env: map[string]string{"AGENTD_MAX_RUNS": "lots"}, want: `invalid value "lots" for AGENTD_MAX_RUNS: want a whole number, such as 1024`},
		{args: []string{"--shutdown-timeout=10s"}, env: map[string]string{"AGENTD_DRAIN_PERIOD": "5"}, want: `invalid value "5" for AGENTD_DRAIN_PERIOD: want a duration with a unit, such as 5s or 1m30s`},
		{env: map[string]string{"AGENTD_MAX_RUNS": "lots", "AGENTD_KEEPALIVE_TIME": "1"}, want: `invalid value "1" for AGENTD_KEEPALIVE_TIME: want a duration with a unit, such as 5s or 1m30s` + "\n" +
			`invalid value "lots" for AGENTD_MAX_RUNS: want a whole number, such as 1024`},
	} {
		_, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err == nil || err.Error() != tc.want {
			t.Errorf("parseConfig(%q, %v) error =\n%v\nwant\n%s", tc.args, tc.env, err, tc.want)
		}
	}
}

// An unknown flag gets one line naming it, with the closest flag if one is close, and
// the way to the list; the whole usage is for -h and --help.
func TestUnknownFlag(t *testing.T) {
	for _, tc := range []struct {
		arg, want string
	}{
		{"--http-listn", "unknown flag --http-listn (did you mean --http-listen?): run agentd --help for the flags"},
		{"-htp-listen=:8080", "unknown flag --htp-listen (did you mean --http-listen?): run agentd --help for the flags"},
		{"--max_runs=3", "unknown flag --max_runs (did you mean --max-runs?): run agentd --help for the flags"},
		{"--AGENTD_LISTEN=:1", "unknown flag --AGENTD_LISTEN (did you mean --listen?): run agentd --help for the flags"},
		{"--listen-http", "unknown flag --listen-http (did you mean --http-listen?): run agentd --help for the flags"},
		{"--drain", "unknown flag --drain (did you mean --drain-period?): run agentd --help for the flags"},
		{"--verison", "unknown flag --verison (did you mean --version?): run agentd --help for the flags"},
		{"--port", "unknown flag --port: run agentd --help for the flags"},
		{"--tls", "unknown flag --tls: run agentd --help for the flags"},
	} {
		var stderr strings.Builder
		_, err := parseConfig([]string{tc.arg, "x"}, env(nil), &stderr)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error = %v, want %s", tc.arg, err, tc.want)
		}
		if stderr.Len() > 0 {
			t.Errorf("%s: wrote %d bytes of usage, want none:\n%s", tc.arg, stderr.Len(), stderr.String())
		}
	}
	for _, arg := range []string{"-h", "--help", "-help"} {
		var stderr strings.Builder
		if _, err := parseConfig([]string{arg}, env(nil), &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "  -http-listen") {
			t.Errorf("%s: %v, want flag.ErrHelp and the usage; wrote:\n%s", arg, err, stderr.String())
		}
	}
}

// Every flag is listed under exactly one heading of --help, so that a new flag cannot be
// left out of it, and the headings name no flag that is gone.
func TestUsageGroupsEveryFlagOnce(t *testing.T) {
	fs, _ := newFlagSet(&config{})
	in := map[string][]string{}
	for _, g := range flagGroups {
		for _, name := range g.flags {
			in[name] = append(in[name], g.title)
			if fs.Lookup(name) == nil {
				t.Errorf("group %q lists %s, which is no flag", g.title, name)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if len(in[f.Name]) != 1 {
			t.Errorf("--%s is in groups %q, want exactly one (add it to flagGroups)", f.Name, in[f.Name])
		}
	})
	for name := range derivedDefaults {
		if fs.Lookup(name) == nil {
			t.Errorf("derivedDefaults names %s, which is no flag", name)
		}
	}
}

// --help lists the flags under headings, each with a placeholder that says what it
// takes, its variable and its default.
func TestHelpListsFlagsByGroupWithVariableAndDefault(t *testing.T) {
	var usage strings.Builder
	if _, err := parseConfig([]string{"--help"}, env(nil), &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	out := usage.String()
	for _, want := range []string{
		"\nListeners:\n  -listen host:port  (AGENTD_LISTEN, default localhost:50051)\n",
		"\n  -store memory|sqlite:PATH|postgres://URL  (AGENTD_STORE, default memory)\n",
		"\n  -drain-period duration  (AGENTD_DRAIN_PERIOD, default 20s)\n",
		"\n  -thread-retention duration  (AGENTD_THREAD_RETENTION, default 720h)\n",
		"\n  -max-runs-per-caller int  (AGENTD_MAX_RUNS_PER_CALLER, default a quarter of --max-runs)\n",
		"\n  -store-max-bytes bytes  (AGENTD_STORE_MAX_BYTES, default 67108864 = 64 MiB)\n",
		"\n  -log-level debug|info|warn|error  (AGENTD_LOG_LEVEL, default info)\n",
		"\n  -audit  (AGENTD_AUDIT)\n",
		"\n  -config file  (AGENTD_CONFIG)\n",
		"\n  -version\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	var headings []string
	for line := range strings.Lines(out) {
		if h, ok := strings.CutSuffix(line, ":\n"); ok && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "Usage") {
			headings = append(headings, h)
		}
	}
	if len(headings) != len(flagGroups) {
		t.Errorf("--help has headings %q, want one a group (%d)", headings, len(flagGroups))
	}
	fs, _ := newFlagSet(&config{})
	fs.VisitAll(func(f *flag.Flag) {
		placeholder, _ := unquoteUsage(f)
		switch placeholder {
		case "value", "string", "float":
			t.Errorf("-%s reads as -%s %s: give its usage a `placeholder`", f.Name, f.Name, placeholder)
		}
		if f.Name == "version" {
			return
		}
		if !strings.Contains(out, "\n  -"+strings.TrimSuffix(f.Name+" "+placeholder, " ")+"  ("+envName(f.Name)) {
			t.Errorf("--help has no line for -%s %s with %s", f.Name, placeholder, envName(f.Name))
		}
	})
}

// holdLogs holds the records of every handler derived from it until release, then
// passes them on in order, with their attributes and groups, and later ones at once.
func TestLogsHeldUntilRelease(t *testing.T) {
	var b strings.Builder
	h, release := holdLogs(slog.NewTextHandler(&b, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	log := slog.New(h)
	log.Warn("first", "n", 1)
	log.With("store", "memory").WithGroup("g").Info("second", "n", 2)
	if b.Len() > 0 {
		t.Fatalf("logged before release: %q", b.String())
	}
	b.WriteString("banner\n")
	release()
	log.Info("third")
	release()
	want := "banner\nlevel=WARN msg=first n=1\nlevel=INFO msg=second store=memory g.n=2\nlevel=INFO msg=third\n"
	if b.String() != want {
		t.Errorf("logged\n%s\nwant\n%s", b.String(), want)
	}
}
