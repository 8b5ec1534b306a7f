package continuation

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// parked is a continuation as the engine seals and opens it: the parked step in the
// runtime's terms, converted by internal/wire around Seal and Open (testCodec).
type parked struct {
	Agent     string
	ThreadID  string
	Digest    []byte
	Pending   *runtime.Pending
	ExpiresAt time.Time
	Grants    []*agentdv1.Grant
	Owner     string
}

func (p *parked) continuation(pending *continuationv1.Pending) *Continuation {
	return &Continuation{Agent: p.Agent, ThreadID: p.ThreadID, Digest: p.Digest, Pending: pending, ExpiresAt: p.ExpiresAt, Grants: p.Grants, Owner: p.Owner}
}

func (p *parked) check(agent, threadID string, transcript *Hasher) error {
	if p == nil {
		return (*Continuation)(nil).Check(agent, threadID, transcript)
	}
	return p.continuation(nil).Check(agent, threadID, transcript)
}

func (p *parked) checkCaller(who string) error { return p.continuation(nil).CheckCaller(who) }

// testCodec seals and opens parked steps as the engine does.
type testCodec struct{ *Codec }

func newTestCodec(key []byte, ttl time.Duration, now func() time.Time) testCodec {
	return testCodec{NewCodec(key, ttl, now)}
}

func (c testCodec) seal(p *parked) ([]byte, error) {
	if p == nil {
		return c.Seal(nil)
	}
	pending, err := wire.PendingToProto(p.Pending)
	if err != nil {
		return nil, fmt.Errorf("seal continuation: %w", err)
	}
	ct := p.continuation(pending)
	b, err := c.Seal(ct)
	p.ExpiresAt = ct.ExpiresAt
	return b, err
}

func (c testCodec) open(b []byte) (*parked, error) {
	ct, err := c.Open(b)
	if err != nil {
		return nil, err
	}
	pending, err := wire.PendingFromProto(ct.Pending)
	if err != nil {
		return nil, fmt.Errorf("%w: signed payload (version %d) does not decode: %v", ErrMalformed, b[0], err)
	}
	return &parked{Agent: ct.Agent, ThreadID: ct.ThreadID, Digest: ct.Digest, Pending: pending, ExpiresAt: ct.ExpiresAt, Grants: ct.Grants, Owner: ct.Owner}, nil
}

