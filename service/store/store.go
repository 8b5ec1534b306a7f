// Package store keeps what agentd's runs leave behind their streams: each run's record
// and journal, the inputs clients sent it, and the threads (conversations) the server
// keeps, with the approvals granted on them. The service is its only user; what it
// stores it encodes itself (protobuf bytes), and a store keeps those bytes as they are.
//
// Three stores implement [Store]: [memory] (the default, bounded, gone with the
// process), sqlite (one replica, across restarts) and postgres (what a fleet shares).
// storetest is the conformance suite each passes.
//
// Every method is safe for concurrent use. Every method takes a context and returns
// its error when the context ends first; errors of the kinds below are comparable with
// errors.Is.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNotFound: no run, thread, input or grant of that id.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: a run, thread or grant of that id exists already.
	ErrExists = errors.New("store: already exists")
	// ErrSeq: appended events do not follow the run's last seq.
	ErrSeq = errors.New("store: events out of sequence")
	// ErrExpired: events below what the store still keeps for a run.
	ErrExpired = errors.New("store: events expired")
	// ErrFinished: the run has finished, and changes no more.
	ErrFinished = errors.New("store: the run has finished")
	// ErrFenced: a write under a lease the run's holder no longer has: another replica
	// claimed the run since (a higher epoch), or it was released. Nothing was written.
	ErrFenced = errors.New("store: the run's lease was lost")
	// ErrHeld: Claim of a run another replica holds, its lease still running.
	ErrHeld = errors.New("store: another replica holds the run")
)

// FencedError is AppendEvents' error when some of its batches were written under a
// lost lease: it names their runs, and nothing of any batch was written. It is ErrFenced
// for errors.Is.
type FencedError struct {
	RunIDs []string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("store: the lease of runs %v was lost", e.RunIDs)
}

func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// ThreadBusyError is CreateRun's error for a run on a thread that has an active run.
type ThreadBusyError struct {
	// RunID is the thread's active run.
	RunID string
}

func (e *ThreadBusyError) Error() string {
	return fmt.Sprintf("store: the thread has an active run, %s", e.RunID)
}

// InputPrefix prefixes, in what Watch reports, the id of a run given an input.
const InputPrefix = "+"

// Status is where a run stands.
type Status uint8

const (
	// Running: the run's loop is going, in this process or another.
	Running Status = iota + 1
	// Parked: the run waits for a client with no loop going; its Checkpoint holds what
	// resuming it needs.
	Parked
	// Finished: the run has ended; its journal ends with run_finished.
	Finished
)

func (s Status) String() string {
	switch s {
	case Running:
		return "running"
	case Parked:
		return "parked"
	case Finished:
		return "finished"
	}
	return fmt.Sprintf("Status(%d)", s)
}

// Lease is a replica's hold on a run: at most one replica holds a run at a time, and
// every write to it is fenced on the lease's epoch, which each Claim raises. Leases
// are timed by the store's clock (the database's, for a shared store), never a
// replica's.
type Lease struct {
	RunID string
	// Holder names the replica; Epoch is the run's epoch when it claimed it.
	Holder string
	Epoch  int64
}

// Run is a run's record.
type Run struct {
	ID string
	// ThreadID is the run's thread; Exclusive runs hold it (one active at a time).
	ThreadID string
	// Exclusive marks a run that keeps its thread: at most one unfinished Exclusive
	// run per thread.
	Exclusive bool
	// Owner is the identity that started the run; empty for an anonymous one.
	Owner     string
	Agent     string
	RequestID string
	Status    Status
	// Spec is the start the run was made from, and Checkpoint what resuming it needs,
	// as the service encodes them; Checkpoint is nil until the run's first checkpoint.
	Spec, Checkpoint []byte
	// LastSeq is the seq of the run's last journaled event, 0 before the first.
	LastSeq int64
	// CreatedAt is set by CreateRun; FinishedAt when the status becomes Finished.
	CreatedAt, FinishedAt time.Time
	// Holder is the replica that holds the run, "" when none does; Epoch counts the
	// claims of the run (1 once created); LeaseUntil is when Holder's lease ends, by the
	// store's clock. A Finished run is held by none.
	Holder     string
	Epoch      int64
	LeaseUntil time.Time
	// WakeAt is, for a Parked run, when a replica must take it up even with no input
	// for it (an approval expires, the park times out); zero for never.
	WakeAt time.Time
	// ParentRunID, ParentCallID and RootRunID place a child run in its tree: the run
	// whose tool call ParentCallID started it, and the tree's root. Depth counts the
	// runs above it: 0 for a root, whose three ids are empty, 1 for a root's child.
	// CreateRun records them; they never change.
	ParentRunID, ParentCallID, RootRunID string
	Depth                                int
}

