// Package journal holds a run's events as its streams read them: frames (each event
// marshaled once, sent as is by every stream), the journal of a run (the hot tail in
// memory, older frames from the store, deltas merged while nobody took them) and the
// outbox that carries a journal to one stream with backpressure. It knows nothing of
// the run engine or the runtime: the engine appends, the store keeps, streams read.
package journal

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service/store"
)

// A frame is one event as every stream carries it: the encoding of field 1 (event) of
// RunResponse, StartRunResponse and AttachRunResponse, which all hold the event there
// and nothing else. An event is marshaled once, into its frame, and every stream that
// carries it sends those bytes: a response holding a frame as its unknown fields
// marshals to the frame itself (SendFrame).
type Frame []byte

// eventField is the number of the event field of every response message that carries one.
const eventField protowire.Number = 1

// MarshalFrame marshals ev into its frame.
func MarshalFrame(ev *agentdv1.RunEvent) (Frame, error) {
	n := proto.Size(ev)
	b := make([]byte, 0, 1+protowire.SizeVarint(uint64(n))+n)
	b = protowire.AppendTag(b, eventField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, ev)
}

// EventOf decodes the event of a frame.
func EventOf(f Frame) (*agentdv1.RunEvent, error) {
	_, _, n := protowire.ConsumeTag(f)
	if n < 0 {
		return nil, errors.New("malformed Frame")
	}
	b, m := protowire.ConsumeBytes(f[n:])
	if m < 0 {
		return nil, errors.New("malformed Frame")
	}
	ev := &agentdv1.RunEvent{}
	return ev, proto.Unmarshal(b, ev)
}

// SendFrame sends f as one response M (RunResponse, StartRunResponse, AttachRunResponse)
// on a stream: the response carries the frame as its unknown fields, which marshal
// verbatim, so the event is not marshaled again.
func SendFrame[M any, PM interface {
	*M
	proto.Message
}](send func(PM) error, f Frame) error {
	var m M
	pm := PM(&m)
	pm.ProtoReflect().SetUnknown(protoreflect.RawFields(f))
	return send(pm)
}

// minJournalFrames is how many frames a journal keeps in memory whatever their size, so
// that the stream the run waits for (at most OutboxSize behind) reads from memory.
const minJournalFrames = 2 * OutboxSize

// hotJournalBytes is what a journal keeps in memory beyond minJournalFrames: older
// frames are read from the store, which has them all.
const hotJournalBytes = 8 << 10

// ErrEventsExpired is what reading a journal below what it and the store keep returns.
var ErrEventsExpired = errors.New("events expired")

// Older reads frames after seq after from the store, at most max of them: what a
// journal no longer keeps in memory.
type Older func(ctx context.Context, after int64, max int) ([]Frame, error)

// Journal is a run's events, in seq order, as frames, as the streams of the run read
// them: every numbered event is appended before any stream sends it, and each stream
// reads from its own cursor. The newest frames are in memory (hotJournalBytes, never
// fewer than minJournalFrames); the journal writer copies every frame to the store, and
// a reader whose cursor is below what memory keeps reads from there (older).
//
// With a store that keeps frames on disk (gated), readers see a frame only once it is
// in the store: every event a client saw is in the journal.
type Journal struct {
	mu      sync.Mutex
	frames  []Frame
	first   int64 // seq of frames[0]
	size    int   // bytes of frames
	closed  bool  // the run ended: nothing more is appended
	changed chan struct{}
	older   Older // nil when the store keeps nothing older
	gated   bool
	// poll, for a run going on elsewhere, asks for the frames its holder adds (follows:
	// they come by AddFetched) once the readers have read all the journal has; nil for
	// a run this server runs. Called with mu held.
	poll func(j *Journal)
	// lost, for a journal that follows its run from the store, is why its readers can
	// read no more here once they have read what it has: the store has not answered for
	// a lease (the engine's errStoreLost), so that they attach again, maybe where it answers.
	lost error
	// failed is why the store refused the run's frames; storedChanged is closed when
	// stored or failed change, made when someone waits for it.
	failed        error
	storedChanged chan struct{}

	// open is the last event, a delta not yet marshaled into a frame (seq last): no
	// reader has taken it yet, so the next delta of its block merges into it
	// (MergeDelta). Taking it seals it (sealLocked); the store takes it only sealed
	// (Unstored).
	open *openDelta

	// last is the seq of the last frame; stored, of the last frame in the store.
	last, stored atomic.Int64
}

