package service

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// No TestMain here: server_test.go (package service_test) declares one with
// goleak.VerifyTestMain, and it covers this file too, as both packages build into one test
// binary, which allows a single TestMain.

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
		in   continuation
	}{
		{"rich pending", continuation{Agent: "assistant", ThreadID: "thr_1", Digest: digest, Pending: richPending()}},
		{"nil pending", continuation{Agent: "assistant", ThreadID: "thr_1", Digest: digest}},
		{"pending without calls (parked before a model call)", continuation{Agent: "a", ThreadID: "t", Digest: digest, Pending: &runtime.Pending{Step: 3, Turn: 1, StepInTurn: 3, StepID: "step_3"}}},
		{"empty names and digest", continuation{Pending: &runtime.Pending{}}},
		{"explicit expiry is kept", continuation{Agent: "a", ExpiresAt: testT0.Add(90 * time.Minute)}},
		{"expiry in another zone, with nanoseconds", continuation{Agent: "a", ExpiresAt: time.Date(2026, 3, 1, 14, 0, 0, 123456789, time.FixedZone("X", 3600))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newContinuationCodec(testKey, time.Hour, fixedClock(testT0))
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
			got, err := newContinuationCodec(testKey, 0, fixedClock(testT0)).open(b)
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
	c := newContinuationCodec(testKey, 0, fixedClock(testT0))
	p := richPending()
	b, err := c.seal(&continuation{Agent: "a", Pending: p})
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
	c := newContinuationCodec(testKey, 0, func() time.Time { return now })
	ct := &continuation{Agent: "a"}
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
	if c := newContinuationCodec(testKey, time.Minute, nil); c.now == nil {
		t.Error("nil now was not replaced by time.Now")
	}
}

func TestContinuationSealRefusesWhatOpenWouldRefuse(t *testing.T) {
	c := newContinuationCodec(testKey, 0, fixedClock(testT0))
	huge := &runtime.Pending{Calls: []runtime.PendingCall{{
		State:  runtime.CallDone,
		Result: runtime.Output{Media: []runtime.Media{{MIMEType: "image/png", Data: make([]byte, 3<<20)}}},
	}}}
	_, err := c.seal(&continuation{Agent: "a", Pending: huge})
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("seal of a %d MiB media result: err = %v, want the size limit", 3, err)
	}
	_, err = c.seal(&continuation{Agent: "a", ExpiresAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err == nil {
		t.Error("seal with an expiry past year 9999 succeeded")
	}
}

// sealed returns a real continuation signed with testKey at testT0, valid for an hour.
func sealed(t testing.TB) []byte {
	t.Helper()
	b, err := newContinuationCodec(testKey, time.Hour, fixedClock(testT0)).seal(
		&continuation{Agent: "assistant", ThreadID: "thr_1", Digest: bytes.Repeat([]byte{7}, 32), Pending: richPending()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestContinuationOpenRefuses(t *testing.T) {
	good := sealed(t)
	other, err := newContinuationCodec(testKey, time.Hour, fixedClock(testT0)).seal(&continuation{Agent: "other", ThreadID: "thr_2"})
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := newContinuationCodec(otherTestKey, time.Hour, fixedClock(testT0)).seal(
		&continuation{Agent: "assistant", ThreadID: "thr_1", Digest: bytes.Repeat([]byte{7}, 32), Pending: richPending()})
	if err != nil {
		t.Fatal(err)
	}
	withVersion := func(v byte) []byte {
		// A correctly signed continuation of another version, as a newer replica would
		// write it.
		b := bytes.Clone(good[:len(good)-continuationMACSize])
		b[0] = v
		return newContinuationCodec(testKey, 0, nil).sign(b)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }

	tests := []struct {
		name    string
		in      []byte
		want    error
		message string // in the error text
	}{
		{"nil", nil, errContinuationMalformed, "empty"},
		{"empty", []byte{}, errContinuationMalformed, "empty"},
		{"version only", []byte{continuationVersion}, errContinuationMalformed, "too short"},
		{"one byte short of version and MAC", good[:continuationMACSize], errContinuationMalformed, "too short"},
		{"version and MAC, no payload", append([]byte{continuationVersion}, good[len(good)-continuationMACSize:]...), errContinuationForged, "signature"},
		{"truncated by one byte", good[:len(good)-1], errContinuationForged, "signature"},
		{"truncated to half", good[:len(good)/2], errContinuationForged, "signature"},
		{"MAC removed", good[:len(good)-continuationMACSize], errContinuationForged, "signature"},
		{"byte appended", append(bytes.Clone(good), 0), errContinuationForged, "signature"},
		{"MAC zeroed", mutate(func(b []byte) []byte { clear(b[len(b)-continuationMACSize:]); return b }), errContinuationForged, "signature"},
		{"MAC of another continuation", mutate(func(b []byte) []byte {
			copy(b[len(b)-continuationMACSize:], other[len(other)-continuationMACSize:])
			return b
		}), errContinuationForged, "signature"},
		{"payload edited, MAC kept", mutate(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"a":"assistant"`), []byte(`"a":"superuser"`), 1)
		}), errContinuationForged, "signature"},
		// Replicas holding different keys is the usual cause: the error names the setting.
		{"signed with another key", otherKey, errContinuationForged, "replicas hold different keys), or altered; every replica that may resume a run needs the same key (AGENTD_CONTINUATION_KEY or --continuation-key-file)"},
		{"version 0", withVersion(0), errContinuationMalformed, "unsupported version 0"},
		{"version 2, correctly signed", withVersion(2), errContinuationMalformed, "unsupported version 2"},
		{"not a continuation", []byte("hello, this is not a continuation at all"), errContinuationMalformed, "unsupported version 104"},
		{"over the size limit", append([]byte{continuationVersion}, make([]byte, maxContinuationSize)...), errContinuationMalformed, "limit"},
	}
	c := newContinuationCodec(testKey, time.Hour, fixedClock(testT0))
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
	good := sealed(t)
	c := newContinuationCodec(testKey, time.Hour, fixedClock(testT0))
	for i := range good {
		for bit := range 8 {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			got, err := c.open(b)
			want := errContinuationForged
			if i == 0 {
				want = errContinuationMalformed // the version byte
			}
			if !errors.Is(err, want) || got != nil {
				t.Fatalf("byte %d bit %d flipped: open = %v, %v; want error wrapping %v", i, bit, got, err, want)
			}
		}
	}
}

func TestContinuationExpiry(t *testing.T) {
	now := testT0
	c := newContinuationCodec(testKey, time.Hour, func() time.Time { return now })
	b, err := c.seal(&continuation{Agent: "a", ThreadID: "t"})
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
		{"at expiry", testT0.Add(time.Hour), errContinuationExpired},
		{"a day later", testT0.Add(25 * time.Hour), errContinuationExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = tt.at
			got, err := c.open(b)
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

	// The MAC is checked first: an expired continuation from another key is forged.
	now = testT0.Add(48 * time.Hour)
	forged, err := newContinuationCodec(otherTestKey, time.Hour, fixedClock(testT0)).seal(&continuation{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.open(forged); !errors.Is(err, errContinuationForged) {
		t.Errorf("expired and forged: open = %v, want forged", err)
	}
}

func TestContinuationCheck(t *testing.T) {
	digest := bytes.Repeat([]byte{1}, 32)
	otherDigest := bytes.Repeat([]byte{2}, 32)
	ct := &continuation{Agent: "assistant", ThreadID: "thr_1", Digest: digest}
	tests := []struct {
		name     string
		ct       *continuation
		agent    string
		thread   string
		digest   []byte
		wantErr  bool
		messages []string
	}{
		{name: "match", ct: ct, agent: "assistant", thread: "thr_1", digest: digest},
		{name: "other agent", ct: ct, agent: "coder", thread: "thr_1", digest: digest, wantErr: true,
			messages: []string{`agent "assistant", not "coder"`}},
		{name: "other thread", ct: ct, agent: "assistant", thread: "thr_2", digest: digest, wantErr: true,
			messages: []string{`thread "thr_1", not "thr_2"`}},
		{name: "no thread", ct: ct, agent: "assistant", thread: "", digest: digest, wantErr: true,
			messages: []string{`thread "thr_1", not ""`}},
		{name: "other transcript", ct: ct, agent: "assistant", thread: "thr_1", digest: otherDigest, wantErr: true,
			messages: []string{"messages sent back differ"}},
		{name: "no digest", ct: ct, agent: "assistant", thread: "thr_1", digest: nil, wantErr: true,
			messages: []string{"messages sent back differ"}},
		{name: "truncated digest", ct: ct, agent: "assistant", thread: "thr_1", digest: digest[:31], wantErr: true,
			messages: []string{"messages sent back differ"}},
		{name: "everything differs", ct: ct, agent: "coder", thread: "thr_2", digest: otherDigest, wantErr: true,
			messages: []string{"agent", "thread", "messages"}},
		{name: "nil continuation", ct: nil, agent: "assistant", thread: "thr_1", digest: digest, wantErr: true,
			messages: []string{"no continuation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ct.check(tt.agent, tt.thread, tt.digest)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, errContinuationMismatch) {
				t.Fatalf("check = %v, want an error wrapping errContinuationMismatch", err)
			}
			for _, m := range tt.messages {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
}

func testTranscript(t testing.TB) []*agentdv1.Message {
	t.Helper()
	v, err := structpb.NewValue(map[string]any{"sum": 3, "items": []any{"a", "b"}, "z": true, "a": nil})
	if err != nil {
		t.Fatal(err)
	}
	return []*agentdv1.Message{
		{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "add 1 and 2"}}}},
		{Id: "msg_1", Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
			{Id: "msg_r", Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: "easy", State: []byte{0, 1, 2}}}},
			{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "call_1", Name: "add", ArgumentsJson: `{"a":1,"b":2}`, Executor: agentdv1.Executor_EXECUTOR_SERVER}}},
		}},
		{Id: "msg_2", Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
			{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "call_1", Name: "add",
				Output: &agentdv1.ToolResultPart_Json{Json: v},
				Media:  []*agentdv1.MediaPart{{MimeType: "image/png", Data: []byte{9, 9}}}}}},
		}},
		{Id: "msg_3", Role: agentdv1.Role_ROLE_ASSISTANT, Parts: []*agentdv1.Part{
			{Id: "msg_t", Kind: &agentdv1.Part_Text{Text: "1 + 2 = 3"}},
			{Kind: &agentdv1.Part_Media{Media: &agentdv1.MediaPart{MimeType: "image/png", Uri: "https://example.com/a.png"}}},
		}, Partial: true},
	}
}

func TestTranscriptDigestStable(t *testing.T) {
	a, err := transcriptDigest(testTranscript(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 32 {
		t.Fatalf("digest is %d bytes, want 32", len(a))
	}
	// Same messages, built again (the map in the structpb.Value is re-created, so its
	// iteration order differs from run to run); and the same after a wire round trip, as a
	// client sending them back would produce.
	for i := range 20 {
		msgs := testTranscript(t)
		if i%2 == 1 {
			for j, m := range msgs {
				b, err := proto.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				msgs[j] = &agentdv1.Message{}
				if err := proto.Unmarshal(b, msgs[j]); err != nil {
					t.Fatal(err)
				}
			}
		}
		b, err := transcriptDigest(msgs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("attempt %d: digest %x, want %x", i, b, a)
		}
	}
}

func TestTranscriptDigestChanges(t *testing.T) {
	base, err := transcriptDigest(testTranscript(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(msgs []*agentdv1.Message) []*agentdv1.Message
	}{
		{"message id", func(m []*agentdv1.Message) []*agentdv1.Message { m[1].Id = "msg_x"; return m }},
		{"role", func(m []*agentdv1.Message) []*agentdv1.Message { m[0].Role = agentdv1.Role_ROLE_SYSTEM; return m }},
		{"partial flag", func(m []*agentdv1.Message) []*agentdv1.Message { m[3].Partial = false; return m }},
		{"user text", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[0].Parts[0].Kind = &agentdv1.Part_Text{Text: "add 1 and 3"}
			return m
		}},
		{"part id", func(m []*agentdv1.Message) []*agentdv1.Message { m[3].Parts[0].Id = "msg_u"; return m }},
		{"reasoning state", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[1].Parts[0].GetReasoning().State = []byte{0, 1, 3}
			return m
		}},
		{"tool call arguments (whitespace)", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[1].Parts[1].GetToolCall().ArgumentsJson = `{"a":1, "b":2}`
			return m
		}},
		{"executor", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[1].Parts[1].GetToolCall().Executor = agentdv1.Executor_EXECUTOR_CLIENT
			return m
		}},
		{"tool result json", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[2].Parts[0].GetToolResult().GetJson().GetStructValue().Fields["sum"] = structpb.NewNumberValue(4)
			return m
		}},
		{"tool result error flag", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[2].Parts[0].GetToolResult().IsError = true
			return m
		}},
		{"media bytes", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[2].Parts[0].GetToolResult().Media[0].Data = []byte{9, 8}
			return m
		}},
		{"text became reasoning", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[3].Parts[0].Kind = &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: "1 + 2 = 3"}}
			return m
		}},
		{"message dropped", func(m []*agentdv1.Message) []*agentdv1.Message { return m[:3] }},
		{"message added", func(m []*agentdv1.Message) []*agentdv1.Message {
			return append(m, &agentdv1.Message{Role: agentdv1.Role_ROLE_USER})
		}},
		{"messages swapped", func(m []*agentdv1.Message) []*agentdv1.Message { m[2], m[3] = m[3], m[2]; return m }},
		{"parts swapped", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[1].Parts[0], m[1].Parts[1] = m[1].Parts[1], m[1].Parts[0]
			return m
		}},
		{"empty message added", func(m []*agentdv1.Message) []*agentdv1.Message {
			return append(m, &agentdv1.Message{})
		}},
		// Proto concatenates repeated fields: only the length prefix keeps two messages
		// apart from one message holding both messages' parts.
		{"two messages merged into one", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[2].Parts = append(m[2].Parts, m[3].Parts...)
			m[2].Partial = true
			m[2].Id = ""
			m[3].Parts, m[3].Id, m[3].Role = nil, "msg_2", agentdv1.Role_ROLE_TOOL
			return m
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := transcriptDigest(tt.change(testTranscript(t)))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(got, base) {
				t.Errorf("digest unchanged after %s", tt.name)
			}
		})
	}
}

func TestTranscriptDigestMergedMessages(t *testing.T) {
	// The concatenation the length prefix guards against, in its plainest form: these two
	// transcripts have the same bytes when their messages' encodings are concatenated.
	p1 := &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: "a"}}
	p2 := &agentdv1.Part{Kind: &agentdv1.Part_Text{Text: "b"}}
	two := []*agentdv1.Message{{Parts: []*agentdv1.Part{p1}}, {Parts: []*agentdv1.Part{p2}}}
	one := []*agentdv1.Message{{Parts: []*agentdv1.Part{p1, p2}}}
	var cat1, cat2 []byte
	for _, m := range two {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		cat1 = append(cat1, b...)
	}
	cat2, _ = proto.MarshalOptions{Deterministic: true}.Marshal(one[0])
	if !bytes.Equal(cat1, cat2) {
		t.Fatalf("premise: concatenated encodings differ (%x, %x)", cat1, cat2)
	}
	d1, err1 := transcriptDigest(two)
	d2, err2 := transcriptDigest(one)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if bytes.Equal(d1, d2) {
		t.Error("two messages and one message with both parts have the same digest")
	}
}

func TestTranscriptHasherIncremental(t *testing.T) {
	msgs := testTranscript(t)
	h := newTranscriptHasher()
	var sums, wants [][]byte
	for i := 0; i <= len(msgs); i++ {
		want, err := transcriptDigest(msgs[:i])
		if err != nil {
			t.Fatal(err)
		}
		sums, wants = append(sums, h.sum()), append(wants, want)
		// sum twice: reading the digest must not disturb the hasher.
		if got := h.sum(); !bytes.Equal(got, want) {
			t.Errorf("after %d messages: sum = %x, want %x", i, got, want)
		}
		if got := h.sum(); !bytes.Equal(got, want) {
			t.Errorf("after %d messages, second sum = %x, want %x", i, got, want)
		}
		if i < len(msgs) {
			if err := h.add(msgs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A digest handed out earlier is not changed by later adds.
	if diff := cmp.Diff(wants, sums); diff != "" {
		t.Errorf("earlier sums changed (-want +got):\n%s", diff)
	}
}

func TestTranscriptDigestRefuses(t *testing.T) {
	tests := []struct {
		name string
		msgs []*agentdv1.Message
		want string
	}{
		{"nil message", []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER}, nil}, "message 1: transcript message is nil"},
		{"invalid UTF-8", []*agentdv1.Message{{Id: "msg_bad", Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "\xff"}}}}}, `message 0: transcript message "msg_bad"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := transcriptDigest(tt.msgs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("transcriptDigest = %x, %v; want error containing %q", d, err, tt.want)
			}
		})
	}
	// A refused message leaves the hasher as it was.
	h := newTranscriptHasher()
	before := h.sum()
	if err := h.add(invalidUTF8Message()); err == nil {
		t.Fatal("add of invalid UTF-8 succeeded")
	}
	if !bytes.Equal(h.sum(), before) {
		t.Error("a refused add changed the digest")
	}
}

func invalidUTF8Message() *agentdv1.Message {
	return &agentdv1.Message{Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "\xff"}}}}
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
			key, random, err := continuationKey(tt.value, tt.file)
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
		k1, r1, err1 := continuationKey("", "")
		k2, r2, err2 := continuationKey("", "")
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
	good := sealed(f)
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{continuationVersion})
	f.Add(good[:len(good)-1])
	f.Add(good[:len(good)-continuationMACSize])
	f.Add(append(bytes.Clone(good), 0))
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 1 << (i % 8)
		f.Add(b)
	}
	if other, err := newContinuationCodec(otherTestKey, time.Hour, fixedClock(testT0)).seal(&continuation{Agent: "a"}); err == nil {
		f.Add(other)
	}
	c := newContinuationCodec(testKey, time.Hour, fixedClock(testT0))
	want, err := c.open(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := c.open(b)
		if bytes.Equal(b, good) {
			if err != nil {
				t.Fatalf("the sealed continuation was refused: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("open differs (-want +got):\n%s", diff)
			}
			return
		}
		if err == nil || got != nil {
			t.Fatalf("open accepted %d bytes that were never sealed: %+v", len(b), got)
		}
		if !errors.Is(err, errContinuationMalformed) && !errors.Is(err, errContinuationForged) {
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
	f.Add([]byte(`{"x":"2026-03-01T13:00:00Z","p":{"m":{"p":[{"k":1,"c":{},"r":{"o":{"j":"{"}},"m":{}}]},"c":[{"c":{},"o":{"m":[{}]}}]}}`))
	f.Add([]byte(`{"x":"2026-03-01T13:00:00Z","p":{"c":[{"s":300}]}}`))
	f.Add([]byte(`null`))
	c := newContinuationCodec(testKey, time.Hour, fixedClock(testT0))
	f.Fuzz(func(t *testing.T, payload []byte) {
		b := c.sign(append([]byte{continuationVersion}, payload...))
		got, err := c.open(b)
		if err != nil {
			if !errors.Is(err, errContinuationMalformed) && !errors.Is(err, errContinuationExpired) {
				t.Fatalf("signed payload: open = %v, want malformed or expired", err)
			}
			return
		}
		// What opens seals again and opens to the same value.
		again, err := c.seal(got)
		if err != nil {
			return // an expiry past year 9999, say
		}
		got2, err := c.open(again)
		if err != nil {
			t.Fatalf("re-sealed continuation: %v", err)
		}
		// A nil and an empty slice both come back nil: the format does not keep them apart.
		if diff := cmp.Diff(got, got2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("re-seal differs (-first +second):\n%s", diff)
		}
	})
}
