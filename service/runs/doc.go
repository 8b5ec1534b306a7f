// Package runs is agentd's run engine, apart from the streams that carry it. Package
// service is its wire: it checks each request at the door, calls a [Manager], and maps
// the Manager's errors ([Error]) to gRPC statuses in one place. Nothing here makes a
// gRPC status.
//
// A run belongs to the Manager, not to the stream that started it. [Manager.Start]
// checks a start and says what it came to ([Started]): a new run, a resume of a
// continuation that a run resumed already, or a thread's active run steered into.
// [Manager.Serve] serves that on a stream, [Manager.Execute] runs it to its end for a
// unary caller, and [Manager.AttachStream] attaches any stream its owner opens, from a
// cursor. Every event is journaled (package journal) in the [Config.Store] before or as
// it is sent; a run whose client went away parks there, sealed in a continuation
// (package service/continuation), and wakes when a client can answer it. With a store
// other replicas share, each run is held under a fenced lease, and runs whose replica
// died are taken up by another ([Manager.RecoverRuns]).
//
// Where things are:
//   - manager.go: the Manager, its settings' defaults, drain and shutdown;
//   - session.go, start.go: a run, and how a start becomes one (its checked plan);
//   - serve.go, execute.go, attach.go: serving a run on a stream, attaching to one,
//     SendRunInput;
//   - emit.go: the run's events, from the loop to the journal;
//   - input.go, await.go, grants.go: client messages, approvals and client tools, and
//     approval grants;
//   - park.go, parklimits.go, keepalive.go: parking, waking and their bounds;
//   - runs.go, follow.go, recover.go, fleet.go, relay.go: runs in the store, followed,
//     recovered, leased and relayed between replicas;
//   - threads.go: server-kept threads;
//   - errors.go, reasons.go: the engine's errors and their stable reasons.
package runs
