package continuation

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// A continuation binds the transcript a parked run reported: the client must send back
// the same messages to resume it. The binding is a digest of a projection of the
// transcript that agentd defines and versions itself, not of an encoding: proto's
// deterministic encoding may change between protobuf-go releases (replicas on two
// releases would refuse each other's resumes), and it covers every field, so a field
// added to Message or Part would break resumes for clients that do not know it (JSON
// clients and grpcurl drop it, send the message back without it, and the digest
// differs).
//
// Projection version 1 is SHA-256 over the tag "agentd transcript v1\n", then for each
// message, in order:
//
//	role (uint64) | id | partial (1 byte) | number of parts (uint64) | each part
//
// and for each part its kind (one byte: the number of the agentd.v1.Part field set in
// its oneof, 0 for none) followed by the fields of that kind, in this order:
//
//	text         the text
//	reasoning    text | state
//	tool_call    id | name | arguments_json
//	tool_result  tool_call_id | name | output | is_error (1 byte) | number of media (uint64) | each media
//	media        mime_type | data | uri | name
//
// where output is 't' followed by the text, or 'j' followed by the canonical JSON of
// the json Value ([appendCanonicalJSON]), so that a Value hashes alike however its map
// was ordered or its numbers written on the way. An unset output is empty text: the
// model reads both alike. Every string and byte field is written as its length (uint64)
// then its bytes, every uint64 in 8 bytes big-endian: with lengths and counts in front
// of everything, no two different transcripts project to the same bytes.
//
// In the projection is everything that defines the conversation: what a model reads
// when the run resumes (texts, reasoning and its opaque state, tool names, arguments
// and outputs, media and their names), how messages and parts follow each other, what
// ties results to their calls (call ids), the message ids the parked step's events
// named, and whether a message was cut short (Message.partial, which a model may read:
// the workload model checks it). Not in it:
//
//   - Part.id, a correlation id tying a streamed block to its events; no model reads it
//     and the loop never looks it up in a transcript.
//   - ToolCallPart.executor, where the call ran: a resumed run takes every call's
//     executor from the tool's definition, never from the transcript.
//   - Unknown fields, and any field added to agentd.v1 Message or Part after version 1.
//     A new field enters the projection only with a new version (the payload's digest_version, and a
//     new tag), which old continuations keep naming: they keep checking as they did.
//
// A string field that is not valid UTF-8 is refused, as proto refuses to encode it: no
// client could send such a message back.

// transcriptTagV1 begins what projection version 1 hashes.
const transcriptTagV1 = "agentd transcript v1\n"

// digestV1 names projection version 1 in a continuation's payload (digest_version):
// the only one there is.
const digestV1 = 1

// Hasher hashes a transcript incrementally, by projection version 1: add each message as
// it is added, read the digest at any point. It is not safe for concurrent use.
type Hasher struct {
	h   hash.Hash
	buf []byte
}

// NewHasher returns a Hasher of no messages.
func NewHasher() *Hasher {
	h := &Hasher{h: sha256.New()}
	h.h.Write([]byte(transcriptTagV1))
	return h
}

// Add feeds m to the digest. It fails for a nil message and for one that holds a string
// that is not UTF-8; the hasher is then unchanged.
func (h *Hasher) Add(m *agentdv1.Message) error {
	if m == nil {
		return errors.New("transcript message is nil")
	}
	b, err := appendProjection(h.buf[:0], m)
	if err != nil {
		return fmt.Errorf("transcript message %q: %w", m.GetId(), err)
	}
	h.h.Write(b)
	h.buf = b
	return nil
}

// Sum returns the digest of the messages added so far. It does not
// change the hasher's state (hash.Hash.Sum never does), so adds may follow.
func (h *Hasher) Sum() []byte {
	return h.h.Sum(nil)
}

// Clone returns a hasher with h's state, which adds to independently.
func (h *Hasher) Clone() (*Hasher, error) {
	c, ok := h.h.(hash.Cloner)
	if !ok {
		return nil, errors.New("the transcript hash cannot be cloned")
	}
	hc, err := c.Clone()
	if err != nil {
		return nil, err
	}
	return &Hasher{h: hc}, nil
}

