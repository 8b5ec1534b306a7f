// Command agentctl is the client a person uses in a terminal to talk to agentd. It lists
// the agents a server offers, and runs one: the answer streams in as the model writes it,
// tool calls show their arguments filling in, each approval is asked at the prompt, a line
// typed while the run goes on steers it, and Ctrl-C cancels it. It attaches to a run that
// goes on on the server, holds a conversation on a thread the server keeps, and lists,
// shows and deletes those threads.
//
// Usage:
//
//	agentctl [connection flags] agents [--json]
//	agentctl [connection flags] run [flags] PROMPT...
//	agentctl [connection flags] run [flags] --resume FILE
//	agentctl [connection flags] attach [--after SEQ] [--json] RUN_ID
//	agentctl [connection flags] chat [flags]
//	agentctl [connection flags] threads [list | show ID | delete ID] [--json]
//	agentctl [connection flags] load [flags]
//
// The connection flags mirror grpcurl's (--plaintext, -H, --cacert, …), and may come
// before or after the command. Run agentctl -h for all flags and the exit codes.
//
// agentctl speaks agentd.v1.AgentService through the generated stubs alone: it imports
// nothing of agentd's server or runtime.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/term"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/version"
)

// Exit codes.
const (
	exitOK     = 0   // the run completed, or agents listed them
	exitFailed = 1   // the run failed (or stopped, or hit its step limit), or agentctl could not run it
	exitUsage  = 2   // bad flags or arguments
	exitParked = 3   // the run parked (AWAITING_INPUT, SHUTDOWN): run saved its continuation
	exitCancel = 130 // cancelled, detached or quit with Ctrl-C
)

// defaultSave is where a parked run's continuation goes when --save does not say.
const defaultSave = "agentctl-parked.json"

const usageText = `Usage:
  agentctl [connection flags] agents [--json]
  agentctl [connection flags] run [flags] PROMPT...
  agentctl [connection flags] run [flags] --resume FILE
  agentctl [connection flags] attach [--after SEQ] [--json] RUN_ID
  agentctl [connection flags] chat [flags]
  agentctl [connection flags] threads [list | show ID | delete ID] [--json]
  agentctl [connection flags] load [flags]

agentctl talks to agentd (agentd.v1.AgentService).

  agents   lists the agents the server offers, with their tools and policies.
  run      runs an agent on PROMPT. Its answer streams in; tool calls show their
           arguments as the model writes them. Each approval is asked at the prompt:
           y approves, n denies (you may give a reason), e edits the arguments in
           $VISUAL or $EDITOR (as pretty JSON), or inline on one line when neither is
           set. A line typed while the run goes on is sent as a steer, taken before
           the next model call; a line starting with "!" interrupts the current step
           instead. Ctrl-C cancels the run; a second Ctrl-C quits at once. End of input
           (Ctrl-D) leaves the run to go on: if it then needs an approval it parks.
           When stdin is not a terminal, agentctl reads it only to answer approvals,
           one line per answer, so answers can be piped in ("n" then denies with no
           reason asked; "n REASON" gives one).
           A parked run (AWAITING_INPUT, or SHUTDOWN when the server drained) is saved
           to --save FILE with its history and continuation; --resume FILE continues it
           on any replica that shares the server's continuation key, asking the
           pending approvals first. A resumed file is removed once the run it resumed
           has finished, so that an approved call cannot run twice.
           A run goes on on the server when its connection is lost: agentctl then
           prints the attach command that follows it again.
  attach   follows a run that goes on on the server (or shows one that finished),
           from the start or from --after SEQ: first a line with the run's state, then
           its events, shown as run shows them. Its pending approvals are asked at the
           prompt, typed lines steer it, and "/cancel" cancels it. Ctrl-C detaches and
           prints the command that attaches again from the last event seen; the run
           goes on. End of input leaves the approvals to another client: an attached
           agentctl never parks a run.
  chat     holds a conversation on a thread the server keeps: each line is a turn, a
           run with history THREAD whose input is that line alone, shown as run shows
           it. The first turn makes the thread (--thread continues one); end of input
           (Ctrl-D) ends the chat. Ctrl-C cancels the turn's run, a second quits; at the
           prompt it quits. A run that parks ends the chat, saved as run saves it.
  threads  lists the threads the server keeps for you; show ID prints one's messages,
           delete ID deletes it.
  load     runs the agent on --concurrency streams at once, over and over, for
           --duration (or --runs runs), approving every approval, and reports runs/s,
           deltas/s, percentiles of the time to the first event and to run_finished,
           errors by kind, and with --server-pid the server's RSS. Ctrl-C stops it
           early, still reporting. Serve the benchmark workload for it with
           agentd --model workload:medium.

Flags take one dash or two. Connection flags are grpcurl's. To a loopback address
(localhost, 127.0.0.1, ::1) with no TLS flag agentctl speaks plain text, as agentd serves
by default; to any other address it speaks TLS unless given --plaintext
(--plaintext=false forces TLS to a loopback address). Each
connection flag but -H may also be set as AGENTCTL_<FLAG> in the environment, such as
AGENTCTL_ADDR=host:port or AGENTCTL_PLAINTEXT=true; a flag on the command line wins.

Connection flags:
%s
Run flags:
%s
Attach flags:
%s
Chat flags:
%s
Agents and threads flags:
  --json   print the response as JSON
Load flags:
%s
Exit codes: 0 completed, 1 failed, 2 usage, 3 parked (awaiting input), 130 Ctrl-C.
`