var (
	testKey      = []byte("0123456789abcdef0123456789abcdef")
	otherTestKey = []byte("fedcba9876543210fedcba9876543210")
	testT0       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// richPending is a parked step with a call in every state, results of every shape and
// reasoning state bytes: what a continuation must carry unchanged.
func richPending() *runtime.Pending {
	return &runtime.Pending{
		Step: 7, Turn: 2, StepInTurn: 3, StepID: "step_7",
		Message: runtime.Message{
			ID:   "msg_a",
			Role: runtime.RoleAssistant,
			Parts: []runtime.Part{
				{Kind: runtime.PartReasoning, ID: "msg_r", Text: "think <first> & then", State: []byte{0, 1, 2, 0xff, 0xfe, '"', '\\'}},
				{Kind: runtime.PartText, ID: "msg_t", Text: "Calling tools — ünïcödé, \u2028 and \"quotes\"."},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_1", Name: "add", Arguments: `{"a": 1,  "b":2}`, Executor: runtime.ExecutorServer}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_2", Name: "search", Arguments: `{"q":"<b>&amp;</b>"}`, Executor: runtime.ExecutorServer}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_3", Name: "ask_user", Arguments: `{}`, Executor: runtime.ExecutorClient}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_7", Name: "add", Arguments: `{"a":2}`, Executor: runtime.ExecutorServer}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_4", Name: "shell", Arguments: "{\n  \"cmd\": \"ls\"\n}", Executor: runtime.ExecutorServer}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_5", Name: "render", Arguments: `{}`, Executor: runtime.ExecutorServer}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_6", Name: "noop", Arguments: ``, Executor: runtime.ExecutorServer}},
				{Kind: runtime.PartMedia, Media: runtime.Media{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 0}, Name: "chart.png"}},
			},
			Partial: true,
		},
		Calls: []runtime.PendingCall{
			{
				Call:  runtime.ToolCall{ID: "call_1", Name: "add", Arguments: `{"a": 1,  "b":2}`, Executor: runtime.ExecutorServer},
				State: runtime.CallDone,
				// Whitespace and HTML characters that encoding/json would compact and escape
				// in an embedded json.RawMessage.
				Result: runtime.Output{JSON: json.RawMessage("{ \"sum\" : 3, \"html\": \"<a>&</a>\" }\n")},
			},
			{
				Call:   runtime.ToolCall{ID: "call_2", Name: "search", Arguments: `{"q":"<b>&amp;</b>"}`, Executor: runtime.ExecutorServer},
				State:  runtime.CallDone,
				Result: runtime.Output{Text: "no results for <b>", IsError: true},
			},
			{
				Call:  runtime.ToolCall{ID: "call_3", Name: "ask_user", Arguments: `{}`, Executor: runtime.ExecutorClient},
				State: runtime.CallReady,
			},
			{
				Call:     runtime.ToolCall{ID: "call_7", Name: "add", Arguments: `{"a":2}`, Executor: runtime.ExecutorServer},
				State:    runtime.CallReady,
				Approved: true,
			},
			{
				Call:       runtime.ToolCall{ID: "call_4", Name: "shell", Arguments: "{\n  \"cmd\": \"rm -rf /tmp/x\"\n}", Executor: runtime.ExecutorServer},
				State:      runtime.CallAwaitingApproval,
				ApprovalID: "appr_1",
				Reason:     "shell needs approval",
			},
			{
				Call:  runtime.ToolCall{ID: "call_5", Name: "render", Arguments: `{}`, Executor: runtime.ExecutorServer},
				State: runtime.CallDone,
				Result: runtime.Output{Text: "rendered", Media: []runtime.Media{
					{MIMEType: "image/png", Data: []byte{1, 2, 3, 0, 255}},
					{MIMEType: "text/uri-list", URI: "https://example.com/x.png", Name: "x.png"},
				}},
			},
			{
				Call:   runtime.ToolCall{ID: "call_6", Name: "noop", Arguments: ``, Executor: runtime.ExecutorServer},
				State:  runtime.CallDone,
				Result: runtime.Output{JSON: json.RawMessage{}}, // set but empty: stays set
			},
		},
		// Steers accepted and not applied when the run parked.
		Steers: []runtime.Steer{
			{Seq: 4, Message: runtime.Message{ID: "msg_s", Role: runtime.RoleUser, Parts: []runtime.Part{{Kind: runtime.PartText, Text: "also <this>"}}}},
			{Seq: 9, Message: runtime.UserMessage("stop that"), Interrupt: true},
		},
	}
}