// coalesceMax bounds the text of one merged delta: past it the next delta starts an
// event of its own, which counts toward how far a stream is behind (backpressure).
const coalesceMax = 1 << 10

// DeltaKind tells the kinds of delta apart: only deltas of one kind and block merge.
type DeltaKind uint8

const (
	TextDelta DeltaKind = iota + 1
	ReasoningDelta
	ArgsDelta
)

// DeltaOf returns what a delta event appends, and to what; ok is false for any other
// event. A child run's delta (child_event) appends to its run's block: its id is the
// child's run id and the block's, so that it merges with that child's next delta only.
func DeltaOf(ev *agentdv1.RunEvent) (kind DeltaKind, id, text string, ok bool) {
	if ce := ev.GetChildEvent(); ce != nil {
		kind, id, text, ok = DeltaOf(ce.GetEvent())
		return kind, ce.GetRunId() + "\x00" + id, text, ok
	}
	switch k := ev.GetKind().(type) {
	case *agentdv1.RunEvent_TextDelta:
		return TextDelta, k.TextDelta.GetMessageId(), k.TextDelta.GetDelta(), true
	case *agentdv1.RunEvent_ReasoningDelta:
		return ReasoningDelta, k.ReasoningDelta.GetMessageId(), k.ReasoningDelta.GetDelta(), true
	case *agentdv1.RunEvent_ToolCallArgsDelta:
		return ArgsDelta, k.ToolCallArgsDelta.GetToolCallId(), k.ToolCallArgsDelta.GetDelta(), true
	}
	return 0, "", "", false
}

// openDelta is a journal's last event while it is a delta nobody took: the deltas
// merged into it are in text (nil until a second one comes).
type openDelta struct {
	ev   *agentdv1.RunEvent
	kind DeltaKind
	id   string
	size int
	text []byte
}

// OpenDelta appends a delta event with the next seq, which the caller assigned, as the
// open tail: it is marshaled when first taken, with what merged into it by then.
func (j *Journal) OpenDelta(ev *agentdv1.RunEvent, kind DeltaKind, id, text string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sealLocked()
	j.open = &openDelta{ev: ev, kind: kind, id: id, size: len(text)}
	j.last.Add(1)
	if !j.gated {
		j.wakeLocked()
	}
}

// MergeDelta appends text to the open tail when it is a delta of the same kind and
// block, not taken yet and not full, and reports whether it did: the stream that will
// take it is behind, and gets one delta where the model made several. A stream that
// keeps up takes each delta before the next comes, and sees them all.
func (j *Journal) MergeDelta(kind DeltaKind, id, text string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	o := j.open
	if o == nil || o.kind != kind || o.id != id || o.size+len(text) > coalesceMax {
		return false
	}
	if o.text == nil {
		_, _, first, _ := DeltaOf(o.ev)
		o.text = make([]byte, 0, min(2*(len(first)+len(text)), coalesceMax))
		o.text = append(o.text, first...)
	}
	o.text = append(o.text, text...)
	o.size += len(text)
	return true
}

// setDelta sets the text of ev, a delta event (DeltaOf).
func setDelta(ev *agentdv1.RunEvent, merged string) {
	switch k := ev.GetKind().(type) {
	case *agentdv1.RunEvent_ChildEvent:
		setDelta(k.ChildEvent.GetEvent(), merged)
	case *agentdv1.RunEvent_TextDelta:
		k.TextDelta.Delta = merged
	case *agentdv1.RunEvent_ReasoningDelta:
		k.ReasoningDelta.Delta = merged
	case *agentdv1.RunEvent_ToolCallArgsDelta:
		k.ToolCallArgsDelta.Delta = merged
	}
}

// sealLocked marshals the open tail into the journal's last frame.
func (j *Journal) sealLocked() {
	o := j.open
	if o == nil {
		return
	}
	j.open = nil
	if o.text != nil {
		setDelta(o.ev, string(o.text))
	}
	f, err := MarshalFrame(o.ev)
	if err != nil {
		// Only text that is not UTF-8 fails, which sendLocked keeps out of merges.
		panic("agentd: marshaling a merged delta: " + err.Error())
	}
	j.frames = append(j.frames, f)
	j.size += len(f)
	j.trimLocked()
}