// env is what a command runs with: main passes the process's, tests their own.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdinTTY says stdin is a terminal: agentctl then reads lines as they are typed, so
	// that they can steer the run; otherwise only to answer approvals.
	stdinTTY bool
	// stdoutTTY turns on colours (unless NO_COLOR is set).
	stdoutTTY bool
	// stderrTTY turns on the status line while agentctl waits for the model or a tool.
	stderrTTY bool
	// interrupts delivers Ctrl-C.
	interrupts <-chan os.Signal
	// addr is the address agentctl dials, for the errors that name it.
	addr string
	// connArgs are the connection flags given on the command line, as given: the commands
	// agentctl prints for the person to type next repeat them, so that they reach the
	// same agentd the same way (those set by AGENTCTL_* variables hold in the same shell).
	connArgs []string
}

func main() {
	interrupts := make(chan os.Signal, 2)
	signal.Notify(interrupts, os.Interrupt)
	os.Exit(run(context.Background(), os.Args[1:], env{
		stdin:      os.Stdin,
		stdout:     os.Stdout,
		stderr:     os.Stderr,
		getenv:     os.Getenv,
		stdinTTY:   term.IsTerminal(int(os.Stdin.Fd())),
		stdoutTTY:  term.IsTerminal(int(os.Stdout.Fd())),
		stderrTTY:  term.IsTerminal(int(os.Stderr.Fd())),
		interrupts: interrupts,
	}))
}

// run runs agentctl with args and returns its exit code.
func run(ctx context.Context, args []string, e env) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(e.stdout, version.String("agentctl"))
		return exitOK
	}
	cmd, err := parseCommand(args, e.getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(e.stdout, usageText, flagHelp(connFlagSet(&connConfig{})), flagHelp(runFlagSet(&runConfig{})),
			flagHelp(attachFlagSet(&attachConfig{})), flagHelp(chatFlagSet(&runConfig{})), flagHelp(loadFlagSet(&loadConfig{})))
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "agentctl: %v\nRun agentctl -h for usage.\n", err)
		return exitUsage
	}
	e.connArgs, e.addr = cmd.conn.given, cmd.conn.addr
	client, closeConn, err := dial(cmd.conn)
	if err != nil {
		fmt.Fprintf(e.stderr, "agentctl: %v\n", err)
		return exitUsage
	}
	defer closeConn()
	ctx, err = outgoingHeaders(ctx, cmd.conn, e.getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "agentctl: %v\n", err)
		return exitUsage
	}
	if cmd.conn.maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.conn.maxTime)
		defer cancel()
	}
	switch cmd.name {
	case "agents":
		return listAgents(ctx, client, cmd.agentsJSON, e)
	case "load":
		clients := []agentdv1.AgentServiceClient{client}
		for range cmd.load.connections - 1 {
			c, closeC, err := dial(cmd.conn)
			if err != nil {
				fmt.Fprintf(e.stderr, "agentctl: %v\n", err)
				return exitUsage
			}
			defer closeC()
			clients = append(clients, c)
		}
		return runLoad(ctx, clients, *cmd.load, e)
	case "attach":
		return runAttach(ctx, client, cmd.attach, e)
	case "chat":
		return runChat(ctx, client, cmd.run, e)
	case "threads":
		return runThreads(ctx, client, cmd.threads, e)
	default:
		return runAgent(ctx, client, cmd.run, e)
	}
}

