package service

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// A continuation on the wire is
//
//	version (1 byte) | payload | HMAC-SHA256(key, version | payload) (32 bytes)
//
// where the payload of version 1 is the JSON of wireContinuation. It is signed, not
// encrypted: the client can read it (it saw everything in it as events anyway), it cannot
// change it.
const (
	continuationVersion = 1
	continuationMACSize = sha256.Size
	// maxContinuationSize bounds what open reads and what seal produces, so a continuation
	// that could not be opened is refused when the run parks, not when it resumes.
	maxContinuationSize = 4 << 20
	// defaultContinuationTTL is how long a continuation stays valid unless configured.
	defaultContinuationTTL = 24 * time.Hour
	// minContinuationKeySize is the shortest signing key accepted: 256 bits, the
	// strength HMAC-SHA256 offers.
	minContinuationKeySize = 32
)

// The kinds of refused continuation. Every error of open and check wraps exactly one.
var (
	errContinuationMalformed = errors.New("continuation malformed")
	errContinuationForged    = errors.New("continuation signature does not match")
	errContinuationExpired   = errors.New("continuation expired")
	errContinuationMismatch  = errors.New("continuation mismatch")
)

// continuation is what a continuation carries.
type continuation struct {
	Agent    string
	ThreadID string
	// Digest is the transcript digest (transcriptDigest) of the messages the client must
	// send back in RunSpec.messages.
	Digest []byte
	// Pending is the parked step; nil, or a Pending with no Calls, resumes by calling the
	// model.
	Pending   *runtime.Pending
	ExpiresAt time.Time
}

// continuationCodec seals and opens continuations. It is safe for concurrent use.
type continuationCodec struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// newContinuationCodec returns a codec signing with key (see continuationKey). A ttl of
// zero or less means 24 hours; a nil now means time.Now.
func newContinuationCodec(key []byte, ttl time.Duration, now func() time.Time) *continuationCodec {
	if ttl <= 0 {
		ttl = defaultContinuationTTL
	}
	if now == nil {
		now = time.Now
	}
	return &continuationCodec{key: bytes.Clone(key), ttl: ttl, now: now}
}

// seal returns the signed bytes of ct. A zero ct.ExpiresAt is set to now plus the
// codec's ttl first, so the caller learns the expiry. The strings of ct must be UTF-8:
// invalid bytes become U+FFFD, as they would in any proto string field.
func (c *continuationCodec) seal(ct *continuation) ([]byte, error) {
	if ct == nil {
		return nil, errors.New("seal continuation: nil")
	}
	if ct.ExpiresAt.IsZero() {
		ct.ExpiresAt = c.now().Add(c.ttl)
	}
	w := wireContinuation{
		Agent:   ct.Agent,
		Thread:  ct.ThreadID,
		Digest:  ct.Digest,
		Expires: ct.ExpiresAt.UTC(),
		Pending: toWirePending(ct.Pending),
	}
	payload, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("seal continuation: %w", err)
	}
	if n := 1 + len(payload) + continuationMACSize; n > maxContinuationSize {
		return nil, fmt.Errorf("seal continuation: %d bytes, more than the %d byte limit (tool results or media too large to park)", n, maxContinuationSize)
	}
	b := make([]byte, 0, 1+len(payload)+continuationMACSize)
	b = append(b, continuationVersion)
	b = append(b, payload...)
	return c.sign(b), nil
}

// open verifies and decodes b. It refuses, with an error wrapping one of the
// errContinuation sentinels, anything it did not seal with the same key, and a
// continuation past its expiry. It never panics.
func (c *continuationCodec) open(b []byte) (*continuation, error) {
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("%w: empty", errContinuationMalformed)
	case len(b) > maxContinuationSize:
		return nil, fmt.Errorf("%w: %d bytes, more than the %d byte limit", errContinuationMalformed, len(b), maxContinuationSize)
	case len(b) < 1+continuationMACSize:
		return nil, fmt.Errorf("%w: %d bytes, too short to hold a version and a signature", errContinuationMalformed, len(b))
	case b[0] != continuationVersion:
		return nil, fmt.Errorf("%w: unsupported version %d (this server reads version %d)", errContinuationMalformed, b[0], continuationVersion)
	}
	body, mac := b[:len(b)-continuationMACSize], b[len(b)-continuationMACSize:]
	if !hmac.Equal(mac, c.mac(body)) {
		return nil, fmt.Errorf("%w: it was signed with another key than this replica's (replicas hold different keys), or altered; every replica that may resume a run needs the same key (AGENTD_CONTINUATION_KEY or --continuation-key-file)", errContinuationForged)
	}
	var w wireContinuation
	if err := json.Unmarshal(body[1:], &w); err != nil {
		// Only a server holding the key can get here: a bug, or a key shared with
		// something that is not agentd.
		return nil, fmt.Errorf("%w: signed payload does not decode: %v", errContinuationMalformed, err)
	}
	ct := &continuation{
		Agent:     w.Agent,
		ThreadID:  w.Thread,
		Digest:    w.Digest,
		Pending:   w.Pending.runtime(),
		ExpiresAt: w.Expires.UTC(),
	}
	if now := c.now(); !now.Before(ct.ExpiresAt) {
		return nil, fmt.Errorf("%w at %s; start a new run with the transcript", errContinuationExpired, ct.ExpiresAt.Format(time.RFC3339))
	}
	return ct, nil
}