// Update is what UpdateRun changes of a run it holds.
type Update struct {
	Status Status
	// Checkpoint replaces the run's checkpoint unless nil.
	Checkpoint []byte
	// Release lets go of the lease, so that any replica may claim the run at once (a
	// run that parks, or one handed over by a replica that drains). Finished always
	// releases.
	Release bool
	// WakeAt sets Run.WakeAt (zero clears it).
	WakeAt time.Time
}

// Events is a batch of one run's journal: frames with seqs First, First+1, …, written
// under Lease (Lease.RunID is the run).
type Events struct {
	Lease  Lease
	First  int64
	Frames [][]byte
}

// Input is a client input kept under its run and key, so that a retry is answered
// with the first one's answer.
type Input struct {
	RunID, Key string
	// Digest tells a retry (the same input again) from a reuse of its key.
	Digest []byte
	// Request is the input, as the service encodes it: what the run's holder acts on
	// when another replica took it; empty once the input is answered.
	Request []byte
	// Order is set by PutInput: inputs of a run in the order they came.
	Order int64
	// Answer is what the service answered, as it encodes it; nil until answered.
	Answer []byte
}

// Replica is a replica of a fleet, as it said it was in its last Heartbeat.
type Replica struct {
	ID string
	// StartedAt is when the replica started, by its own clock.
	StartedAt time.Time
	// Draining says the replica is shutting down: it takes no run up.
	Draining bool
}

// Thread is a conversation the server keeps.
type Thread struct {
	ID    string
	Owner string
	Agent string
	// Messages is how many messages the thread holds; the first has index 0.
	Messages int64
	// Bytes is the size of the thread's messages.
	Bytes                int64
	CreatedAt, UpdatedAt time.Time
	// ActiveRunID is the thread's unfinished Exclusive run, if any (Get only).
	ActiveRunID string
}

// Message is one of a thread's messages, as the service encodes it.
type Message struct {
	Index int64
	RunID string
	Data  []byte
}

// Grant is an approval that reaches past its call: later calls of Tool on the thread
// ThreadID are approved without asking while it is kept.
type Grant struct {
	ID, ThreadID string
	// Agent is the agent whose policy allowed the grant: it approves that agent's calls alone.
	Agent string
	Tool  string
	// ArgumentsHash is the SHA-256 of the approved arguments' bytes; nil approves any arguments.
	ArgumentsHash []byte
	// Arguments are the approved arguments, for people to read ("" with any arguments).
	Arguments string
	// RunID and ApprovalID are the run and the approval whose decision made it.
	RunID, ApprovalID string
	CreatedAt         time.Time // set by PutGrant
}

