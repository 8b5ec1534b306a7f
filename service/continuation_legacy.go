package service

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// Format 1 of continuations, which agentd sealed before format 2: its payload is the
// JSON of legacyContinuation, and its transcript digest (digestLegacy) is SHA-256 over
// each message's deterministic proto encoding preceded by the encoding's length (8
// bytes, big-endian). agentd no longer seals it; it still opens and checks it, so that
// a run parked by a replica of the previous release resumes on this one during a
// rolling upgrade. Everything in this file can go once no continuation of format 1 can
// be unexpired (the continuation TTL after every replica seals format 2).

// continuationVersionJSON is format 1's first byte.
const continuationVersionJSON = 1

// decodeLegacyPayload decodes the payload of a format 1 continuation.
func decodeLegacyPayload(payload []byte) (*continuation, error) {
	var w legacyContinuation
	if err := json.Unmarshal(payload, &w); err != nil {
		return nil, err
	}
	return &continuation{
		Agent:         w.Agent,
		ThreadID:      w.Thread,
		Digest:        w.Digest,
		DigestVersion: digestLegacy,
		Pending:       w.Pending.runtime(),
		ExpiresAt:     w.Expires.UTC(),
	}, nil
}

// withLegacy is the transcript a start carries, with format 1's digest beside version
// 1's. The transcriptHasher holds version 1's, which the run needs anyway; format 1's is
// taken from messages when it is asked for, which only the check of a continuation of
// format 1 does, once per start that carries one.
type withLegacy struct {
	*transcriptHasher
	messages []*agentdv1.Message // what the hasher was fed
}

func (t withLegacy) sumOf(v digestVersion) []byte {
	if v != digestLegacy {
		return t.transcriptHasher.sumOf(v)
	}
	d, err := legacyDigest(t.messages)
	if err != nil {
		return nil // a transcript no digest takes matches no continuation
	}
	return d
}

// legacyDigest returns format 1's digest of msgs.
func legacyDigest(msgs []*agentdv1.Message) ([]byte, error) {
	h := sha256.New()
	var b []byte
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("message %d: transcript message is nil", i)
		}
		var err error
		if b, err = appendLegacyEncoding(b[:0], m); err != nil {
			return nil, fmt.Errorf("message %d: transcript message %q: %w", i, m.GetId(), err)
		}
		h.Write(b)
	}
	return h.Sum(nil), nil
}

// appendLegacyEncoding appends m as format 1's digest takes it: its deterministic proto
// encoding, preceded by the encoding's length. It fails where proto.Marshal does (a
// string that is not UTF-8).
func appendLegacyEncoding(b []byte, m *agentdv1.Message) ([]byte, error) {
	at := len(b)
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(append(b, 0, 0, 0, 0, 0, 0, 0, 0), m)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint64(b[at:], uint64(len(b)-at-8))
	return b, nil
}

// legacyContinuation is format 1's payload. Its JSON names are short and were fixed
// apart from the runtime types' Go names; every field was omitted when zero.
type legacyContinuation struct {
	Agent   string         `json:"a,omitempty"`
	Thread  string         `json:"t,omitempty"`
	Digest  []byte         `json:"d,omitempty"`
	Expires time.Time      `json:"x"`
	Pending *legacyPending `json:"p,omitempty"`
}

type legacyPending struct {
	Step       int            `json:"s,omitempty"`
	Turn       int            `json:"t,omitempty"`
	StepInTurn int            `json:"i,omitempty"`
	StepID     string         `json:"id,omitempty"`
	Message    *legacyMessage `json:"m,omitempty"`
	Calls      []legacyCall   `json:"c,omitempty"`
	Steers     []legacySteer  `json:"q,omitempty"`
}

type legacySteer struct {
	Seq       int64          `json:"s,omitempty"`
	Message   *legacyMessage `json:"m,omitempty"`
	Interrupt bool           `json:"i,omitempty"`
}

type legacyCall struct {
	Call       legacyToolCall    `json:"c"`
	State      runtime.CallState `json:"s,omitempty"`
	ApprovalID string            `json:"a,omitempty"`
	Reason     string            `json:"r,omitempty"`
	Approved   bool              `json:"ok,omitempty"`
	Result     *legacyOutput     `json:"o,omitempty"`
}

