package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// newFlagSet returns agentd's flags, bound to cfg's fields, and --version's value. Every
// flag's usage names its placeholder in backquotes (flag.UnquoteUsage) unless the type's
// own reads right (duration, int); [flagGroups] places it under a heading of --help.
func newFlagSet(cfg *config) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("agentd", flag.ContinueOnError)
	// parseConfig reports what goes wrong itself, and prints the usage for -h alone.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}

	fs.StringVar(&cfg.listen, "listen", "localhost:50051", "`host:port` to serve gRPC on (:50051 for every interface)")
	fs.StringVar(&cfg.httpListen, "http-listen", "", "`host:port` to serve agentd over HTTP on as well (such as localhost:8080): the web console at /, and every RPC over the Connect protocol (plain JSON from curl), gRPC-Web and gRPC; without it none is served")
	fs.StringVar(&cfg.httpAllowedHosts, "http-allowed-hosts", "", "`names` (comma-separated; .example.com for it and every name under it; * for any) that the HTTP listener serves requests for when it has no auth, besides localhost, IP addresses, this machine's name and the host of --http-listen: a page of another site whose name resolves to agentd's address (DNS rebinding) is refused")
	fs.StringVar(&cfg.httpCORSOrigins, "http-cors-origins", "", "`origins` (comma-separated, such as https://console.example.com; * for any) whose web pages may call agentd over --http-listen; by default none, so only the console agentd serves itself can")
	fs.StringVar(&cfg.config, "config", "", "agents `file` (YAML); without one agentd serves the built-in demo agent")
	fs.StringVar(&cfg.model, "model", "", "`provider:model` for the default agent, such as anthropic:<model>, openai:<model> or workload:medium; demo is the built-in demo model")
	fs.DurationVar(&cfg.demoDelay, "demo-delay", 20*time.Millisecond, "pause between the demo model's deltas, so a person sees the answer stream")
	fs.DurationVar(&cfg.drainPeriod, "drain-period", 20*time.Second, "after SIGTERM, how long running runs may take before they end SHUTDOWN with a continuation")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "after SIGTERM, how long until the process exits whatever is still open (longer than --drain-period)")
	fs.IntVar(&cfg.maxRuns, "max-runs", 1024, "runs in progress at most; more are refused with RESOURCE_EXHAUSTED")
	fs.IntVar(&cfg.maxAttachPerRun, "max-attachments-per-run", 64, "streams attached to one run at once (AttachRun, Run streams that attach, the one that started it); one more is refused with RESOURCE_EXHAUSTED (TOO_MANY_ATTACHMENTS)")
	fs.IntVar(&cfg.maxAttachPerCaller, "max-attachments-per-caller", 256, "streams one caller (bearer token or client certificate) has attached to runs at once; one more is refused with RESOURCE_EXHAUSTED (TOO_MANY_ATTACHMENTS)")
	fs.IntVar(&cfg.maxRunDepth, "max-run-depth", 4, "how deep sub-agents' child runs nest at most; a call that would go deeper gets an error result its model reads")
	fs.IntVar(&cfg.maxChildren, "max-children-per-run", 32, "child runs one run's sub-agent calls start at most; a call past it gets an error result its model reads")
	fs.Int64Var(&cfg.maxTreeTokens, "max-tree-tokens", 0, "tokens (input and output) a tree of runs (a root and its sub-agents' child runs) may spend before its calls start no more children; 0 turns the budget off")
	fs.IntVar(&cfg.maxRunsPerCaller, "max-runs-per-caller", 0, "runs in progress at most of one caller (bearer token or client certificate; with --limit-by-peer-ip, an unauthenticated caller's IP); more are refused with RESOURCE_EXHAUSTED; 0 turns the limit off")
	fs.DurationVar(&cfg.startTimeout, "start-timeout", 30*time.Second, "how long a Run stream may stay open without its start message; then it ends DEADLINE_EXCEEDED")
	fs.DurationVar(&cfg.stallTimeout, "stall-timeout", 2*time.Minute, "how long a stream's client may read nothing while agentd has events for it; then the stream is let go and the run goes on (under on_disconnect CANCEL the run ends FAILED, CLIENT_STALLED, with its transcript)")
	fs.DurationVar(&cfg.maxApprovalTimeout, "max-approval-timeout", 24*time.Hour, "longest approval_timeout a run may ask for; a longer one is refused with INVALID_ARGUMENT")
	fs.IntVar(&cfg.maxMessageBytes, "max-message-bytes", 4<<20, "largest client message accepted, in `bytes`")
	fs.StringVar(&cfg.store, "store", "memory", "where runs, their journals and threads are kept, one of `memory|sqlite:PATH|postgres://URL`: memory (bounded, gone with the process), sqlite: and a file's path (across restarts, for one replica) or the URL of a PostgreSQL database (shared by replicas)")
	fs.Int64Var(&cfg.storeMaxBytes, "store-max-bytes", 64<<20, "with --store memory, the `bytes` it holds at most: past it the runs that finished first go, then the threads idle the longest")
	fs.Int64Var(&cfg.journalMaxRunBytes, "journal-max-run-bytes", 8<<20, "with --store memory, the `bytes` of one run's journal kept: past it the oldest events go, and attaching from before them is refused (EVENTS_EXPIRED)")
	fs.BoolVar(&cfg.exactDeltas, "exact-deltas", false, "send every delta the model streams as an event of its own, to a client that is behind too; by default consecutive deltas of one block that no client has taken yet merge into one, which costs the server and the client less")
	fs.DurationVar(&cfg.parkAfter, "park-after", 30*time.Second, "how long a run waits live for an answer from a Run stream attached to it before it parks all the same (a run with no such stream parks at once); 0 waits live as long as such a stream is attached")
	fs.StringVar(&cfg.replicaID, "replica-id", "", "this replica's `name` among those sharing a --store postgres:// database: the holder of the leases on its runs")
	fs.DurationVar(&cfg.leaseTTL, "lease-ttl", 10*time.Second, "with a store on disk, how long a run's lease lasts unless renewed (every third of it): how long a run of a replica that died waits before another takes it up")
	fs.DurationVar(&cfg.parkTimeout, "park-timeout", 24*time.Hour, "how long a run whose client went away waits, parked, for the input it needs (an approval, a client tool's result) before it ends EXPIRED")
	fs.IntVar(&cfg.maxParkedRuns, "max-parked-runs", 0, "runs parked at most (their clients gone while they wait for an approval or a client tool's result); a run that would park past it ends AWAITING_INPUT with its continuation instead, for its client to resume; 0 turns the cap off")
	fs.IntVar(&cfg.maxParkedRunsPerCaller, "max-parked-runs-per-caller", 0, "runs parked at most of one caller (as --max-runs-per-caller counts callers); past it the caller's run that would park ends AWAITING_INPUT with its continuation; 0 turns the cap off")
	fs.Int64Var(&cfg.maxParkedBytes, "max-parked-bytes", 256<<20, "`bytes` of the parked runs' checkpoints (their transcripts) at most, which --store memory holds in memory for up to --park-timeout; a run that would park past it ends AWAITING_INPUT with its continuation; 0 turns the cap off")
	fs.Int64Var(&cfg.maxParkedBytesPerCaller, "max-parked-bytes-per-caller", 0, "`bytes` of one caller's parked runs' checkpoints at most; past it the caller's run that would park ends AWAITING_INPUT with its continuation; 0 turns the cap off")
	fs.DurationVar(&cfg.runRetention, "run-retention", 24*time.Hour, "how long a finished run and its journal are kept for clients that attach to it")
	fs.DurationVar(&cfg.threadRetention, "thread-retention", 30*24*time.Hour, "how long a thread no run adds to is kept")
	fs.StringVar(&cfg.keyFile, "continuation-key-file", "", "`file` holding the key that signs continuations (or set AGENTD_CONTINUATION_KEY to the key itself); every replica needs the same, and without one a parked run resumes only on the process that parked it")
	fs.StringVar(&cfg.authTokensFile, "auth-tokens-file", "", "`file` of bearer tokens, one a line (# comments): every call but health and reflection then needs \"authorization: Bearer <token>\"; without one there is no auth")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "PEM certificate `file` to serve TLS with (needs --tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "PEM private key `file` of --tls-cert")
	fs.StringVar(&cfg.clientCA, "client-ca", "", "PEM CA certificates `file`: with it clients must present a certificate one of them signed (mTLS; needs --tls-cert)")
	fs.Float64Var(&cfg.rateLimit, "rate-limit", 50, "`calls/s` of one caller (bearer token or client certificate; with --limit-by-peer-ip, an unauthenticated caller's IP; health and reflection are exempt); beyond it RESOURCE_EXHAUSTED; 0 turns the limit off")
	fs.IntVar(&cfg.rateBurst, "rate-burst", 100, "`calls` a caller may make at once, before --rate-limit paces it (the token bucket's size)")
	fs.BoolVar(&cfg.limitByPeerIP, "limit-by-peer-ip", false, "apply --rate-limit and --max-runs-per-caller to callers without a token or client certificate by their IP address; without it they have no per-caller limit. Wrong behind a proxy or mesh sidecar, where every caller has the proxy's address")
	fs.IntVar(&cfg.maxConnections, "max-connections", 4096, "connections open at once; one more is closed as soon as it is accepted (its client gets UNAVAILABLE); 0 turns the cap off")
	fs.IntVar(&cfg.maxConnectionsPerIP, "max-connections-per-ip", 0, "connections open at once from one IP address, on each listener; one more is closed as soon as it is accepted (UNAVAILABLE); 0 turns the cap off. Behind a proxy or mesh sidecar every caller has the proxy's address")
	fs.IntVar(&cfg.maxStreamsPerConn, "max-streams-per-connection", 1024, "concurrent streams (RPCs) on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): gRPC clients queue the calls beyond it")
	fs.DurationVar(&cfg.handshakeTimeout, "handshake-timeout", 20*time.Second, "how long a new connection has to finish its TLS and HTTP/2 handshake before it is closed")
	fs.DurationVar(&cfg.keepaliveMinTime, "keepalive-min-time", 5*time.Second, "shortest interval between a client's keepalive pings; a client pinging more often is sent away (GOAWAY too_many_pings: its calls end UNAVAILABLE)")
	fs.DurationVar(&cfg.keepaliveTime, "keepalive-time", time.Minute, "after this long without a frame from a client, agentd pings it (at least 1s)")
	fs.DurationVar(&cfg.keepaliveTimeout, "keepalive-timeout", 20*time.Second, "a client that does not answer a ping within this long is taken for dead: its connection is closed and its streams end")
	fs.DurationVar(&cfg.maxConnIdle, "max-connection-idle", 5*time.Minute, "a connection without a stream for this long is closed (with a GOAWAY: its client reconnects when it needs to); 0 keeps idle connections open")
	fs.DurationVar(&cfg.maxConnAge, "max-connection-age", 0, "a connection this old gets a GOAWAY (new calls go to a new connection, possibly another replica); 0 means no age limit, as runs may wait hours on an approval")
	fs.DurationVar(&cfg.maxConnAgeGrace, "max-connection-age-grace", 0, "after --max-connection-age, how long the connection's streams may go on before it is closed; 0 lets them finish")
	fs.IntVar(&cfg.maxHealthWatches, "max-health-watches", 1024, "grpc.health.v1.Health/Watch streams open at once; more are refused with RESOURCE_EXHAUSTED (Check is never limited); 0 turns the cap off")
	fs.IntVar(&cfg.maxHealthWatchesPeer, "max-health-watches-per-peer", 64, "Health/Watch streams open at once from one IP address (behind a proxy or mesh every caller has the proxy's); 0 turns the cap off")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "minimum level of logs, `debug|info|warn|error`")
	fs.StringVar(&cfg.logFormat, "log-format", "", "format of logs, `text|json`: text (key=value lines, for people) or json (one object a line, for collectors)")
	fs.BoolVar(&cfg.audit, "audit", false, "log one audit record per tool call and decision of every run (arguments redacted); it records what every hook decided, the agents' own included, wherever it sits in the chain")
	fs.StringVar(&cfg.metricsListen, "metrics-listen", "", "`host:port` to serve Prometheus metrics on, at /metrics (such as localhost:9464); without it none is served. Traces and pushed metrics are configured by the standard OTEL_* variables")
	fs.BoolVar(&cfg.recordContent, "record-content", false, "record prompts, model output, tool arguments and tool results on trace spans (gen_ai.input.messages, …); off by default, as they may hold personal data")
	showVersion := fs.Bool("version", false, "print agentd's version (module version and VCS revision) and exit")
	fs.VisitAll(func(f *flag.Flag) { f.Value = &explained{Value: f.Value, flag: f} })
	return fs, showVersion
}