// command is a parsed command line.
type command struct {
	name       string // "agents", "run", "attach", "chat", "threads" or "load"
	conn       connConfig
	run        runConfig // of run and chat
	attach     attachConfig
	threads    threadsConfig
	load       *loadConfig // with load
	agentsJSON bool
}

// connConfig is how agentctl reaches agentd.
type connConfig struct {
	addr          string
	plaintext     bool
	insecure      bool
	cacert        string
	cert          string
	key           string
	servername    string
	authority     string
	headers       headerFlags
	expandHeaders bool
	maxTime       time.Duration
	// given are the connection flags of the command line, wherever they stood, as
	// flags: what the commands agentctl prints repeat.
	given []string
}

// plaintextByDefault reports whether agentctl speaks plain text when --plaintext is not
// given: to a loopback address (where agentd serves plain text by default) with no TLS
// flag. Anything else gets TLS, as grpcurl does.
func (c connConfig) plaintextByDefault() bool {
	if c.insecure || c.cacert != "" || c.cert != "" || c.key != "" || c.servername != "" {
		return false
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		host = c.addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runConfig is what `agentctl run` runs, and how; `agentctl chat` runs each turn with it.
type runConfig struct {
	prompt      string
	agent       string
	thread      string
	history     historyFlag
	json        bool
	autoApprove bool
	resume      string
	save        string
	approve     bool
	deny        string
	denySet     bool
	// outputSchema is --output-schema: the JSON Schema of a typed result for this run.
	outputSchema string
}

// attachConfig is the run `agentctl attach` follows, and from where.
type attachConfig struct {
	runID string
	after int64
	json  bool
}

// threadsConfig is what `agentctl threads` does.
type threadsConfig struct {
	action string // "list", "show" or "delete"
	id     string // with show and delete
	json   bool
}

// historyFlag is --history: where a run's history comes from.
type historyFlag agentdv1.History

func (h *historyFlag) String() string {
	if h == nil || agentdv1.History(*h) != agentdv1.History_HISTORY_THREAD {
		return "client"
	}
	return "thread"
}

func (h *historyFlag) Set(v string) error {
	switch strings.ToLower(v) {
	case "client":
		*h = historyFlag(agentdv1.History_HISTORY_UNSPECIFIED)
	case "thread":
		*h = historyFlag(agentdv1.History_HISTORY_THREAD)
	default:
		return fmt.Errorf("want client or thread, got %q", v)
	}
	return nil
}

// headerFlags collects -H values.
type headerFlags []string

func (h *headerFlags) String() string { return strings.Join(*h, ", ") }

func (h *headerFlags) Set(v string) error {
	if _, _, err := parseHeader(v); err != nil {
		return err
	}
	*h = append(*h, v)
	return nil
}

// parseHeader splits "name: value" as grpcurl does: the name is lower-cased, spaces around
// both are dropped.
func parseHeader(h string) (name, value string, err error) {
	name, value, ok := strings.Cut(h, ":")
	name = strings.ToLower(strings.TrimSpace(name))
	if !ok || name == "" {
		return "", "", fmt.Errorf("header %q: want \"name: value\"", h)
	}
	return name, strings.TrimSpace(value), nil
}

// givenConnFlags returns the connection flags the command line set (set names them), as
// command-line words in the order of their names, with their values in c. --max-time is left
// out: it bounds one command, not the next. -H values are as typed (with
// --expand-headers, their ${NAME}s unexpanded), but for secrets (hideSecret).
func givenConnFlags(c *connConfig, set map[string]bool) []string {
	var v connConfig
	fs := connFlagSet(&v) // its flags read v's fields, which then take c's values
	v = *c
	var words []string
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case !set[f.Name] || f.Name == "max-time":
		case f.Name == "H":
			for _, h := range c.headers {
				words = append(words, "-H", hideSecret(h, c.expandHeaders))
			}
		case isBoolFlag(f) && f.Value.String() == "true":
			words = append(words, "--"+f.Name)
		case isBoolFlag(f):
			words = append(words, "--"+f.Name+"=false")
		default:
			words = append(words, "--"+f.Name, f.Value.String())
		}
	})
	return words
}