type legacyMessage struct {
	ID      string       `json:"id,omitempty"`
	Role    runtime.Role `json:"r,omitempty"`
	Parts   []legacyPart `json:"p,omitempty"`
	Partial bool         `json:"x,omitempty"`
}

type legacyPart struct {
	Kind       runtime.PartKind  `json:"k,omitempty"`
	ID         string            `json:"id,omitempty"`
	Text       string            `json:"t,omitempty"`
	State      []byte            `json:"s,omitempty"`
	ToolCall   *legacyToolCall   `json:"c,omitempty"`
	ToolResult *legacyToolResult `json:"r,omitempty"`
	Media      *legacyMedia      `json:"m,omitempty"`
}

type legacyToolCall struct {
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"n,omitempty"`
	Arguments string           `json:"a,omitempty"`
	Executor  runtime.Executor `json:"e,omitempty"`
}

type legacyToolResult struct {
	CallID string        `json:"id,omitempty"`
	Name   string        `json:"n,omitempty"`
	Output *legacyOutput `json:"o,omitempty"`
}

// legacyOutput kept Output.JSON as a JSON string; the pointer kept a non-nil empty JSON
// apart from none.
type legacyOutput struct {
	Text    string        `json:"t,omitempty"`
	JSON    *string       `json:"j,omitempty"`
	IsError bool          `json:"e,omitempty"`
	Media   []legacyMedia `json:"m,omitempty"`
}

type legacyMedia struct {
	MIMEType string `json:"t,omitempty"`
	Data     []byte `json:"d,omitempty"`
	URI      string `json:"u,omitempty"`
	Name     string `json:"n,omitempty"`
}

func (w *legacyPending) runtime() *runtime.Pending {
	if w == nil {
		return nil
	}
	p := &runtime.Pending{Step: w.Step, Turn: w.Turn, StepInTurn: w.StepInTurn, StepID: w.StepID, Message: w.Message.runtime()}
	for _, c := range w.Calls {
		p.Calls = append(p.Calls, runtime.PendingCall{
			Call:       c.Call.runtime(),
			State:      c.State,
			ApprovalID: c.ApprovalID,
			Reason:     c.Reason,
			Approved:   c.Approved,
			Result:     c.Result.runtime(),
		})
	}
	for _, st := range w.Steers {
		p.Steers = append(p.Steers, runtime.Steer{Seq: st.Seq, Message: st.Message.runtime(), Interrupt: st.Interrupt})
	}
	return p
}

func (w *legacyMessage) runtime() runtime.Message {
	if w == nil {
		return runtime.Message{}
	}
	m := runtime.Message{ID: w.ID, Role: w.Role, Partial: w.Partial}
	for _, wp := range w.Parts {
		p := runtime.Part{Kind: wp.Kind, ID: wp.ID, Text: wp.Text, State: wp.State}
		if wp.ToolCall != nil {
			p.ToolCall = wp.ToolCall.runtime()
		}
		if r := wp.ToolResult; r != nil {
			p.ToolResult = runtime.ToolResult{CallID: r.CallID, Name: r.Name, Output: r.Output.runtime()}
		}
		if wp.Media != nil {
			p.Media = wp.Media.runtime()
		}
		m.Parts = append(m.Parts, p)
	}
	return m
}

func (w legacyToolCall) runtime() runtime.ToolCall {
	return runtime.ToolCall{ID: w.ID, Name: w.Name, Arguments: w.Arguments, Executor: w.Executor}
}

func (w *legacyOutput) runtime() runtime.Output {
	if w == nil {
		return runtime.Output{}
	}
	o := runtime.Output{Text: w.Text, IsError: w.IsError}
	if w.JSON != nil {
		o.JSON = json.RawMessage(*w.JSON)
	}
	for _, m := range w.Media {
		o.Media = append(o.Media, m.runtime())
	}
	return o
}

func (w legacyMedia) runtime() runtime.Media {
	return runtime.Media{MIMEType: w.MIMEType, Data: w.Data, URI: w.URI, Name: w.Name}
}