// Store is where agentd keeps runs, journals, inputs, threads and their grants.
//
// Writes to a run (its events, its status and checkpoint, its thread's messages) are
// made under a Lease and refused with ErrFenced once the lease is lost: a replica that
// paused past its lease, or was cut off, can add nothing after another claimed the run.
type Store interface {
	// CreateRun records a new run, Running, held by r.Holder at epoch 1 for lease (by
	// the store's clock); r.Holder must be set. A run of an id that exists gets
	// ErrExists; an Exclusive run on a thread with an unfinished Exclusive run gets a
	// *ThreadBusyError naming it.
	CreateRun(ctx context.Context, r Run, lease time.Duration) error
	// GetRun returns the run of id, or ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// UpdateRun changes a run l holds (else ErrFenced): its status, its checkpoint, its
	// lease. Finished sets FinishedAt, releases the run and frees its thread. A
	// Finished run changes no more: UpdateRun returns ErrFinished, AppendEvents too.
	UpdateRun(ctx context.Context, l Lease, u Update) error
	// UnfinishedRuns returns the runs not Finished, oldest first: what a process that
	// starts finds left over by the one before it.
	UnfinishedRuns(ctx context.Context) ([]Run, error)
	// ChildRuns returns the runs whose ParentRunID is parentID, oldest first (none for
	// a run without children, or an unknown one).
	ChildRuns(ctx context.Context, parentID string) ([]Run, error)

	// Claim makes holder the holder of an unfinished run for lease, raising its epoch,
	// and returns the run as it now is. It takes a run no replica holds, one whose
	// lease ran out, and one holder holds already; any other gets ErrHeld, unless force
	// (a store only one process uses, taking up what the process before it left). A
	// finished run gets ErrFinished, an unknown one ErrNotFound. Of replicas claiming
	// a run at once, one wins.
	Claim(ctx context.Context, id, holder string, lease time.Duration, force bool) (Run, error)
	// Renew extends by lease the leases of held that their holder still has, in one
	// round trip, and returns the ids of those it no longer has (claimed by another,
	// released, or finished).
	Renew(ctx context.Context, held []Lease, lease time.Duration) (lost []string, err error)
	// Claimable returns up to limit unfinished runs that need a holder and have none:
	// Running runs whose lease ran out or was released, and Parked runs whose WakeAt has
	// come or that have an unanswered input; those waiting longest first.
	Claimable(ctx context.Context, limit int) ([]Run, error)
	// ClaimNext claims for holder, for lease, up to limit of the runs Claimable would
	// return, in one go, and returns them claimed, those waiting longest first, each
	// with its epoch raised; a Parked run whose WakeAt has come (and that has no
	// unanswered input) only once it has been due for wakeAfter, so that replicas may
	// leave such runs to others for a moment. A run that another ClaimNext or Claim is
	// taking at that moment is passed over rather than waited for, so that replicas
	// claiming at once share the runs instead of racing for each.
	ClaimNext(ctx context.Context, holder string, lease time.Duration, limit int, wakeAfter time.Duration) ([]Run, error)

	// Heartbeat records that replica r is alive now, as it says it is, and returns the
	// replicas alive: those whose last Heartbeat came within alive (r included),
	// oldest first. Replicas learn of each other this way alone.
	Heartbeat(ctx context.Context, r Replica, alive time.Duration) ([]Replica, error)

	// AppendEvents journals batches of events, of one run or several, all or none:
	// each batch must follow its run's LastSeq (else ErrSeq) and be written under a
	// lease its holder has (else a *FencedError naming every such run); either way
	// nothing is written.
	AppendEvents(ctx context.Context, batches []Events) error
	// ReadEvents returns up to limit frames of run id after seq after, in order: fewer
	// at the journal's end, none past it. after below what the store keeps gets
	// ErrExpired; an unknown run ErrNotFound.
	ReadEvents(ctx context.Context, id string, after int64, limit int) ([][]byte, error)
	// ReadNewEvents is ReadEvents for many runs at once: for each run of after (its id,
	// and the seq to read after) it returns up to limit of its frames after that seq, in
	// order, so that a replica following many runs reads what they added in one go. A
	// run with no frames after its seq, an unknown run, and one whose seq is below what
	// the store keeps are left out.
	ReadNewEvents(ctx context.Context, after map[string]int64, limit int) (map[string][][]byte, error)
	// EventBounds returns the oldest seq the store keeps of a run's journal and its
	// last (oldest is last+1 when it keeps none).
	EventBounds(ctx context.Context, id string) (oldest, last int64, err error)

	// PutInput keeps in unless an input of its run and key exists: then it returns that
	// one and false. The run must exist (else ErrNotFound). A kept input gets the next
	// Order of its run.
	PutInput(ctx context.Context, in Input) (Input, bool, error)
	// AnswerInput records the answer to the input of run and key, and lets go of its
	// Request: an answered input is kept for its retries, which need only its Digest
	// and Answer.
	AnswerInput(ctx context.Context, runID, key string, answer []byte) error
	// GetInput returns the input of run and key, or ErrNotFound.
	GetInput(ctx context.Context, runID, key string) (Input, error)
	// PendingInputs returns the unanswered inputs of the runs ids, each run's in Order.
	PendingInputs(ctx context.Context, ids []string) ([]Input, error)

	// CreateThread records a new thread; one of an id that exists gets ErrExists.
	CreateThread(ctx context.Context, t Thread) error
	// GetThread returns the thread of id, with its active run, or ErrNotFound.
	GetThread(ctx context.Context, id string) (Thread, error)
	// ListThreads returns up to limit of owner's threads, most recently updated first,
	// starting after the thread of id after ("" for the first page).
	ListThreads(ctx context.Context, owner string, after string, limit int) ([]Thread, error)
	// DeleteThread removes a thread, its messages and its grants; its runs stay until
	// retention removes them.
	DeleteThread(ctx context.Context, id string) error
	// AppendMessages adds messages to the end of a thread, in order, for the run l
	// holds (else ErrFenced, and nothing is added). A run's messages are added once:
	// when the thread's last message is the run's already, it adds nothing and returns
	// nil (a replica that takes up a run whose end was journaled, but not recorded,
	// adds them again).
	AppendMessages(ctx context.Context, threadID string, l Lease, msgs [][]byte) error
	// ThreadMessages returns up to limit of a thread's messages from index from on.
	ThreadMessages(ctx context.Context, threadID string, from int64, limit int) ([]Message, error)

	// PutGrant keeps a grant on its thread, which must exist (else ErrNotFound); a grant
	// of an id that exists gets ErrExists.
	PutGrant(ctx context.Context, g Grant) error
	// Grants returns a thread's grants, oldest first (none for an unknown thread).
	Grants(ctx context.Context, threadID string) ([]Grant, error)
	// RevokeGrant removes the grant id of a thread; ErrNotFound when the thread has none of that id.
	RevokeGrant(ctx context.Context, threadID, id string) error

	// Sweep removes what retention no longer keeps: the runs finished before
	// finishedBefore (record, journal and inputs) and the threads not updated since
	// idleBefore (messages and grants). A child run stays as long as its root does not
	// qualify (unfinished, or finished since finishedBefore), so that a tree is kept
	// whole while any of it may be read. It returns how many runs and threads it
	// removed.
	Sweep(ctx context.Context, finishedBefore, idleBefore time.Time) (runs, threads int, err error)

	// Watch calls f with the ids of runs that changed (events appended, an input put
	// or answered, the run updated, claimed or released), by this process or, for a
	// shared store, any other, until ctx ends. f(nil) means any run may have changed
	// (the store lost track for a while: after a reconnect, say); a caller polls behind
	// it all the same, for a change f never hears of. A wake-up, not a transport: it
	// carries no data, and a shared store sends at most one notification per commit.
	// The id of a run given an input (PutInput) comes prefixed with InputPrefix: the
	// run's holder looks for it then, and not at every change. f must not block.
	Watch(ctx context.Context, f func(ids []string))

	// Close releases the store.
	Close() error
}

// ReadEach is ReadNewEvents for a store whose reads cost no round trip (in process):
// read, its ReadEvents, for each run of after, in turn.
func ReadEach(ctx context.Context, after map[string]int64, limit int, read func(ctx context.Context, id string, after int64, limit int) ([][]byte, error)) (map[string][][]byte, error) {
	out := map[string][][]byte{}
	for id, seq := range after {
		fs, err := read(ctx, id, seq, limit)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrExpired):
		case err != nil:
			return nil, err
		case len(fs) > 0:
			out[id] = fs
		}
	}
	return out, nil
}