// New returns an empty journal. older reads what it no longer keeps in memory (nil: the
// store keeps nothing older); with gated, readers see a frame only once it is in the store.
func New(older Older, gated bool) *Journal {
	return &Journal{first: 1, changed: make(chan struct{}), older: older, gated: gated}
}

// FromStore returns the journal of a run taken up from the store: its frames up to seq
// last are all in the store, none in memory.
func FromStore(older Older, gated bool, last int64) *Journal {
	j := New(older, gated)
	j.first = last + 1
	j.last.Store(last)
	j.stored.Store(last)
	return j
}

// Followed returns the journal of a run this server does not run, read from the store
// (older) up to last, its end when finished; poll asks for the frames its holder adds.
func Followed(older Older, last int64, finished bool, poll func(*Journal)) *Journal {
	j := FromStore(older, false, last)
	j.closed = finished
	if !finished {
		j.poll = poll
	}
	return j
}

// Append adds the frame of the event with the next seq, which the caller assigned.
func (j *Journal) Append(f Frame) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sealLocked()
	j.frames = append(j.frames, f)
	j.size += len(f)
	j.trimLocked()
	j.last.Add(1)
	if !j.gated {
		j.wakeLocked()
	}
}

// trimLocked lets go of the oldest frames the store has, past what memory keeps.
func (j *Journal) trimLocked() {
	for j.size > hotJournalBytes && len(j.frames) > minJournalFrames && j.first <= j.stored.Load() {
		j.size -= len(j.frames[0])
		j.frames[0] = nil
		j.frames = j.frames[1:]
		j.first++
	}
}

// Unstored returns the frames not yet in the store, and the seq of the first. The open
// tail is left out, so that the next deltas of its block still merge into it until a
// stream takes it: the store taking each delta as it comes would keep a client that is
// behind from ever getting them merged when the model streams at a provider's pace.
// The store gets the tail once it is sealed and the writer is next marked: by the next
// event, or by seal for someone who waits for the store (storedThrough); a tail a reader
// sealed waits for either, kept in memory (trimLocked keeps what is not stored). A gated
// journal, whose readers wait for the store, gives it the tail at once.
func (j *Journal) Unstored() (first int64, frames []Frame) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.gated {
		j.sealLocked()
	}
	first = j.stored.Load() + 1
	return first, slices.Clone(j.frames[first-j.first:])
}

// Seal makes the open tail a frame, for someone who waits until the store has every
// frame journaled.
func (j *Journal) Seal() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sealLocked()
}

// StoredUpTo records that the store has every frame up to seq.
func (j *Journal) StoredUpTo(seq int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stored.Store(seq)
	j.trimLocked()
	if j.gated {
		j.wakeLocked()
	}
	j.storedWakeLocked()
}

// StoreFailed records that the store refused the run's frames: nothing more of them
// will be stored.
func (j *Journal) StoreFailed(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failed = err
	j.storedWakeLocked()
}

func (j *Journal) storedWakeLocked() {
	if j.storedChanged != nil {
		close(j.storedChanged)
		j.storedChanged = nil
	}
}

// storedMark is where storing a journal stands: the last seq stored, and a channel
// closed when that changes.
type storedMark struct {
	Seq     int64
	Changed <-chan struct{}
}

// storedState returns where storing stands, or why the store refused the frames.
func (j *Journal) storedState() (storedMark, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.storedChanged == nil {
		j.storedChanged = make(chan struct{})
	}
	return storedMark{j.stored.Load(), j.storedChanged}, j.failed
}

// Release lets go of every frame memory holds, all of them in the store: the run parked.
func (j *Journal) Release() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stored.Load() < j.last.Load() {
		return // not all stored: the frames stay, for the readers
	}
	j.open = nil // stored: sealed already
	clear(j.frames)
	j.frames, j.size = nil, 0
	j.first = j.last.Load() + 1
}