// flagGroups is how --help lists the flags: under these headings, in this order. Every
// flag is in exactly one group.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Listeners", []string{"listen", "http-listen", "http-allowed-hosts", "http-cors-origins"}},
	{"Agents and models", []string{"config", "model", "demo-delay"}},
	{"Auth and TLS", []string{"auth-tokens-file", "tls-cert", "tls-key", "client-ca"}},
	{"Store", []string{"store", "store-max-bytes", "journal-max-run-bytes", "run-retention", "thread-retention"}},
	{"Runs", []string{"start-timeout", "stall-timeout", "max-approval-timeout", "park-after", "park-timeout", "exact-deltas"}},
	{"Sub-agents", []string{"max-run-depth", "max-children-per-run", "max-tree-tokens"}},
	{"Limits of the server and of each caller", []string{
		"max-runs", "max-runs-per-caller", "max-attachments-per-run", "max-attachments-per-caller",
		"max-parked-runs", "max-parked-runs-per-caller", "max-parked-bytes", "max-parked-bytes-per-caller",
		"max-message-bytes", "rate-limit", "rate-burst", "limit-by-peer-ip",
	}},
	{"Connections", []string{
		"max-connections", "max-connections-per-ip", "max-streams-per-connection", "handshake-timeout",
		"keepalive-min-time", "keepalive-time", "keepalive-timeout",
		"max-connection-idle", "max-connection-age", "max-connection-age-grace",
		"max-health-watches", "max-health-watches-per-peer",
	}},
	{"Fleet and restarts", []string{"continuation-key-file", "replica-id", "lease-ttl"}},
	{"Shutdown", []string{"drain-period", "shutdown-timeout"}},
	{"Observability", []string{"log-level", "log-format", "audit", "metrics-listen", "record-content"}},
	{"Other", []string{"version"}},
}