// DigestWith returns the digest of the messages added so far followed by msgs, leaving
// h as it is.
func (h *Hasher) DigestWith(msgs []*agentdv1.Message) ([]byte, error) {
	c, err := h.Clone()
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		if err := c.Add(m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return c.Sum(), nil
}

// Digest returns the digest of msgs, as a Hasher fed with each.
func Digest(msgs []*agentdv1.Message) ([]byte, error) {
	return NewHasher().DigestWith(msgs)
}

// appendProjection appends the version 1 projection of m to b.
func appendProjection(b []byte, m *agentdv1.Message) ([]byte, error) {
	p := projection{b: b, part: -1}
	p.u64(uint64(m.GetRole()))
	p.str("id", m.GetId())
	p.flag(m.GetPartial())
	p.u64(uint64(len(m.GetParts())))
	for i, part := range m.GetParts() {
		p.part = i
		p.appendPart(part)
	}
	return p.b, p.err
}

// projection writes projected fields. The first string that is not UTF-8 sets err,
// naming the field; what is written after it does not matter.
type projection struct {
	b    []byte
	part int // the index of the part being written, for errors; -1 for the message
	err  error
}

func (p *projection) u64(v uint64) { p.b = binary.BigEndian.AppendUint64(p.b, v) }

func (p *projection) flag(v bool) {
	if v {
		p.b = append(p.b, 1)
	} else {
		p.b = append(p.b, 0)
	}
}

func (p *projection) blob(v []byte) {
	p.u64(uint64(len(v)))
	p.b = append(p.b, v...)
}

func (p *projection) str(field, v string) {
	if !utf8.ValidString(v) {
		p.fail(field, errors.New("not valid UTF-8"))
	}
	p.u64(uint64(len(v)))
	p.b = append(p.b, v...)
}

func (p *projection) fail(field string, err error) {
	if p.err != nil {
		return
	}
	if p.part >= 0 {
		field = fmt.Sprintf("parts[%d].%s", p.part, field)
	}
	p.err = fmt.Errorf("%s: %w", field, err)
}

// The kind bytes: the agentd.v1.Part field numbers of the oneof.
const (
	kindNone       = 0
	kindText       = 2
	kindReasoning  = 3
	kindToolCall   = 4
	kindToolResult = 5
	kindMedia      = 6
)

func (p *projection) appendPart(part *agentdv1.Part) {
	switch k := part.GetKind().(type) {
	case *agentdv1.Part_Text:
		p.b = append(p.b, kindText)
		p.str("text", k.Text)
	case *agentdv1.Part_Reasoning:
		p.b = append(p.b, kindReasoning)
		p.str("reasoning.text", k.Reasoning.GetText())
		p.blob(k.Reasoning.GetState())
	case *agentdv1.Part_ToolCall:
		c := k.ToolCall
		p.b = append(p.b, kindToolCall)
		p.str("tool_call.id", c.GetId())
		p.str("tool_call.name", c.GetName())
		p.str("tool_call.arguments_json", c.GetArgumentsJson())
	case *agentdv1.Part_ToolResult:
		r := k.ToolResult
		p.b = append(p.b, kindToolResult)
		p.str("tool_result.tool_call_id", r.GetToolCallId())
		p.str("tool_result.name", r.GetName())
		if js, ok := r.GetOutput().(*agentdv1.ToolResultPart_Json); ok {
			p.b = append(p.b, 'j')
			p.json(js.Json)
		} else {
			p.b = append(p.b, 't')
			p.str("tool_result.text", r.GetText())
		}
		p.flag(r.GetIsError())
		p.u64(uint64(len(r.GetMedia())))
		for _, md := range r.GetMedia() {
			p.media("tool_result.media", md)
		}
	case *agentdv1.Part_Media:
		p.b = append(p.b, kindMedia)
		p.media("media", k.Media)
	default:
		p.b = append(p.b, kindNone)
	}
}

// json writes the canonical JSON of v, length-prefixed like any field: it reserves the
// length, writes the text, then fills the length in.
func (p *projection) json(v *structpb.Value) {
	at := len(p.b)
	p.u64(0)
	b, err := appendCanonicalJSON(p.b, v)
	if err != nil {
		p.fail("tool_result.json", err)
		return
	}
	binary.BigEndian.PutUint64(b[at:], uint64(len(b)-at-8))
	p.b = b
}

func (p *projection) media(field string, m *agentdv1.MediaPart) {
	p.str(field+".mime_type", m.GetMimeType())
	p.blob(m.GetData())
	p.str(field+".uri", m.GetUri())
	p.str(field+".name", m.GetName())
}