func TestContinuationRoundTrip(t *testing.T) {
	digest := bytes.Repeat([]byte{0xab}, 32)
	tests := []struct {
		name string
		in   parked
	}{
		{"rich pending", parked{Agent: "assistant", ThreadID: "thr_1", Digest: digest, Pending: richPending()}},
		{"owner", parked{Agent: "assistant", ThreadID: "thr_1", Digest: digest, Owner: "token:alice"}},
		{"nil pending", parked{Agent: "assistant", ThreadID: "thr_1", Digest: digest}},
		{"pending without calls (parked before a model call)", parked{Agent: "a", ThreadID: "t", Digest: digest, Pending: &runtime.Pending{Step: 3, Turn: 1, StepInTurn: 3, StepID: "step_3"}}},
		{"empty names and digest", parked{Pending: &runtime.Pending{}}},
		{"explicit expiry is kept", parked{Agent: "a", ExpiresAt: testT0.Add(90 * time.Minute)}},
		{"expiry in another zone, with nanoseconds", parked{Agent: "a", ExpiresAt: time.Date(2026, 3, 1, 14, 0, 0, 123456789, time.FixedZone("X", 3600))}},
		// A steer's tool result travels as the transcript carries it: its JSON as a Value,
		// which comes back as wire.ValueToJSON writes it, the form it entered the run in.
		{"steer with every kind of part", parked{Agent: "a", Pending: &runtime.Pending{Steers: []runtime.Steer{{Seq: 1, Message: runtime.Message{
			ID: "msg_s", Role: runtime.RoleUser, Parts: []runtime.Part{
				{Kind: runtime.PartText, ID: "p1", Text: "see"},
				{Kind: runtime.PartReasoning, Text: "hm", State: []byte{1}},
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_9", Name: "x", Arguments: "{}"}},
				{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{CallID: "call_9", Name: "x", Output: runtime.Output{
					JSON: json.RawMessage(`{"a":[1,"\u003cb\u003e"],"b":null}`), Media: []runtime.Media{{MIMEType: "text/plain", Data: []byte("hi")}},
				}}},
				{Kind: runtime.PartToolResult, ToolResult: runtime.ToolResult{CallID: "call_8", Output: runtime.ErrorOutput("failed")}},
				{Kind: runtime.PartMedia, Media: runtime.Media{MIMEType: "image/png", URI: "https://example.com/a.png", Name: "a.png"}},
			},
		}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCodec(testKey, time.Hour, fixedClock(testT0))
			in := tt.in
			wantExpiry := in.ExpiresAt
			if wantExpiry.IsZero() {
				wantExpiry = testT0.Add(time.Hour)
			}
			b, err := c.seal(&in)
			if err != nil {
				t.Fatalf("seal: %v", err)
			}
			if !in.ExpiresAt.Equal(wantExpiry) {
				t.Errorf("seal set ExpiresAt = %v, want %v", in.ExpiresAt, wantExpiry)
			}
			// Another replica: a codec of its own with the same key.
			got, err := newTestCodec(testKey, 0, fixedClock(testT0)).open(b)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if diff := cmp.Diff(&in, got); diff != "" {
				t.Errorf("open(seal(x)) differs from x (-want +got):\n%s", diff)
			}
			if got.ExpiresAt.Location() != time.UTC {
				t.Errorf("ExpiresAt location = %v, want UTC", got.ExpiresAt.Location())
			}
		})
	}
}

func TestContinuationRoundTripKeepsJSONBytes(t *testing.T) {
	// Checked on its own, byte for byte, since it is the easy one to lose.
	c := newTestCodec(testKey, 0, fixedClock(testT0))
	p := richPending()
	b, err := c.seal(&parked{Agent: "a", Pending: p})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.open(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, call := range p.Calls {
		want, got := call.Result.JSON, got.Pending.Calls[i].Result.JSON
		if !bytes.Equal(want, got) || (want == nil) != (got == nil) {
			t.Errorf("call %d: Result.JSON = %q (nil %t), want %q (nil %t)", i, got, got == nil, want, want == nil)
		}
	}
}

func TestContinuationSealDefaults(t *testing.T) {
	now := testT0
	c := newTestCodec(testKey, 0, func() time.Time { return now })
	ct := &parked{Agent: "a"}
	b, err := c.seal(ct)
	if err != nil {
		t.Fatal(err)
	}
	if want := testT0.Add(24 * time.Hour); !ct.ExpiresAt.Equal(want) {
		t.Errorf("ttl 0: ExpiresAt = %v, want %v", ct.ExpiresAt, want)
	}
	now = testT0.Add(24*time.Hour - time.Nanosecond)
	if _, err := c.open(b); err != nil {
		t.Errorf("open just before the default expiry: %v", err)
	}
	if _, err := c.seal(nil); err == nil {
		t.Error("seal(nil) succeeded")
	}
	if c := newTestCodec(testKey, time.Minute, nil); c.now == nil {
		t.Error("nil now was not replaced by time.Now")
	}
}

func TestContinuationSealRefusesWhatOpenWouldRefuse(t *testing.T) {
	c := newTestCodec(testKey, 0, fixedClock(testT0))
	huge := &runtime.Pending{Calls: []runtime.PendingCall{{
		State:  runtime.CallDone,
		Result: runtime.Output{Media: []runtime.Media{{MIMEType: "image/png", Data: make([]byte, MaxSize)}}},
	}}}
	_, err := c.seal(&parked{Agent: "a", Pending: huge})
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("seal of a %d MiB media result: err = %v, want the size limit", MaxSize>>20, err)
	}
	tests := []struct {
		name string
		ct   *parked
		want string
	}{
		{"expiry past year 9999", &parked{Agent: "a", ExpiresAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "expiry"},
		{"unknown call state", &parked{Pending: &runtime.Pending{Calls: []runtime.PendingCall{{State: 9}}}}, "pending call 0: unknown state 9"},
		{"unknown executor", &parked{Pending: &runtime.Pending{Calls: []runtime.PendingCall{{Call: runtime.ToolCall{ID: "c", Executor: 7}}}}}, "unknown executor 7"},
		{"unknown role", &parked{Pending: &runtime.Pending{Message: runtime.Message{Role: 9}}}, "unknown role 9"},
		{"unknown part kind", &parked{Pending: &runtime.Pending{Steers: []runtime.Steer{{Message: runtime.Message{Parts: []runtime.Part{{Kind: 0}}}}}}}, "steer 0: part 0: unknown kind 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := c.seal(tt.ct)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("seal = %d bytes, %v; want an error containing %q", len(b), err, tt.want)
			}
		})
	}
}

// TestContinuationPayloadFormat pins format 2: a version byte of 2, then an
// agentd.continuation.v1.Continuation naming its digest version and carrying the
// transcript's pieces as agentd.v1 messages, then the MAC.
func TestContinuationPayloadFormat(t *testing.T) {
	b, err := newTestCodec(testKey, time.Hour, fixedClock(testT0)).seal(&parked{
		Agent: "assistant", ThreadID: "thr_1", Digest: []byte{1, 2, 3}, Owner: "token:alice",
		Pending: &runtime.Pending{
			Step: 2, Turn: 1, StepInTurn: 2, StepID: "step_2",
			Message: runtime.Message{ID: "msg_a", Role: runtime.RoleAssistant, Parts: []runtime.Part{
				{Kind: runtime.PartToolCall, ToolCall: runtime.ToolCall{ID: "call_1", Name: "add", Arguments: `{"a":1}`, Executor: runtime.ExecutorServer}},
			}},
			Calls: []runtime.PendingCall{{
				Call:   runtime.ToolCall{ID: "call_1", Name: "add", Arguments: `{"a":1}`, Executor: runtime.ExecutorServer},
				State:  runtime.CallDone,
				Result: runtime.Output{JSON: []byte(`{"sum": 1}`)},
			}},
			Steers: []runtime.Steer{{Seq: 3, Message: runtime.UserMessage("more")}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 2 {
		t.Fatalf("version byte = %d, want 2", b[0])
	}
	var got continuationv1.Continuation
	if err := proto.Unmarshal(b[1:len(b)-continuationMACSize], &got); err != nil {
		t.Fatalf("payload is not an agentd.continuation.v1.Continuation: %v", err)
	}
	call := &agentdv1.ToolCallPart{Id: "call_1", Name: "add", ArgumentsJson: `{"a":1}`, Executor: agentdv1.Executor_EXECUTOR_SERVER}
	want := &continuationv1.Continuation{
		Agent: "assistant", ThreadId: "thr_1", DigestVersion: 1, TranscriptDigest: []byte{1, 2, 3},
		ExpiresAt: timestamppb.New(testT0.Add(time.Hour)), Owner: "token:alice",
		Pending: &continuationv1.Pending{
			Step: 2, Turn: 1, StepInTurn: 2, StepId: "step_2",
			Message: &agentdv1.Message{Id: "msg_a", Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
				{Kind: &agentdv1.Part_ToolCall{ToolCall: call}},
			}},
			Calls: []*continuationv1.PendingCall{{
				Call: call, State: continuationv1.CallState_CALL_STATE_DONE,
				Result: &continuationv1.ToolOutput{Json: []byte(`{"sum": 1}`)},
			}},
			Steers: []*continuationv1.Steer{{ClientSeq: 3, Message: &agentdv1.Message{
				Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "more"}}},
			}}},
		},
	}
	if diff := cmp.Diff(want, &got, protocmp.Transform()); diff != "" {
		t.Errorf("payload (-want +got):\n%s", diff)
	}
}

// sealed returns a real continuation signed with testKey at testT0, valid for an hour.
func sealed(t testing.TB) []byte {
	t.Helper()
	b, err := newTestCodec(testKey, time.Hour, fixedClock(testT0)).seal(
		&parked{Agent: "assistant", ThreadID: "thr_1", Digest: bytes.Repeat([]byte{7}, 32), Pending: richPending()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signedPayload returns payload under version v, signed with testKey.
func signedPayload(v byte, payload []byte) []byte {
	return NewCodec(testKey, 0, nil).sign(append([]byte{v}, payload...))
}

// payloadOf returns a format 2 payload, changed by change.
func payloadOf(t testing.TB, change func(*continuationv1.Continuation)) []byte {
	t.Helper()
	pc := &continuationv1.Continuation{Agent: "assistant", DigestVersion: 1, ExpiresAt: timestamppb.New(testT0.Add(time.Hour))}
	change(pc)
	b, err := proto.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestContinuationOpenRefuses(t *testing.T) {
	good := sealed(t)
	other, err := newTestCodec(testKey, time.Hour, fixedClock(testT0)).seal(&parked{Agent: "other", ThreadID: "thr_2"})
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := newTestCodec(otherTestKey, time.Hour, fixedClock(testT0)).seal(
		&parked{Agent: "assistant", ThreadID: "thr_1", Digest: bytes.Repeat([]byte{7}, 32), Pending: richPending()})
	if err != nil {
		t.Fatal(err)
	}
	withVersion := func(v byte) []byte {
		// A correctly signed continuation of another version, as a newer replica would
		// write it.
		return signedPayload(v, good[1:len(good)-continuationMACSize])
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }

	tests := []struct {
		name    string
		in      []byte
		want    error
		message string // in the error text
	}{
		{"nil", nil, ErrMalformed, "empty"},
		{"empty", []byte{}, ErrMalformed, "empty"},
		{"version only", []byte{continuationVersion}, ErrMalformed, "too short"},
		{"one byte short of version and MAC", good[:continuationMACSize], ErrMalformed, "too short"},
		{"version and MAC, no payload", append([]byte{continuationVersion}, good[len(good)-continuationMACSize:]...), ErrForged, "signature"},
		{"truncated by one byte", good[:len(good)-1], ErrForged, "signature"},
		{"truncated to half", good[:len(good)/2], ErrForged, "signature"},
		{"MAC removed", good[:len(good)-continuationMACSize], ErrForged, "signature"},
		{"byte appended", append(bytes.Clone(good), 0), ErrForged, "signature"},
		{"MAC zeroed", mutate(func(b []byte) []byte { clear(b[len(b)-continuationMACSize:]); return b }), ErrForged, "signature"},
		{"MAC of another continuation", mutate(func(b []byte) []byte {
			copy(b[len(b)-continuationMACSize:], other[len(other)-continuationMACSize:])
			return b
		}), ErrForged, "signature"},
		{"payload edited, MAC kept", mutate(func(b []byte) []byte {
			return bytes.Replace(b, []byte("assistant"), []byte("superuser"), 1)
		}), ErrForged, "signature"},
		// Replicas holding different keys is the usual cause: the error names the setting.
		{"signed with another key", otherKey, ErrForged, "replicas hold different keys), or altered; every replica that may resume a run needs the same key (AGENTD_CONTINUATION_KEY or --continuation-key-file)"},
		{"version 0", withVersion(0), ErrMalformed, "unsupported version 0"},
		{"version 3, correctly signed", withVersion(3), ErrMalformed, "unsupported version 3"},
		{"not a continuation", []byte("hello, this is not a continuation at all"), ErrMalformed, "unsupported version 104"},
		{"over the size limit", append([]byte{continuationVersion}, make([]byte, MaxSize)...), ErrMalformed, "limit"},
		// Signed payloads that do not decode: only a holder of the key makes these.
		{"format 2 payload under version 1", withVersion(continuationVersionJSON), ErrMalformed, "format 1, which an earlier release sealed and this one no longer reads"},
		{"format 1 payload under version 2", signedPayload(continuationVersion, []byte(`{"a":"assistant","x":"2026-03-01T13:00:00Z"}`)), ErrMalformed, "signed payload (version 2) does not decode"},
		{"digest of an unknown projection", signedPayload(continuationVersion, payloadOf(t, func(pc *continuationv1.Continuation) { pc.DigestVersion = 2 })), ErrMalformed, "transcript digest version 2, which this server does not take"},
		{"digest of format 1 in format 2", signedPayload(continuationVersion, payloadOf(t, func(pc *continuationv1.Continuation) { pc.DigestVersion = 1<<32 - 1 })), ErrMalformed, "transcript digest version"},
		{"no expiry", signedPayload(continuationVersion, payloadOf(t, func(pc *continuationv1.Continuation) { pc.ExpiresAt = nil })), ErrMalformed, "no expiry"},
		{"expiry out of range", signedPayload(continuationVersion, payloadOf(t, func(pc *continuationv1.Continuation) { pc.ExpiresAt.Seconds = 1 << 40 })), ErrMalformed, "expiry"},
		{"unknown call state", signedPayload(continuationVersion, payloadOf(t, func(pc *continuationv1.Continuation) {
			pc.Pending = &continuationv1.Pending{Calls: []*continuationv1.PendingCall{{State: 7}}}
		})), ErrMalformed, "pending call 0: unknown state 7"},
		{"part with no kind", signedPayload(continuationVersion, payloadOf(t, func(pc *continuationv1.Continuation) {
			pc.Pending = &continuationv1.Pending{Message: &agentdv1.Message{Parts: []*agentdv1.Part{{Id: "p"}}}}
		})), ErrMalformed, "pending message: part 0: no kind"},
	}
	c := newTestCodec(testKey, time.Hour, fixedClock(testT0))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.open(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("open = %v, %v; want error wrapping %v", got, err, tt.want)
			}
			if got != nil {
				t.Errorf("open returned %+v with its error", got)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not say %q", err, tt.message)
			}
		})
	}
	if _, err := c.open(good); err != nil {
		t.Fatalf("the untouched continuation: %v", err)
	}
}

func TestContinuationEveryBitFlipIsRefused(t *testing.T) {
	c := newTestCodec(testKey, time.Hour, fixedClock(testT0))
	for name, good := range map[string][]byte{"format 2": sealed(t)} {
		for i := range good {
			for bit := range 8 {
				b := bytes.Clone(good)
				b[i] ^= 1 << bit
				got, err := c.open(b)
				want := ErrForged
				if i == 0 && b[0] != continuationVersion {
					want = ErrMalformed // the version byte
				}
				if !errors.Is(err, want) || got != nil {
					t.Fatalf("%s: byte %d bit %d flipped: open = %v, %v; want error wrapping %v", name, i, bit, got, err, want)
				}
			}
		}
	}
}

func TestContinuationExpiry(t *testing.T) {
	now := testT0
	c := newTestCodec(testKey, time.Hour, func() time.Time { return now })
	b, err := c.seal(&parked{Agent: "a", ThreadID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		at   time.Time
		want error
	}{
		{"at sealing", testT0, nil},
		{"before sealing (clock skew between replicas)", testT0.Add(-time.Minute), nil},
		{"a nanosecond before expiry", testT0.Add(time.Hour - time.Nanosecond), nil},
		{"at expiry", testT0.Add(time.Hour), ErrExpired},
		{"a day later", testT0.Add(25 * time.Hour), ErrExpired},
	}
	for _, format := range []struct {
		name string
		b    []byte
	}{{"format 2", b}} {
		for _, tt := range tests {
			t.Run(format.name+"/"+tt.name, func(t *testing.T) {
				now = tt.at
				got, err := c.open(format.b)
				if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
					t.Fatalf("open = %v; want %v", err, tt.want)
				}
				if err != nil {
					if got != nil {
						t.Errorf("open returned %+v with its error", got)
					}
					want := "continuation expired at 2026-03-01T13:00:00Z; start a new run"
					if !strings.HasPrefix(err.Error(), want) {
						t.Errorf("error = %q, want it to start with %q", err, want)
					}
				}
			})
		}
	}

	// The MAC is checked first: an expired continuation from another key is forged.
	now = testT0.Add(48 * time.Hour)
	forged, err := newTestCodec(otherTestKey, time.Hour, fixedClock(testT0)).seal(&parked{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.open(forged); !errors.Is(err, ErrForged) {
		t.Errorf("expired and forged: open = %v, want forged", err)
	}
}

// hasherOf returns a Hasher fed msgs.
func hasherOf(t testing.TB, msgs []*agentdv1.Message) *Hasher {
	t.Helper()
	h := NewHasher()
	for _, m := range msgs {
		if err := h.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestContinuationCheck(t *testing.T) {
	same := hasherOf(t, testTranscript(t))
	digest := same.Sum()
	changed := testTranscript(t)
	changed[0].Parts[0].Kind = &agentdv1.Part_Text{Text: "add 1 and 3"}
	other := hasherOf(t, changed)
	ct := &parked{Agent: "assistant", ThreadID: "thr_1", Digest: digest}
	tests := []struct {
		name       string
		ct         *parked
		agent      string
		thread     string
		transcript *Hasher
		wantErr    bool
		messages   []string
	}{
		{name: "match", ct: ct, agent: "assistant", thread: "thr_1", transcript: same},
		{name: "other agent", ct: ct, agent: "coder", thread: "thr_1", transcript: same, wantErr: true,
			messages: []string{`agent "assistant", not "coder"`}},
		{name: "other thread", ct: ct, agent: "assistant", thread: "thr_2", transcript: same, wantErr: true,
			messages: []string{`thread "thr_1", not "thr_2"`}},
		{name: "no thread", ct: ct, agent: "assistant", thread: "", transcript: same, wantErr: true,
			messages: []string{`thread "thr_1", not ""`}},
		{name: "other transcript", ct: ct, agent: "assistant", thread: "thr_1", transcript: other, wantErr: true,
			messages: []string{"messages sent back differ"}},
		{name: "no messages", ct: ct, agent: "assistant", thread: "thr_1", transcript: NewHasher(), wantErr: true,
			messages: []string{"messages sent back differ"}},
		{name: "no digest", ct: &parked{Agent: "assistant", ThreadID: "thr_1"}, agent: "assistant", thread: "thr_1", transcript: same, wantErr: true,
			messages: []string{"messages sent back differ"}},
		{name: "truncated digest", ct: &parked{Agent: "assistant", ThreadID: "thr_1", Digest: digest[:31]}, agent: "assistant", thread: "thr_1", transcript: same, wantErr: true,
			messages: []string{"messages sent back differ"}},
		{name: "everything differs", ct: ct, agent: "coder", thread: "thr_2", transcript: other, wantErr: true,
			messages: []string{"agent", "thread", "messages"}},
		{name: "nil continuation", ct: nil, agent: "assistant", thread: "thr_1", transcript: same, wantErr: true,
			messages: []string{"no continuation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ct.check(tt.agent, tt.thread, tt.transcript)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("check = %v, want an error wrapping ErrMismatch", err)
			}
			for _, m := range tt.messages {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
}

// The format 1 fixture is a continuation sealed by the release that wrote format 1 (JSON),
// before format 2 existed, with testKey. This release refuses it, saying so.
const legacyFixturePath = "testdata/v1-json.bin"

func legacyFixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(legacyFixturePath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A continuation resumes for its run's owner alone; one without an owner (a run started
// anonymously, or a continuation sealed before owners were recorded) resumes for anyone.
func TestContinuationCheckCaller(t *testing.T) {
	c := newTestCodec(testKey, time.Hour, fixedClock(testT0))
	open := func(b []byte) *parked {
		t.Helper()
		ct, err := c.open(b)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	seal := func(owner string) *parked {
		t.Helper()
		b, err := c.seal(&parked{Agent: "assistant", Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		return open(b)
	}
	tests := []struct {
		name string
		ct   *parked
		who  string
		ok   bool
	}{
		{"the owner", seal("token:alice"), "token:alice", true},
		{"another caller", seal("token:alice"), "token:bob", false},
		{"an anonymous caller", seal("token:alice"), "", false},
		{"an owner whose name is not UTF-8", seal("cert:\xff"), "cert:\xff", true},
		{"anonymous run", seal(""), "token:bob", true},
		{"format 2 sealed without an owner", open(sealed(t)), "token:bob", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ct.checkCaller(tt.who)
			if tt.ok != (err == nil) {
				t.Fatalf("checkCaller(%q) = %v, want ok %t", tt.who, err, tt.ok)
			}
			if err != nil && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "another caller") || strings.Contains(err.Error(), "alice")) {
				t.Errorf("checkCaller(%q) = %v, want a mismatch saying it is another caller's, without naming the owner", tt.who, err)
			}
		})
	}
}

func TestContinuationFormat1IsRefused(t *testing.T) {
	b := legacyFixture(t)
	if b[0] != continuationVersionJSON {
		t.Fatalf("fixture version byte = %d, want %d", b[0], continuationVersionJSON)
	}
	got, err := newTestCodec(testKey, 0, fixedClock(testT0)).open(b)
	if !errors.Is(err, ErrMalformed) || got != nil || !strings.Contains(err.Error(), "format 1, which an earlier release sealed and this one no longer reads; start a new run with the transcript") {
		t.Errorf("open = %v, %v; want malformed, saying format 1 is no longer read", got, err)
	}
}

func TestContinuationKey(t *testing.T) {
	raw := "0123456789abcdef0123456789abcdef" // 32 bytes
	rawKey := []byte(raw)
	b64 := "base64:" + base64.StdEncoding.EncodeToString(rawKey)
	hx := "hex:" + hex.EncodeToString(rawKey)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	short := "too-short-a-secret-0123456789" // 29 bytes

	tests := []struct {
		name    string
		value   string
		file    string
		want    []byte
		wantErr string // in the error; the key must never be
	}{
		{name: "raw value", value: raw, want: rawKey},
		{name: "longer raw value", value: raw + raw, want: []byte(raw + raw)},
		{name: "base64 value", value: b64, want: rawKey},
		{name: "hex value", value: hx, want: rawKey},
		{name: "upper-case hex value", value: "hex:" + strings.ToUpper(hex.EncodeToString(rawKey)), want: rawKey},
		{name: "value wins over file", value: hx, file: file("ignored", "base64:AAAA\n"), want: rawKey},
		{name: "file, trailing newline trimmed", file: file("raw", raw+"\n"), want: rawKey},
		{name: "file, CRLF trimmed", file: file("crlf", b64+"\r\n"), want: rawKey},
		{name: "file, hex", file: file("hex", hx), want: rawKey},
		{name: "short raw value", value: short, wantErr: "key is 29 bytes, want at least 32"},
		{name: "short base64 value", value: "base64:" + base64.StdEncoding.EncodeToString([]byte(short)), wantErr: "key is 29 bytes, want at least 32"},
		{name: "short hex value", value: "hex:" + hex.EncodeToString([]byte(short)), wantErr: "key is 29 bytes, want at least 32"},
		{name: "invalid base64", value: "base64:" + strings.Repeat("!", 44), wantErr: "not valid standard base64"},
		{name: "url-safe base64", value: "base64:" + base64.URLEncoding.EncodeToString(append(rawKey, 0xfb, 0xff)), wantErr: "not valid standard base64"},
		{name: "invalid hex", value: "hex:" + strings.Repeat("zq", 32), wantErr: "not valid hex"},
		{name: "odd hex", value: "hex:" + hex.EncodeToString(rawKey)[1:], wantErr: "not valid hex"},
		{name: "empty base64", value: "base64:", wantErr: "key is 0 bytes"},
		{name: "short file", file: file("short", short+"\n"), wantErr: "key is 29 bytes"},
		{name: "empty file", file: file("empty", "\n"), wantErr: "empty"},
		{name: "missing file", file: filepath.Join(dir, "missing"), wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, random, err := Key(tt.value, tt.file)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("continuationKey = %x, %t, nil; want an error containing %q", key, random, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not say %q", err, tt.wantErr)
				}
				for _, secret := range []string{short, "zq", strings.Repeat("!", 10)} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q quotes the key", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("continuationKey: %v", err)
			}
			if random {
				t.Error("random = true for a configured key")
			}
			if !bytes.Equal(key, tt.want) {
				t.Errorf("key = %q, want %q", key, tt.want)
			}
		})
	}

	t.Run("random", func(t *testing.T) {
		k1, r1, err1 := Key("", "")
		k2, r2, err2 := Key("", "")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !r1 || !r2 {
			t.Error("random = false with neither value nor file")
		}
		if len(k1) != 32 || len(k2) != 32 {
			t.Errorf("random keys of %d and %d bytes, want 32", len(k1), len(k2))
		}
		if bytes.Equal(k1, k2) {
			t.Error("two random keys are equal")
		}
	})
}

func FuzzContinuationOpen(f *testing.F) {
	good, legacy := sealed(f), legacyFixture(f)
	f.Add(legacy)
	for _, b := range [][]byte{good} {
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(b[:len(b)-continuationMACSize])
		f.Add(append(bytes.Clone(b), 0))
		for i := range b {
			c := bytes.Clone(b)
			c[i] ^= 1 << (i % 8)
			f.Add(c)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{continuationVersion})
	if other, err := newTestCodec(otherTestKey, time.Hour, fixedClock(testT0)).seal(&parked{Agent: "a"}); err == nil {
		f.Add(other)
	}
	c := newTestCodec(testKey, time.Hour, fixedClock(testT0))
	want := map[string]*parked{}
	for _, b := range [][]byte{good} {
		ct, err := c.open(b)
		if err != nil {
			f.Fatal(err)
		}
		want[string(b)] = ct
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := c.open(b)
		if w, ok := want[string(b)]; ok {
			if err != nil {
				t.Fatalf("a sealed continuation was refused: %v", err)
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Fatalf("open differs (-want +got):\n%s", diff)
			}
			return
		}
		if err == nil || got != nil {
			t.Fatalf("open accepted %d bytes that were never sealed: %+v", len(b), got)
		}
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrForged) {
			t.Fatalf("open = %v, want malformed or forged", err)
		}
	})
}

// FuzzContinuationPayload reaches what the MAC keeps FuzzContinuationOpen from: the
// decoding of signed payloads. Only a holder of the key can produce these, but decoding
// must still never panic.
func FuzzContinuationPayload(f *testing.F) {
	good := sealed(f)
	f.Add(good[1 : len(good)-continuationMACSize])
	f.Add([]byte{})
	c := newTestCodec(testKey, time.Hour, fixedClock(testT0))
	f.Fuzz(func(t *testing.T, payload []byte) {
		got, err := c.open(signedPayload(continuationVersion, payload))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrExpired) {
				t.Fatalf("signed payload: open = %v, want malformed or expired", err)
			}
			return
		}
		// What opens seals again and opens to the same value.
		first := *got
		again, err := c.seal(got)
		if err != nil {
			return // an expiry past year 9999, say
		}
		got2, err := c.open(again)
		if err != nil {
			t.Fatalf("re-sealed continuation: %v", err)
		}
		// A nil and an empty slice both come back nil: the format does not keep them apart.
		if diff := cmp.Diff(&first, got2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("re-seal differs (-first +second):\n%s", diff)
		}
	})
}
