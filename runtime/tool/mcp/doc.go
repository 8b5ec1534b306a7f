// Package mcp offers the tools of MCP (Model Context Protocol) servers as agentd tools,
// with the official SDK, github.com/modelcontextprotocol/go-sdk.
//
// A server is named in the operator's config by a [ServerConfig]: a command that speaks
// MCP over its standard input and output (stdio), or the URL of a streamable HTTP
// endpoint. Only that config starts a process or reaches a host; nothing a client sends
// can. [Connect] starts or reaches the server and lists its tools; [Source.Close] ends
// the session and stops the process.
//
//	src, err := mcp.Connect(ctx, mcp.ServerConfig{
//		Name:    "fs",
//		Command: "mcp-server-filesystem",
//		Args:    []string{"/srv/data"},
//		Timeout: 30 * time.Second,
//	}, mcp.WithReservedNames("current_time", "calculate", "save_note"))
//	if err != nil { ... }
//	defer src.Close()
//	agent, err := runtime.New(runtime.Config{Model: model, Tools: src.Tools(), Policy: src.Policy()})
//
// # Tools and names
//
// [Source.Tools] is a snapshot of the tools the server last listed. The source lists
// them again when the server sends notifications/tools/list_changed, and after every
// reconnection; [Source.OnToolsChanged] says when the list changed, so that the caller
// can build its agent again. A tool keeps its MCP name unless that name clashes with
// another source's tool or a reserved name ([WithReservedNames]); then it is exposed as
// "<server>__<tool>". [Merge] names the tools of several sources together; [Origin]
// tells which server and MCP tool an exposed tool is.
//
// # Policy
//
// [Source.Policy] derives approvals from the servers' tool annotations: a tool runs
// without asking only when it is marked read-only and not destructive; any other tool
// asks. ServerConfig.Approval replaces the rule for a whole server, and an agent's own
// policy entry for a tool should win over the derived one.
//
// # Calls and results
//
// A call sends the call's arguments as they are and waits at most ServerConfig.Timeout.
// Text content becomes the output's text, structured content its JSON, and images,
// audio and binary resources [runtime.Media] parts with their MIME types; a result the
// server marks as an error is an error output. A call that gets no result (no session,
// a broken session, a protocol error, the timeout) returns a Go error, which the runtime
// turns into an error result for the model.
//
// # Restarts
//
// When a session ends without [Source.Close] (a stdio server's process exited, an HTTP
// server forgot the session), the source reconnects, starting a new process for a stdio
// server, after 250ms, then after twice as long each time up to 30s ([WithBackoff]);
// calls made meanwhile fail with an error wrapping [ErrUnavailable], and [Source.Err]
// says why. A server process inherits only a few harmless variables of agentd's
// environment (see ServerConfig.Env); its standard error is logged at debug level, and
// its last line explains an exit.
//
// All types are safe for concurrent use.
package mcp
