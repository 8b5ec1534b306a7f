package service

import (
	"errors"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// A frame is one event as every stream carries it: the encoding of field 1 (event) of
// RunResponse, StartRunResponse and AttachRunResponse, which all hold the event there
// and nothing else. An event is marshaled once, into its frame, and every stream that
// carries it sends those bytes: a response holding a frame as its unknown fields
// marshals to the frame itself (sendFrame).
type frame []byte

// eventField is the number of the event field of every response message that carries one.
const eventField protowire.Number = 1

// marshalFrame marshals ev into its frame.
func marshalFrame(ev *agentdv1.RunEvent) (frame, error) {
	n := proto.Size(ev)
	b := make([]byte, 0, 1+protowire.SizeVarint(uint64(n))+n)
	b = protowire.AppendTag(b, eventField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, ev)
}

// eventOf decodes the event of a frame.
func eventOf(f frame) (*agentdv1.RunEvent, error) {
	_, _, n := protowire.ConsumeTag(f)
	b, m := protowire.ConsumeBytes(f[n:])
	if n < 0 || m < 0 {
		return nil, errors.New("malformed frame")
	}
	ev := &agentdv1.RunEvent{}
	return ev, proto.Unmarshal(b, ev)
}

// sendFrame sends f as one response M (RunResponse, StartRunResponse, AttachRunResponse)
// on a stream: the response carries the frame as its unknown fields, which marshal
// verbatim, so the event is not marshaled again.
func sendFrame[M any, PM interface {
	*M
	proto.Message
}](send func(PM) error, f frame) error {
	var m M
	pm := PM(&m)
	pm.ProtoReflect().SetUnknown(protoreflect.RawFields(f))
	return send(pm)
}

// minJournalFrames is how many frames a journal keeps whatever their size.
const minJournalFrames = 2 * outboxSize

// errEventsExpired is what reading a journal below what it keeps returns.
var errEventsExpired = errors.New("events expired")

// journal is a run's events, in seq order, as frames: every numbered event is appended
// before any stream sends it, and each stream reads it from its own cursor. It keeps the
// newest frames within its byte bound, but never fewer than minJournalFrames, so that the
// stream the run waits for (at most outboxSize behind) never loses one; a reader whose
// cursor falls below what it keeps gets errEventsExpired.
type journal struct {
	mu      sync.Mutex
	frames  []frame
	first   int64 // seq of frames[0]
	size    int   // bytes of frames
	max     int   // the bound on size
	closed  bool  // the run ended: nothing more is appended
	changed chan struct{}

	// last is the seq of the last frame, for the readers' checks without the lock.
	last atomic.Int64
}

func newJournal(max int) *journal {
	return &journal{first: 1, max: max, changed: make(chan struct{})}
}

// append adds the frame of the event with the next seq, which the caller assigned.
func (j *journal) append(f frame) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.frames = append(j.frames, f)
	j.size += len(f)
	for j.size > j.max && len(j.frames) > minJournalFrames {
		j.size -= len(j.frames[0])
		j.frames[0] = nil
		j.frames = j.frames[1:]
		j.first++
	}
	j.last.Add(1)
	j.wakeLocked()
}

// close records that the run ended: readers that have read everything are done.
func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.closed {
		j.closed = true
		j.wakeLocked()
	}
}

func (j *journal) wakeLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// bounds returns the oldest seq kept and the last one (oldest is last+1 when empty).
func (j *journal) bounds() (oldest, last int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.first, j.first + int64(len(j.frames)) - 1
}

// read appends to dst the frames after seq after, at most max of them. When there are
// none it returns a channel closed at the next change, and whether the journal is closed
// (the reader is done). A cursor below what the journal keeps gets errEventsExpired.
func (j *journal) read(after int64, max int, dst []frame) (frames []frame, changed <-chan struct{}, done bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if after+1 < j.first {
		return dst, nil, false, errEventsExpired
	}
	i := int(after + 1 - j.first)
	if i >= len(j.frames) {
		return dst, j.changed, j.closed, nil
	}
	end := min(len(j.frames), i+max)
	return append(dst, j.frames[i:end]...), nil, false, nil
}

// bytes returns the bytes the journal holds.
func (j *journal) bytes() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}