// check reports whether ct was issued for this agent, thread and transcript digest; the
// error (wrapping errContinuationMismatch) names everything that differs.
func (ct *continuation) check(agent, threadID string, digest []byte) error {
	if ct == nil {
		return fmt.Errorf("%w: no continuation", errContinuationMismatch)
	}
	var diffs []string
	if ct.Agent != agent {
		diffs = append(diffs, fmt.Sprintf("issued for agent %q, not %q", ct.Agent, agent))
	}
	if ct.ThreadID != threadID {
		diffs = append(diffs, fmt.Sprintf("issued for thread %q, not %q", ct.ThreadID, threadID))
	}
	if !hmac.Equal(ct.Digest, digest) {
		diffs = append(diffs, "the messages sent back differ from the transcript the parked run reported")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", errContinuationMismatch, strings.Join(diffs, "; "))
	}
	return nil
}

func (c *continuationCodec) mac(body []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return m.Sum(nil)
}

// sign appends the MAC of body to body.
func (c *continuationCodec) sign(body []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return m.Sum(body)
}

// The payload of version 1. Field names are short and fixed here, apart from the Go names
// of the runtime types, so that renaming a runtime field never changes the format. Every
// field is omitted when zero; a nil and an empty slice both come back nil.
type wireContinuation struct {
	Agent   string       `json:"a,omitempty"`
	Thread  string       `json:"t,omitempty"`
	Digest  []byte       `json:"d,omitempty"`
	Expires time.Time    `json:"x"`
	Pending *wirePending `json:"p,omitempty"`
}

type wirePending struct {
	Step       int          `json:"s,omitempty"`
	Turn       int          `json:"t,omitempty"`
	StepInTurn int          `json:"i,omitempty"`
	StepID     string       `json:"id,omitempty"`
	Message    *wireMessage `json:"m,omitempty"`
	Calls      []wireCall   `json:"c,omitempty"`
	Steers     []wireSteer  `json:"q,omitempty"`
}

// wireSteer is a steer the run accepted and had not applied when it parked.
type wireSteer struct {
	Seq       int64        `json:"s,omitempty"`
	Message   *wireMessage `json:"m,omitempty"`
	Interrupt bool         `json:"i,omitempty"`
}

type wireCall struct {
	Call       wireToolCall      `json:"c"`
	State      runtime.CallState `json:"s,omitempty"`
	ApprovalID string            `json:"a,omitempty"`
	Reason     string            `json:"r,omitempty"`
	Approved   bool              `json:"ok,omitempty"`
	Result     *wireOutput       `json:"o,omitempty"`
}

type wireMessage struct {
	ID      string       `json:"id,omitempty"`
	Role    runtime.Role `json:"r,omitempty"`
	Parts   []wirePart   `json:"p,omitempty"`
	Partial bool         `json:"x,omitempty"`
}

type wirePart struct {
	Kind       runtime.PartKind `json:"k,omitempty"`
	ID         string           `json:"id,omitempty"`
	Text       string           `json:"t,omitempty"`
	State      []byte           `json:"s,omitempty"`
	ToolCall   *wireToolCall    `json:"c,omitempty"`
	ToolResult *wireToolResult  `json:"r,omitempty"`
	Media      *wireMedia       `json:"m,omitempty"`
}

