package runs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/ids"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// attach attaches a stream to the run of id from after_seq on: its outbox sends the
// attached event, then the journal's frames after after. For a live run the event and
// the cursor are taken under the session's lock, where events are journaled: nothing
// falls between what attached says and what follows it. A run the server does not run
// (finished, or going on elsewhere) is read from the store. ss is the live run's
// session, nil for the other kind.
func (s *Manager) attach(ctx context.Context, id string, after int64, send func(journal.Frame) error) (ss *session, o *journal.Outbox, err error) {
	if id == "" {
		return nil, nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "run_id", Description: "must be set"}})
	}
	if after < 0 {
		return nil, nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "after_seq", Description: "must not be negative"}})
	}
	caller := s.identity(ctx)
	if caller != "" && !s.attachers.add(caller, 1, s.cfg.MaxAttachmentsPerCaller) {
		return nil, nil, tooManyAttachments(fmt.Sprintf("caller %s has %d streams attached to runs, as many as the server allows one caller: attach once one of them ends", caller, s.cfg.MaxAttachmentsPerCaller), s.cfg.MaxAttachmentsPerCaller)
	}
	defer func() {
		if err != nil {
			s.attachers.sub(caller, 1)
		} else {
			o.Release = func() { s.attachers.sub(caller, 1) }
		}
	}()
	ref, err := s.lookup(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	oldest, _, err := s.store.EventBounds(ctx, id)
	if err != nil {
		return nil, nil, storeStatus(err)
	}
	if ss = ref.ss; ss == nil {
		if err := checkCursor(after, oldest, ref.rec.LastSeq); err != nil {
			return nil, nil, err
		}
		id := ids.New("att")
		ev := s.storedAttached(ctx, ref.rec, oldest)
		ev.GetAttached().AttachmentId = id
		f, err := journal.MarshalFrame(ev)
		if err != nil {
			return nil, nil, statusError(Internal, reasonInternal, "marshaling attached: "+err.Error(), nil)
		}
		o := journal.NewOutbox(ctx, s.storedJournal(ref.rec), after, []journal.Frame{f}, send, func(error) {})
		o.ID = id
		o.StartHeartbeats(s.cfg.HeartbeatInterval, ref.rec.ID, s.now)
		return nil, o, nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if stored := ss.journal.Stored(); stored == 0 {
		oldest = 1 // nothing is in the store yet: memory has it all
	}
	if err := checkCursor(after, oldest, ss.seq); err != nil {
		return nil, nil, err
	}
	o, err = ss.attachLocked(ctx, after, oldest, send)
	if err != nil {
		return nil, nil, err
	}
	return ss, o, nil
}

// attachLocked attaches a stream to a live run after seq after: its outbox sends the
// attached event first, with the stream's attachment_id.
func (ss *session) attachLocked(ctx context.Context, after, oldest int64, send func(journal.Frame) error) (*journal.Outbox, error) {
	if limit := ss.srv.cfg.MaxAttachmentsPerRun; len(ss.outs) >= limit {
		return nil, tooManyAttachments(fmt.Sprintf("run %s has %d streams attached, as many as the server allows a run: attach once one of them ends", ss.runID, limit), limit)
	}
	id := ids.New("att")
	ev := ss.attachedLocked(oldest)
	ev.GetAttached().AttachmentId = id
	f, err := journal.MarshalFrame(ev)
	if err != nil {
		return nil, statusError(Internal, reasonInternal, "marshaling attached: "+err.Error(), nil)
	}
	o := journal.NewOutbox(ctx, ss.journal, after, []journal.Frame{f}, send, func(error) {})
	o.ID = id
	o.StartHeartbeats(ss.srv.cfg.HeartbeatInterval, ss.runID, ss.srv.now)
	ss.outs[o] = struct{}{}
	return o, nil
}

// tooManyAttachments refuses an attach past a limit.
func tooManyAttachments(msg string, limit int) error {
	return statusError(ResourceExhausted, reasonTooManyAttachments, msg, map[string]string{"limit": strconv.Itoa(limit)})
}

// checkCursor refuses an after_seq past a run's last event or below its oldest kept.
func checkCursor(after, oldest, last int64) error {
	switch {
	case after > last:
		return statusError(OutOfRange, reasonCursorAhead,
			fmt.Sprintf("after_seq %d is past the run's last event, seq %d", after, last),
			map[string]string{"last_seq": strconv.FormatInt(last, 10)})
	case after+1 < oldest:
		return expiredStatus(oldest)
	}
	return nil
}

// MaxClientKey bounds SendRunInput's client_key.
const MaxClientKey = 128

// maxKeyedInputs bounds the client keys a run remembers; the oldest go first.
const maxKeyedInputs = 4096

// keyedInputs are SendRunInput's inputs of one run, by client_key, so that a retry is
// answered with the first one's ack. Guarded by session.mu.
type keyedInputs struct {
	byKey map[string]*keyedInput
	order []string
}

type keyedInput struct {
	digest [sha256.Size]byte // of the request's input, to tell a retry from a reuse
	ack    *agentdv1.InputAck
	seq    int64
	done   chan struct{} // closed once acked
}

// begin returns the input of key, and whether it is new (the caller acts on it).
func (k *keyedInputs) begin(key string, digest [sha256.Size]byte) (*keyedInput, bool) {
	if ki := k.byKey[key]; ki != nil {
		return ki, false
	}
	if k.byKey == nil {
		k.byKey = map[string]*keyedInput{}
	}
	if len(k.order) >= maxKeyedInputs {
		delete(k.byKey, k.order[0])
		k.order = k.order[1:]
	}
	ki := &keyedInput{digest: digest, done: make(chan struct{})}
	k.byKey[key] = ki
	k.order = append(k.order, key)
	return ki, true
}

// answered records the ack of key's input.
func (k *keyedInputs) answered(key string, ack *agentdv1.InputAck, seq int64) {
	if ki := k.byKey[key]; ki != nil && ki.ack == nil {
		ki.ack, ki.seq = ack, seq
		close(ki.done)
	}
}

// orphan lets go of the inputs that wait for an ack the run will never journal here (it
// left this server): their waiters learn that it moved (inputHere), and take them to
// where it goes on.
func (k *keyedInputs) orphan() {
	for key, ki := range k.byKey {
		if ki.ack == nil {
			delete(k.byKey, key)
			close(ki.done)
		}
	}
}

// SendInput acts on one input for a run, for SendRunInput: it is stored before the run
// acts on it, and its answer after, under the client's key, so that a retry, on any
// replica, gets the same answer.
func (s *Manager) SendInput(ctx context.Context, runID, key string, req *agentdv1.RunRequest) (*agentdv1.SendRunInputResponse, error) {
	ref, err := s.lookup(ctx, runID)
	if err != nil {
		return nil, err
	}
	if st := req.GetSteer(); st != nil {
		// A steer larger than a run's whole queue is refused before it is stored: kept,
		// a flood of them would hold the store past its bounds, only to be refused.
		if n, limit := steerBytes(st), s.cfg.MaxQueuedSteerBytes; n > limit {
			return &agentdv1.SendRunInputResponse{Ack: &agentdv1.InputAck{ClientKey: key,
				Error: ackError(reasonSteerQueueFull, "the steer holds %d bytes, more than the %d this server holds for a run's steers", n, limit)}}, nil
		}
		// So is one past the run's steer rate, which the run would refuse as it came.
		if ss := ref.ss; ss != nil && ss.steerLimit.Tokens() < 1 {
			return &agentdv1.SendRunInputResponse{Ack: &agentdv1.InputAck{ClientKey: key,
				Error: ackError(reasonSteerRateLimited, "too many steers: at most %g a second (burst %d)", float64(ss.steerLimit.Limit()), ss.steerLimit.Burst())}}, nil
		}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, statusError(Internal, reasonInternal, "marshaling the input: "+err.Error(), nil)
	}
	digest := sha256.Sum256(b)
	release, err := s.holdInput(runID, len(b), s.cfg.MaxRunInputBytes)
	if err != nil {
		return nil, err
	}
	defer release()
	// The input is stored before it is acted on, and its answer after: a retry finds
	// the answer however long after, the run finished or not.
	kept, created, err := s.store.PutInput(ctx, store.Input{RunID: runID, Key: key, Digest: digest[:], Request: b})
	if err != nil {
		return nil, storeStatus(err)
	}
	if !created {
		if !bytes.Equal(kept.Digest, digest[:]) {
			return nil, keyReused()
		}
		if kept.Answer != nil {
			return decodeAnswer(kept.Answer)
		}
	}
	ss := ref.ss
	if ss == nil {
		switch {
		case ref.rec.Status == store.Finished:
			return nil, finishedStatus(ref.rec.ID)
		case s.shared, ref.rec.Status == store.Parked:
			// A run parked with no session here (a store of this process alone: one this
			// server let go) is taken up as a replica sharing the store would take it:
			// else it stayed parked, refused as going on elsewhere, until a restart.
			return s.relay(ctx, ref.rec, key, digest, req)
		}
		return nil, statusError(Unavailable, reasonRunElsewhere, "the run is not going on on this server: send its input where it runs", map[string]string{"run_id": ref.rec.ID})
	}
	resp, err := s.inputHere(ctx, ss, key, digest, req)
	if isMoved(err) {
		// The run left this server, its session maybe still here a moment: the store's
		// record says where it goes on (a session's lookup carries none).
		rec, err := s.store.GetRun(ctx, runID)
		if err != nil {
			return nil, storeStatus(err)
		}
		return s.relay(ctx, rec, key, digest, req)
	}
	return resp, err
}

// holdInput counts n bytes of SendRunInput input for run until release: each input is
// stored whole until it is answered, and a run's unanswered ones may hold at most limit
// bytes on this server.
func (s *Manager) holdInput(run string, n, limit int) (release func(), err error) {
	if !s.inputs.add(run, n, limit) {
		return nil, statusError(ResourceExhausted, reasonTooManyInputs,
			fmt.Sprintf("run %s has %d bytes of input waiting to be acted on, and this one's %d would pass the %d this server holds for a run: send it again once those are answered", run, s.inputs.held(run), n, limit),
			map[string]string{"run_id": run, "limit": strconv.Itoa(limit)})
	}
	return func() { s.inputs.sub(run, n) }, nil
}

// steerBytes is what st counts against a run's steer bytes, as the run's inbox counts
// it: its text and media data.
func steerBytes(st *agentdv1.Steer) int {
	n := len(st.GetText())
	for _, p := range st.GetMessage().GetParts() {
		n += len(p.GetText()) + len(p.GetMedia().GetData())
	}
	return n
}

// keyReused refuses a client_key used for another input of the run.
func keyReused() error {
	return invalidArgument(reasonInputKeyReused, wire.FieldErrors{{Field: "client_key", Description: "this key was used for a different input of this run"}})
}

// finishedStatus refuses input for a finished run.
func finishedStatus(id string) error {
	return statusError(FailedPrecondition, reasonRunFinished, "the run has finished: it acts on nothing more", map[string]string{"run_id": id})
}

// takeKeyed acts on SendRunInput's input req of key, unless an input of that key came
// before: the same input gets the first one's answer, a different one is refused.
func (ss *session) takeKeyed(key string, digest [sha256.Size]byte, req *agentdv1.RunRequest) (*keyedInput, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ki := ss.keyed.byKey[key]; ki != nil {
		if ki.digest != digest {
			return nil, keyReused()
		}
		return ki, nil
	}
	if ss.phase == phaseEnded {
		return nil, finishedStatus(ss.runID)
	}
	ss.readyLocked()
	if ss.phase == phaseEnded {
		return nil, finishedStatus(ss.runID)
	}
	ki, _ := ss.keyed.begin(key, digest)
	in := input{key: key}
	ss.actLocked(in, req)
	if ki.ack == nil && ss.phase == phaseEnded {
		// The run finished while a decision was checked: nothing acked it.
		delete(ss.keyed.byKey, key)
		return nil, finishedStatus(ss.runID)
	}
	return ki, nil
}
