package runs

import (
	"context"
	"time"

	"github.com/agentd/agentd/service/store"
)

// Config configures the run engine. Zero values take the defaults named on each field.
type Config struct {
	// ContinuationKey signs continuations; every replica that may resume a run must share
	// it. Nil means a random key: parked runs then resume only on this process.
	ContinuationKey []byte
	// ContinuationTTL is how long a continuation stays valid; 0 means 24 hours.
	ContinuationTTL time.Duration
	// MaxConcurrentRuns bounds the runs in progress; past it new runs get
	// RESOURCE_EXHAUSTED. 0 means 1024.
	MaxConcurrentRuns int
	// MaxDepth bounds how deep runs nest: a sub-agent's call that would start a run
	// deeper gets an error result. 0 means DefaultMaxDepth (4).
	MaxDepth int
	// MaxChildren bounds the child runs one run's sub-agent calls start: a call past it
	// gets an error result. 0 means DefaultMaxChildren (32).
	MaxChildren int
	// MaxTreeTokens bounds the tokens (input and output) a tree of runs spends: a
	// sub-agent's call made once the root's and its ended descendants' usage, and its
	// caller's, reach it gets an error result instead of a child run. Runs that go on
	// are not stopped by it (a run's own budget hook does that). 0 turns it off.
	MaxTreeTokens int64
	// MaxClientTools bounds the client tools one run may declare; 0 means 64.
	MaxClientTools int
	// MaxClientSchemaBytes bounds the JSON Schemas of a run's client tools together, in
	// bytes of their JSON text: compiling a schema costs time in proportion to its size,
	// and every start compiles its client tools' schemas. Each schema is also bounded on
	// its own by the limits of runtime.CompileSchema. 0 means 256 KiB.
	MaxClientSchemaBytes int
	// MaxTranscriptBytes bounds the size of a start's transcript: its messages (as
	// encoded on the wire) and its input. A larger one is refused with INVALID_ARGUMENT
	// naming the limit. 0 means 2 MiB: more than the context window of most models, less
	// than gRPC's default 4 MiB message limit. A server that raises the message limit
	// (grpc.MaxRecvMsgSize) for long resumed transcripts raises this one too.
	MaxTranscriptBytes int
	// MaxRunsPerCaller bounds the runs in progress of one caller (see Caller), so that
	// one caller cannot take every slot of MaxConcurrentRuns; past it its new runs get
	// RESOURCE_EXHAUSTED. 0 means no limit per caller.
	MaxRunsPerCaller int
	// MaxAttachmentsPerRun bounds the streams attached to one run at once (AttachRun,
	// Run streams that attach, the one that started it), and MaxAttachmentsPerCaller
	// those of one caller, to any runs: each holds a goroutine and a cursor into the
	// journal. One past either is refused RESOURCE_EXHAUSTED (TOO_MANY_ATTACHMENTS). 0
	// means 64 a run and 256 a caller; an anonymous caller has no per-caller limit.
	MaxAttachmentsPerRun    int
	MaxAttachmentsPerCaller int
	// InputAnswerTimeout bounds how long a SendRunInput for a run another replica runs
	// waits for that replica's answer: past it the call ends UNAVAILABLE
	// (INPUT_UNANSWERED), the input stored for the run's holder, and a retry with the
	// same client_key gets its answer. 0 means 15 seconds.
	InputAnswerTimeout time.Duration
	// MaxRunInputBytes bounds the SendRunInput inputs of one run this server holds, as
	// sent, from when they come until they are answered (each is stored whole until
	// then): one past it is refused RESOURCE_EXHAUSTED (TOO_MANY_INPUTS) before it is
	// stored. A single input is never refused for it: the message size bounds that. 0
	// means 8 MiB.
	MaxRunInputBytes int
	// Caller names who makes an RPC, from its context: per-caller limits and per-caller
	// state (Request.Caller, which tools such as save_note keep notes apart by) key on
	// it. An empty name is anonymous: no per-caller limit applies to it. Nil means every
	// caller is anonymous.
	Caller func(ctx context.Context) string
	// Identity names who owns the runs an RPC starts, from its context: only that
	// identity may attach to them, send them input or resume their continuations, and a
	// run of an empty identity is anyone's who knows its id. Nil means Caller.
	Identity func(ctx context.Context) string
	// Store keeps runs, their journals and threads; nil means a memory store with its
	// default bounds (memory.New), gone with the process. The engine does not close it.
	Store store.Store
	// Replica names this process among those sharing Store: the holder of the leases on
	// the runs it runs. "" means the host name and a random suffix.
	Replica string
	// LeaseTTL is how long a run's lease lasts unless renewed (every third of it): with
	// a store several replicas share, how long a run of a replica that died waits
	// before another takes it up. 0 means 10 seconds.
	LeaseTTL time.Duration
	// RunRetention is how long a finished run, and its journal, is kept for the
	// clients that attach to it; 0 means 24 hours.
	RunRetention time.Duration
	// ThreadRetention is how long a thread nobody adds to is kept; 0 means 30 days.
	ThreadRetention time.Duration
	// ParkAfter is how long a run waits for an answer from the Run streams attached to
	// it (the one that started it, or others) before it parks in the store all the same,
	// with nothing of it running until the answer comes; 0 means 30 seconds, negative
	// never (it waits, live, as long as a stream that can answer is attached). With no
	// such stream attached it parks at once.
	ParkAfter time.Duration
	// ParkTimeout is how long a run parked in the store (its client gone, under
	// ON_DISCONNECT_CONTINUE) waits for the input it needs before it ends EXPIRED; 0
	// means 24 hours.
	ParkTimeout time.Duration
	// MaxParkedRuns and MaxParkedBytes bound the runs this server holds parked and the
	// bytes of their checkpoints, which stay in the store (in memory with a memory store)
	// for up to ParkTimeout; MaxParkedRunsPerCaller and MaxParkedBytesPerCaller bound one
	// caller's share of them (see Caller; an anonymous caller has none). A run that would
	// park past any of them ends AWAITING_INPUT instead, with the continuation its client
	// resumes it from, as a run whose client went away did before runs parked. 0 means
	// 4×MaxConcurrentRuns runs and 256 MiB, and a quarter of each per caller; negative
	// means no limit.
	MaxParkedRuns           int
	MaxParkedRunsPerCaller  int
	MaxParkedBytes          int64
	MaxParkedBytesPerCaller int64
	// ExactDeltas keeps every delta the model streams an event of its own, for a client
	// that is behind too. By default consecutive deltas of one block (text, reasoning, a
	// call's arguments) that no stream has taken yet merge into one event, in the journal
	// too: a client that keeps up sees every delta as it comes, one behind gets fewer,
	// larger ones, and the server marshals, stores and sends less. Delta boundaries carry
	// no meaning either way.
	ExactDeltas bool
	// StallTimeout bounds how long a stream's client may read nothing while agentd has
	// an event to send it (gRPC flow control holds the send): past it the stream is let
	// go (RESOURCE_EXHAUSTED, CLIENT_STALLED) and the run goes on, or, under
	// ON_DISCONNECT_CANCEL, the run ends FAILED (CLIENT_STALLED) with its transcript and
	// the RPC ends with that outcome. 0 means 2 minutes.
	StallTimeout time.Duration
	// SteerRate and SteerBurst bound a run's steers (a token bucket); 0 means 5 a second
	// with bursts of 10.
	SteerRate  float64
	SteerBurst int
	// MaxQueuedSteers and MaxQueuedSteerBytes bound the steers a run holds that it has
	// not applied yet (while it waits on an approval, say), across the stretches of a
	// run that parks and wakes; a steer past either is refused in its ack, naming the
	// limit. 0 means 16 steers and 1 MiB; more than 2 MiB is taken as 2 MiB, so that a
	// parked run's steers fit its continuation. A SendRunInput steer larger than
	// MaxQueuedSteerBytes is refused before it is stored.
	MaxQueuedSteers     int
	MaxQueuedSteerBytes int
	// MessageRate and MessageBurst bound every client message of a Run stream after
	// start, whatever its kind (pings included): a token bucket per stream. A message
	// past it is refused in its ack. 0 means 50 a second with bursts of 100.
	MessageRate  float64
	MessageBurst int
	// ApprovalTimeout is how long an approval waits under APPROVAL_POLICY_ASK when the
	// client names none; 0 means 10 minutes, or MaxApprovalTimeout if that is shorter.
	ApprovalTimeout time.Duration
	// MaxApprovalTimeout is the longest approval_timeout a client may ask for; a longer
	// one is refused with INVALID_ARGUMENT. 0 means 24 hours.
	MaxApprovalTimeout time.Duration
	// ClientToolTimeout is how long a client tool call waits for its result when the
	// client names none; 0 means 5 minutes, or MaxClientToolTimeout if that is shorter.
	ClientToolTimeout time.Duration
	// MaxClientToolTimeout is the longest timeout a client may give one of its tools; a
	// longer one is refused with INVALID_ARGUMENT. 0 means 1 hour.
	MaxClientToolTimeout time.Duration
	// HeartbeatInterval is the silence after which a stream gets a heartbeat; 0 means 15 s.
	HeartbeatInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}