// hideSecret returns the -H value h as a printed command shows it: a header that holds a
// secret (authorization, cookie, a key, a token, a password) has its value, after an auth
// scheme such as Bearer, shown as "…", unless it takes the secret from the environment
// (--expand-headers and ${NAME}), which a printed command may repeat as it is. agentctl
// prints those commands to stderr, which logs keep.
func hideSecret(h string, expand bool) string {
	name, value, _ := parseHeader(h)
	if expand && strings.Contains(value, "${") {
		return h
	}
	secret := name == "authorization" || name == "proxy-authorization" || name == "cookie"
	for _, w := range []string{"token", "secret", "key", "password", "auth"} {
		secret = secret || strings.Contains(name, w)
	}
	if !secret {
		return h
	}
	if scheme, _, ok := strings.Cut(value, " "); ok {
		return name + ": " + scheme + " …"
	}
	return name + ": …"
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// command returns the agentctl command line of args, with the connection flags this one
// was given, quoted for a POSIX shell: what agentctl prints for the person to type next.
func (e env) command(args ...string) string {
	words := []string{"agentctl"}
	for _, a := range append(append([]string(nil), e.connArgs...), args...) {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// connFlagSet returns a flag set with the connection flags, bound to c.
func connFlagSet(c *connConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("agentctl", flag.ContinueOnError)
	addConnFlags(fs, c)
	return fs
}

func addConnFlags(fs *flag.FlagSet, c *connConfig) {
	fs.StringVar(&c.addr, "addr", "localhost:50051", "`host:port` of agentd")
	fs.BoolVar(&c.plaintext, "plaintext", false, "use plain-text HTTP/2 (no TLS), as agentd serves by default (the default to a loopback address with no TLS flag)")
	fs.BoolVar(&c.insecure, "insecure", false, "use TLS but skip verifying the server's certificate and host name")
	fs.StringVar(&c.cacert, "cacert", "", "PEM `file` of CA certificates to verify the server with (default: the system's)")
	fs.StringVar(&c.cert, "cert", "", "PEM certificate `file` to present to the server (mTLS; needs --key)")
	fs.StringVar(&c.key, "key", "", "PEM private key `file` of --cert")
	fs.StringVar(&c.servername, "servername", "", "`name` to verify the server's certificate against, instead of the host in --addr")
	fs.StringVar(&c.authority, "authority", "", "`value` of the :authority pseudo-header (default: --addr)")
	fs.Var(&c.headers, "H", "metadata `'name: value'` sent with every call, such as 'authorization: Bearer <token>'; repeatable")
	fs.BoolVar(&c.expandHeaders, "expand-headers", false, "expand ${NAME} in -H values from the environment, to keep secrets off the command line")
	fs.DurationVar(&c.maxTime, "max-time", 0, "longest the whole command may take, such as 5m (default: no limit)")
}

// runFlagSet returns a flag set with the run flags, bound to r.
func runFlagSet(r *runConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("agentctl run", flag.ContinueOnError)
	fs.StringVar(&r.agent, "agent", "", "`name` of the agent to run (default: the server's default agent)")
	fs.StringVar(&r.thread, "thread", "", "`id` of the conversation the run belongs to (default: a new one)")
	fs.Var(&r.history, "history", "history `mode`: client (agentctl sends none: the prompt is the whole conversation), or thread (the server keeps the conversation of --thread, or of a new thread, and the prompt is its next turn)")
	fs.BoolVar(&r.json, "json", false, "print every event as one JSON line (NDJSON) and ask nothing: approvals park the run (unless --auto-approve lets the server approve them)")
	fs.BoolVar(&r.autoApprove, "auto-approve", false, "run with APPROVAL_POLICY_AUTO_APPROVE: the server approves the calls its policy lets be approved without a person; the others are still asked")
	fs.StringVar(&r.resume, "resume", "", "continue the parked run saved in `file`")
	fs.StringVar(&r.save, "save", "", "`file` to save a parked run's history and continuation in (default: the --resume file, or "+defaultSave+")")
	fs.StringVar(&r.outputSchema, "output-schema", "", "ask the run for a typed result: a JSON Schema (an object schema, as JSON) its answer must match, where the agent allows it; printed as output:")
	fs.BoolVar(&r.approve, "approve", false, "with --resume: approve every pending approval without asking")
	fs.Func("deny", "with --resume: deny every pending approval without asking, telling the model `reason`", func(s string) error {
		r.deny, r.denySet = s, true
		return nil
	})
	return fs
}

// attachFlagSet returns a flag set with the attach flags, bound to a.
func attachFlagSet(a *attachConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("agentctl attach", flag.ContinueOnError)
	fs.Int64Var(&a.after, "after", 0, "show the events after `seq` (default: the whole run)")
	fs.BoolVar(&a.json, "json", false, "print every event, the attached one first, as one JSON line (NDJSON) and ask nothing")
	return fs
}

// chatFlagSet returns a flag set with the chat flags, bound to r.
func chatFlagSet(r *runConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("agentctl chat", flag.ContinueOnError)
	fs.StringVar(&r.agent, "agent", "", "`name` of the agent to talk to (default: the thread's agent, else the server's default agent)")
	fs.StringVar(&r.thread, "thread", "", "`id` of the thread to continue (default: a new one)")
	fs.BoolVar(&r.json, "json", false, "print every event as one JSON line (NDJSON) and ask nothing: an approval parks the run, which ends the chat (unless --auto-approve lets the server approve it)")
	fs.BoolVar(&r.autoApprove, "auto-approve", false, "run each turn with APPROVAL_POLICY_AUTO_APPROVE")
	fs.StringVar(&r.save, "save", "", "`file` to save a parked run in (default: "+defaultSave+")")
	return fs
}

// flagHelp renders a flag set's defaults.
func flagHelp(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

// parseCommand reads the command line: connection flags, the command, its flags (the
// connection flags again among them) and its arguments, in any order after the command.
// Connection flags not given take their AGENTCTL_<FLAG> variable.
func parseCommand(args []string, getenv func(string) string) (command, error) {
	var cmd command
	// Every flag set is made before any is parsed: making one sets its flags' defaults,
	// and the connection flags are shared.
	global := connFlagSet(&cmd.conn)
	agents := flag.NewFlagSet("agentctl agents", flag.ContinueOnError)
	agents.BoolVar(&cmd.agentsJSON, "json", false, "print the response as JSON")
	addConnFlags(agents, &cmd.conn)
	runFS := runFlagSet(&cmd.run)
	addConnFlags(runFS, &cmd.conn)
	attachFS := attachFlagSet(&cmd.attach)
	addConnFlags(attachFS, &cmd.conn)
	chatFS := chatFlagSet(&cmd.run)
	addConnFlags(chatFS, &cmd.conn)
	threadsFS := flag.NewFlagSet("agentctl threads", flag.ContinueOnError)
	threadsFS.BoolVar(&cmd.threads.json, "json", false, "print the response as JSON")
	addConnFlags(threadsFS, &cmd.conn)
	var load loadConfig
	loadFS := loadFlagSet(&load)
	addConnFlags(loadFS, &cmd.conn)
	for _, fs := range []*flag.FlagSet{global, agents, runFS, attachFS, chatFS, threadsFS, loadFS} {
		fs.SetOutput(io.Discard)
		fs.Usage = func() {}
	}

	if err := global.Parse(args); err != nil {
		return cmd, err
	}
	rest := global.Args()
	if len(rest) == 0 {
		return cmd, errors.New("no command: want " + commandNames)
	}
	cmd.name, rest = rest[0], rest[1:]
	var fs *flag.FlagSet
	switch cmd.name {
	case "agents":
		fs = agents
	case "run":
		fs = runFS
	case "attach":
		fs = attachFS
	case "chat":
		fs = chatFS
	case "threads":
		fs = threadsFS
	case "load":
		fs = loadFS
		cmd.load = &load
	case "help":
		return cmd, flag.ErrHelp
	default:
		return cmd, fmt.Errorf("unknown command %q: want %s", cmd.name, commandNames)
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return cmd, err
	}

	set := map[string]bool{}
	global.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	global.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "H" {
			return
		}
		name := "AGENTCTL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return cmd, err
	}
	cmd.conn.given = givenConnFlags(&cmd.conn, set)
	if !set["plaintext"] && getenv("AGENTCTL_PLAINTEXT") == "" {
		cmd.conn.plaintext = cmd.conn.plaintextByDefault()
	}
	if err := cmd.conn.check(); err != nil {
		return cmd, err
	}

	switch cmd.name {
	case "agents":
		if len(pos) > 0 {
			return cmd, fmt.Errorf("agents takes no arguments, got %q", pos)
		}
	case "run":
		cmd.run.prompt = strings.TrimSpace(strings.Join(pos, " "))
		if err := cmd.run.check(); err != nil {
			return cmd, err
		}
	case "attach":
		switch {
		case len(pos) != 1:
			return cmd, fmt.Errorf("attach takes one run id, as in: agentctl attach run_3mrar9q3b937x (got %q)", pos)
		case cmd.attach.after < 0:
			return cmd, errors.New("--after must not be negative")
		}
		cmd.attach.runID = pos[0]
	case "chat":
		if len(pos) > 0 {
			return cmd, fmt.Errorf("chat takes no arguments, got %q: type each turn at its prompt", pos)
		}
	case "threads":
		if err := cmd.threads.parse(pos); err != nil {
			return cmd, err
		}
	case "load":
		if len(pos) > 0 {
			return cmd, fmt.Errorf("load takes no arguments, got %q (the prompt is --input)", pos)
		}
		if err := load.check(); err != nil {
			return cmd, err
		}
	}
	return cmd, nil
}

// parseInterspersed parses fs from args, letting flags and positional arguments mix (Go's
// flag package stops at the first positional one); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c connConfig) check() error {
	var errs []error
	if c.addr == "" {
		errs = append(errs, errors.New("--addr must not be empty"))
	}
	if c.plaintext && (c.insecure || c.cacert != "" || c.cert != "" || c.key != "" || c.servername != "") {
		errs = append(errs, errors.New("--plaintext goes with none of the TLS flags (--insecure, --cacert, --cert, --key, --servername)"))
	}
	if (c.cert == "") != (c.key == "") {
		errs = append(errs, errors.New("--cert and --key go together: give both or neither"))
	}
	return errors.Join(errs...)
}

// commandNames lists the commands, for a usage error.
const commandNames = "agents, run, attach, chat, threads or load"

// parse reads the threads command's arguments: nothing or list, show ID, or delete ID.
func (t *threadsConfig) parse(pos []string) error {
	t.action = "list"
	if len(pos) > 0 {
		t.action = pos[0]
	}
	switch {
	case t.action == "list" && len(pos) <= 1:
	case (t.action == "show" || t.action == "delete") && len(pos) == 2:
		t.id = pos[1]
	case t.action == "show" || t.action == "delete":
		return fmt.Errorf("threads %s takes one thread id, as in: agentctl threads %s thread_3mrar9q3b937x", t.action, t.action)
	default:
		return fmt.Errorf("threads %q: want threads, threads show ID or threads delete ID", pos)
	}
	return nil
}

func (r runConfig) check() error {
	switch {
	case r.resume == "" && r.prompt == "":
		return errors.New("run needs a prompt, as in: agentctl run \"what is 12*7?\" (or --resume FILE)")
	case r.resume != "" && r.prompt != "":
		return errors.New("--resume takes no prompt: a resumed run continues where it parked")
	case r.resume == "" && (r.approve || r.denySet):
		return errors.New("--approve and --deny decide a parked run's approvals: use them with --resume (in a live run, answer at the prompt, or use --auto-approve)")
	case r.approve && r.denySet:
		return errors.New("--approve and --deny exclude each other")
	case r.resume != "" && r.history != 0:
		return errors.New("--resume takes no --history: a resumed run keeps the history of the run it resumes")
	case r.resume != "" && r.outputSchema != "":
		return errors.New("--resume takes no --output-schema: a resumed run keeps the settings of the run it resumes")
	}
	if r.outputSchema != "" {
		if _, err := r.schema(); err != nil {
			return err
		}
	}
	return nil
}

// schema is --output-schema as RunConfig.output_schema; nil when it is not given.
func (r runConfig) schema() (*structpb.Struct, error) {
	if r.outputSchema == "" {
		return nil, nil
	}
	var s structpb.Struct
	if err := protojson.Unmarshal([]byte(r.outputSchema), &s); err != nil {
		return nil, fmt.Errorf("--output-schema: want a JSON Schema, a JSON object: %v", err)
	}
	return &s, nil
}