// Follow turns the journal of a run this server stopped running into one that follows
// the run from the store (poll), for the streams reading it: the frames the store never
// took go (no reader saw them: the journal is gated), and the next reads come from the
// store, which has every frame the run's new holder adds. why is what storedState says
// from then on: nothing more of this server's is stored.
func (j *Journal) Follow(poll func(*Journal), why error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	stored := j.stored.Load()
	clear(j.frames)
	j.frames, j.size, j.open = nil, 0, nil
	j.first = stored + 1
	j.last.Store(stored)
	j.closed = false // its end, journaled here and not stored, comes from the store
	j.gated = false
	j.failed = why
	j.poll = poll
	j.storedWakeLocked()
	j.wakeLocked()
}

// Close records that the run ended: readers that have read everything are done.
func (j *Journal) Close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.closed {
		j.closed = true
		j.wakeLocked()
	}
}

func (j *Journal) wakeLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// Lose ends, with err, the reads of a journal that follows its run from the store, once
// its readers have read what it has.
func (j *Journal) Lose(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lost = err
	j.wakeLocked()
}

// AddFetched adds to a journal that follows its run from the store the frames read
// after seq after, those past its last, and wakes its readers, whatever it added. A
// run_finished closes it.
func (j *Journal) AddFetched(after int64, frames [][]byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	added := false
	for i, f := range frames {
		seq := after + 1 + int64(i)
		if j.closed || seq <= j.last.Load() {
			continue
		}
		if seq != j.last.Load()+1 {
			break // a gap: the next read starts from the journal's last
		}
		j.frames = append(j.frames, f)
		j.size += len(f)
		j.last.Store(seq)
		j.stored.Store(seq)
		added = true
	}
	// run_finished is a run's last event: only the last frame added can be it, and
	// only that one is decoded.
	if added && isRunFinished(j.frames[len(j.frames)-1]) {
		j.closed = true
	}
	j.trimLocked()
	j.wakeLocked()
}

// VisibleSeq returns the seq of the last frame readers may read.
func (j *Journal) VisibleSeq() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.visible()
}

// visible returns the seq of the last frame readers may read.
func (j *Journal) visible() int64 {
	if j.gated {
		return j.stored.Load()
	}
	return j.last.Load()
}

// Read appends to dst the frames after seq after, at most max of them. When there are
// none yet it returns a channel closed at the next change, and whether the reader is
// done (the journal closed and read to its end). A cursor below what memory and the
// store keep gets ErrEventsExpired.
func (j *Journal) Read(ctx context.Context, after int64, max int, dst []Frame) (frames []Frame, changed <-chan struct{}, done bool, err error) {
	j.mu.Lock()
	if after+1 < j.first {
		first, older := j.first, j.older
		j.mu.Unlock()
		if older == nil {
			return dst, nil, false, ErrEventsExpired
		}
		fs, err := older(ctx, after, min(max, int(first-1-after)))
		switch {
		case errors.Is(err, store.ErrExpired), err == nil && len(fs) == 0:
			return dst, nil, false, ErrEventsExpired
		case err != nil:
			return dst, nil, false, err
		}
		if end := after + int64(len(fs)); end == first-1 && isRunFinished(fs[len(fs)-1]) {
			// A journal following its run from the store, made as the run's end was
			// stored and before its record said so: the end is its last frame.
			j.mu.Lock()
			if end == j.last.Load() && !j.closed {
				j.closed = true
				j.wakeLocked()
			}
			j.mu.Unlock()
		}
		return append(dst, fs...), nil, false, nil
	}
	defer j.mu.Unlock()
	visible := j.visible()
	if after >= visible {
		done := j.closed && after >= j.last.Load()
		if !done && j.lost != nil {
			return dst, nil, false, j.lost
		}
		if !done && j.poll != nil {
			j.poll(j)
		}
		return dst, j.changed, done, nil
	}
	if visible == j.last.Load() && after+int64(max) >= visible {
		j.sealLocked() // taken now: nothing merges into it any more
	}
	i := int(after + 1 - j.first)
	end := min(int(visible-j.first)+1, i+max)
	return append(dst, j.frames[i:end]...), nil, false, nil
}

// Last returns the seq of the journal's last frame.
func (j *Journal) Last() int64 { return j.last.Load() }

// Stored returns the seq of the last frame in the store.
func (j *Journal) Stored() int64 { return j.stored.Load() }

// isRunFinished reports whether f is the frame of run_finished, which ends a journal.
func isRunFinished(f []byte) bool {
	ev, err := EventOf(f)
	return err == nil && ev.GetRunFinished() != nil
}