type wireToolCall struct {
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"n,omitempty"`
	Arguments string           `json:"a,omitempty"`
	Executor  runtime.Executor `json:"e,omitempty"`
}

type wireToolResult struct {
	CallID string      `json:"id,omitempty"`
	Name   string      `json:"n,omitempty"`
	Output *wireOutput `json:"o,omitempty"`
}

// wireOutput keeps Output.JSON as a string, not as embedded JSON: encoding/json would
// compact and HTML-escape a json.RawMessage, and the model must see the tool's bytes.
// The pointer keeps a non-nil empty JSON apart from none.
type wireOutput struct {
	Text    string      `json:"t,omitempty"`
	JSON    *string     `json:"j,omitempty"`
	IsError bool        `json:"e,omitempty"`
	Media   []wireMedia `json:"m,omitempty"`
}

type wireMedia struct {
	MIMEType string `json:"t,omitempty"`
	Data     []byte `json:"d,omitempty"`
	URI      string `json:"u,omitempty"`
	Name     string `json:"n,omitempty"`
}

func toWirePending(p *runtime.Pending) *wirePending {
	if p == nil {
		return nil
	}
	w := &wirePending{Step: p.Step, Turn: p.Turn, StepInTurn: p.StepInTurn, StepID: p.StepID, Message: toWireMessage(p.Message)}
	for _, c := range p.Calls {
		w.Calls = append(w.Calls, wireCall{
			Call:       toWireToolCall(c.Call),
			State:      c.State,
			ApprovalID: c.ApprovalID,
			Reason:     c.Reason,
			Approved:   c.Approved,
			Result:     toWireOutput(c.Result),
		})
	}
	for _, st := range p.Steers {
		w.Steers = append(w.Steers, wireSteer{Seq: st.Seq, Message: toWireMessage(st.Message), Interrupt: st.Interrupt})
	}
	return w
}

func (w *wirePending) runtime() *runtime.Pending {
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

func toWireMessage(m runtime.Message) *wireMessage {
	if m.ID == "" && m.Role == 0 && len(m.Parts) == 0 && !m.Partial {
		return nil
	}
	w := &wireMessage{ID: m.ID, Role: m.Role, Partial: m.Partial}
	for _, p := range m.Parts {
		wp := wirePart{Kind: p.Kind, ID: p.ID, Text: p.Text, State: p.State}
		if p.ToolCall != (runtime.ToolCall{}) {
			tc := toWireToolCall(p.ToolCall)
			wp.ToolCall = &tc
		}
		if r := p.ToolResult; r.CallID != "" || r.Name != "" || !outputIsZero(r.Output) {
			wp.ToolResult = &wireToolResult{CallID: r.CallID, Name: r.Name, Output: toWireOutput(r.Output)}
		}
		if !mediaIsZero(p.Media) {
			md := toWireMedia(p.Media)
			wp.Media = &md
		}
		w.Parts = append(w.Parts, wp)
	}
	return w
}

func (w *wireMessage) runtime() runtime.Message {
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

func toWireToolCall(c runtime.ToolCall) wireToolCall {
	return wireToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Executor: c.Executor}
}

func (w wireToolCall) runtime() runtime.ToolCall {
	return runtime.ToolCall{ID: w.ID, Name: w.Name, Arguments: w.Arguments, Executor: w.Executor}
}

func outputIsZero(o runtime.Output) bool {
	return o.Text == "" && o.JSON == nil && !o.IsError && len(o.Media) == 0
}

func toWireOutput(o runtime.Output) *wireOutput {
	if outputIsZero(o) {
		return nil
	}
	w := &wireOutput{Text: o.Text, IsError: o.IsError}
	if o.JSON != nil {
		s := string(o.JSON)
		w.JSON = &s
	}
	for _, m := range o.Media {
		w.Media = append(w.Media, toWireMedia(m))
	}
	return w
}

func (w *wireOutput) runtime() runtime.Output {
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

func mediaIsZero(m runtime.Media) bool {
	return m.MIMEType == "" && len(m.Data) == 0 && m.URI == "" && m.Name == ""
}

func toWireMedia(m runtime.Media) wireMedia {
	return wireMedia{MIMEType: m.MIMEType, Data: m.Data, URI: m.URI, Name: m.Name}
}

func (w wireMedia) runtime() runtime.Media {
	return runtime.Media{MIMEType: w.MIMEType, Data: w.Data, URI: w.URI, Name: w.Name}
}

// transcriptHasher hashes a transcript incrementally: add each message as it is added,
// read the digest at any point. It is not safe for concurrent use.
//
// Each message is fed as its deterministic proto encoding preceded by that encoding's
// length (8 bytes, big-endian): without the length, [{parts: a}, {parts: b}] and
// [{parts: a, b}] would hash alike, as proto concatenates repeated fields.
type transcriptHasher struct {
	h   hash.Hash
	buf []byte
}

func newTranscriptHasher() *transcriptHasher {
	return &transcriptHasher{h: sha256.New()}
}

// add feeds m to the digest. It fails for a nil message and for one proto refuses to
// encode (a string field that is not UTF-8); the hasher is then unchanged.
func (h *transcriptHasher) add(m *agentdv1.Message) error {
	if m == nil {
		return errors.New("transcript message is nil")
	}
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(append(h.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0), m)
	if err != nil {
		return fmt.Errorf("transcript message %q: %w", m.GetId(), err)
	}
	binary.BigEndian.PutUint64(b, uint64(len(b)-8))
	h.h.Write(b)
	h.buf = b
	return nil
}

// sum returns the digest of the messages added so far. It does not change the hasher's
// state (hash.Hash.Sum never does), so adds may follow.
func (h *transcriptHasher) sum() []byte {
	return h.h.Sum(nil)
}

// clone returns a hasher with h's state, which adds to independently.
func (h *transcriptHasher) clone() (*transcriptHasher, error) {
	c, ok := h.h.(hash.Cloner)
	if !ok {
		return nil, errors.New("the transcript hash cannot be cloned")
	}
	hc, err := c.Clone()
	if err != nil {
		return nil, err
	}
	return &transcriptHasher{h: hc}, nil
}

// digestWith returns the digest of the messages added so far followed by msgs, leaving
// h as it is.
func (h *transcriptHasher) digestWith(msgs []*agentdv1.Message) ([]byte, error) {
	c, err := h.clone()
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		if err := c.add(m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return c.sum(), nil
}

// transcriptDigest returns the digest of msgs, as a transcriptHasher fed with each.
func transcriptDigest(msgs []*agentdv1.Message) ([]byte, error) {
	return newTranscriptHasher().digestWith(msgs)
}

// continuationKey returns the key continuations are signed with. value (the environment's
// AGENTD_CONTINUATION_KEY) wins over file; a file's content is read whole, its trailing
// newlines trimmed. Either is taken as a raw key of at least 32 bytes, or as
// "base64:<standard base64>" or "hex:<hex>" decoding to at least 32 bytes. With neither,
// the key is 32 random bytes and random is true: continuations then open on this process
// only, not on another replica, nor after a restart.
//
// Errors never quote the key.
func continuationKey(value, file string) (key []byte, random bool, err error) {
	switch {
	case value != "":
		key, err = parseContinuationKey(value)
		if err != nil {
			return nil, false, fmt.Errorf("continuation key (AGENTD_CONTINUATION_KEY): %w", err)
		}
		return key, false, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, false, fmt.Errorf("continuation key file: %w", err)
		}
		key, err = parseContinuationKey(strings.TrimRight(string(b), "\r\n"))
		if err != nil {
			return nil, false, fmt.Errorf("continuation key file %s: %w", file, err)
		}
		return key, false, nil
	}
	key = make([]byte, minContinuationKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, fmt.Errorf("continuation key: %w", err)
	}
	return key, true, nil
}

func parseContinuationKey(s string) ([]byte, error) {
	const hint = "generate one with: echo base64:$(openssl rand -base64 32)"
	var key []byte
	switch {
	case s == "":
		return nil, fmt.Errorf("empty; %s", hint)
	case strings.HasPrefix(s, "base64:"):
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "base64:"))
		if err != nil {
			// The error gives an offset, never the key's bytes.
			return nil, fmt.Errorf("base64: key is not valid standard base64: %v", err)
		}
		key = b
	case strings.HasPrefix(s, "hex:"):
		b, err := hex.DecodeString(strings.TrimPrefix(s, "hex:"))
		if err != nil {
			// hex's error would quote a byte of the key.
			return nil, errors.New("hex: key is not valid hex (an even number of 0-9, a-f)")
		}
		key = b
	default:
		key = []byte(s)
	}
	if len(key) < minContinuationKeySize {
		return nil, fmt.Errorf("key is %d bytes, want at least %d; %s", len(key), minContinuationKeySize, hint)
	}
	return key, nil
}