// derivedDefaults are the defaults --help gives the flags whose zero value stands for a
// default parseConfig derives, or one found at run time.
var derivedDefaults = map[string]string{
	"model":                       "the agents file's, or demo",
	"max-runs-per-caller":         "a quarter of --max-runs",
	"max-parked-runs":             "4 times --max-runs",
	"max-parked-runs-per-caller":  "a quarter of --max-parked-runs",
	"max-parked-bytes-per-caller": "a quarter of --max-parked-bytes",
	"max-connections-per-ip":      "a quarter of --max-connections",
	"replica-id":                  "the host name and a random suffix",
	"log-format":                  "text on a terminal, else json",
}

// printUsage writes --help: the flags under the headings of [flagGroups], each with its
// placeholder, variable, default and usage.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: agentd [flags]

agentd runs AI agents behind gRPC (agentd.v1.AgentService). Without flags it
serves the built-in demo agent on localhost:50051; --http-listen localhost:8080
adds the web console. Every flag may also be set in the environment variable
shown beside it; a flag on the command line wins.
`)
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			f := fs.Lookup(name)
			placeholder, usage := unquoteUsage(f)
			line := "  -" + f.Name
			if placeholder != "" {
				line += " " + placeholder
			}
			var notes []string
			if name != "version" {
				notes = append(notes, envName(name))
			}
			if d := defaultText(f); d != "" {
				notes = append(notes, "default "+d)
			}
			if len(notes) > 0 {
				line += "  (" + strings.Join(notes, ", ") + ")"
			}
			fmt.Fprintln(w, line)
			for _, l := range wrap(usage, 80-6) {
				fmt.Fprintln(w, "      "+l)
			}
		}
	}
}

// unquoteUsage is flag.UnquoteUsage of the flag agentd registered, whose type names the
// placeholder when the usage has no backquotes.
func unquoteUsage(f *flag.Flag) (placeholder, usage string) {
	inner := *f
	if e, ok := f.Value.(*explained); ok {
		inner.Value = e.Value
	}
	return flag.UnquoteUsage(&inner)
}

// defaultText is the default --help gives f, or "" for none (no text, false).
func defaultText(f *flag.Flag) string {
	if d, ok := derivedDefaults[f.Name]; ok {
		return d
	}
	switch f.Value.(flag.Getter).Get().(type) {
	case bool:
		if f.DefValue == "false" {
			return ""
		}
	case time.Duration:
		d, _ := time.ParseDuration(f.DefValue)
		return shortDuration(d)
	case *slog.Level:
		return strings.ToLower(f.DefValue)
	}
	if isBytes(f.Name) {
		return bytesText(f.DefValue, "%d = %d MiB")
	}
	return f.DefValue
}

// bytesText is the number of bytes n, in format with its MiB when it is a whole number of
// them (format takes the bytes and the MiB), else as it is.
func bytesText(n, format string) string {
	if v, err := strconv.ParseInt(n, 10, 64); err == nil && v >= 1<<20 && v%(1<<20) == 0 {
		return fmt.Sprintf(format, v, v>>20)
	}
	return n
}

// shortDuration is d without the zero minutes and seconds time.Duration.String adds: 24h,
// not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok && d >= time.Minute {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// wrap breaks s into lines of at most width bytes at spaces; a word longer than width
// stays whole.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// explained is a flag's value that refuses what it cannot take by saying what it wants
// (such as "want a duration with a unit, such as 5s or 1m30s"), where the flag package's
// own values say "parse error". A value it refuses leaves the flag as it was.
type explained struct {
	flag.Value
	flag *flag.Flag
}

func (e *explained) Set(s string) error {
	before := e.Value.String()
	if err := e.Value.Set(s); err != nil {
		_ = e.Value.Set(before)
		return errors.New(e.want(s, err))
	}
	return nil
}

// IsBoolFlag tells the flag package that a bool flag may be given without a value.
func (e *explained) IsBoolFlag() bool {
	b, ok := e.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Get returns the value of the flag package's value.
func (e *explained) Get() any { return e.Value.(flag.Getter).Get() }

// want says what the flag wants, s and err being what it refused.
func (e *explained) want(s string, err error) string {
	switch e.Get().(type) {
	case bool:
		return "want true or false"
	case time.Duration:
		return "want a duration with a unit, such as 5s or 1m30s"
	case float64:
		return "want a number, such as 2.5"
	case *slog.Level:
		return "want debug, info, warn or error"
	case int, int64:
		if _, perr := strconv.ParseInt(s, 0, 64); errors.Is(perr, strconv.ErrRange) {
			return "out of range"
		}
		example := e.flag.DefValue
		if example == "0" {
			example = "100"
		}
		if isBytes(e.flag.Name) {
			return "want a whole number of bytes, such as " + bytesText(example, "%d (%d MiB)")
		}
		return "want a whole number, such as " + example
	}
	return err.Error()
}

// isBytes says whether the flag is a size in bytes.
func isBytes(name string) bool { return strings.HasSuffix(name, "-bytes") }

// flagError is what parseConfig says of err, from fs.Parse: an unknown flag gets one line
// that names the closest flag if one is close.
func flagError(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if match := closestFlag(name, names); match != "" {
		return fmt.Errorf("unknown flag --%s (did you mean --%s?): run agentd --help for the flags", name, match)
	}
	return fmt.Errorf("unknown flag --%s: run agentd --help for the flags", name)
}

// closestFlag returns the one of names that name most likely misspells, or "": the same
// name in another case, with underscores or as a variable (--AGENTD_LISTEN); the same
// words in another order (--listen-http); the one name it starts (--drain); or the
// nearest within two edits.
func closestFlag(name string, names []string) string {
	norm := strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(name), "_", "-"), "agentd-")
	words := func(s string) []string {
		w := strings.Split(s, "-")
		slices.Sort(w)
		return w
	}
	var prefixed []string
	best, bestDist := "", 3
	if len(norm) < 5 {
		bestDist = 2
	}
	for _, n := range names {
		if n == norm || slices.Equal(words(n), words(norm)) {
			return n
		}
		if strings.HasPrefix(n, norm) && len(norm) >= 4 {
			prefixed = append(prefixed, n)
		}
		if d := editDistance(norm, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" && len(prefixed) == 1 {
		return prefixed[0]
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
