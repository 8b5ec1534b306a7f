package continuation

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// testTranscript is a short transcript of every role.
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

// trickyJSON is a tool's JSON output with what JSON encoders disagree on: key order,
// number forms, escapes, non-ASCII.
func trickyJSON(t testing.TB) *structpb.Value {
	t.Helper()
	v, err := structpb.NewValue(map[string]any{
		"zeta": 1, "alpha": []any{1.5, -0.0, 1e21, 1e-7, 0.1, 12345678901234567890.0, 100, -3},
		"nested": map[string]any{"b": map[string]any{"y": nil, "x": false}, "a": []any{}, "c": map[string]any{}},
		"text":   "quote \" backslash \\ slash / <b>&amp;</b> \u2028 \x01 tab\t é 日本 🙂",
		"ünï":    "key order by code point",
		"big":    math.MaxFloat64, "tiny": 5e-324,
	})
	if err != nil {
		t.Fatal(err)
	}
	// -0.0 in a Go constant is 0: make it negative zero, which some encoders write as -0.
	v.GetStructValue().Fields["alpha"].GetListValue().Values[1] = structpb.NewNumberValue(math.Copysign(0, -1))
	return v
}

// richTranscript sets every field of the transcript's messages to a value that is not
// the default, so that each can be changed on its own.
func richTranscript(t testing.TB) []*agentdv1.Message {
	t.Helper()
	return []*agentdv1.Message{
		{Id: "msg_0", Role: agentdv1.Role_ROLE_SYSTEM, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "be brief"}}}},
		{Id: "msg_1", Role: agentdv1.Role_ROLE_ASSISTANT, Partial: true, Parts: []*agentdv1.Part{
			{Id: "blk_r", Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: "think", State: []byte{0, 1, 0xff}}}},
			{Id: "blk_t", Kind: &agentdv1.Part_Text{Text: "calling"}},
			{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "call_1", Name: "fetch", ArgumentsJson: `{"url": "x"}`, Executor: agentdv1.Executor_EXECUTOR_SERVER}}},
			{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "call_2", Name: "ask", ArgumentsJson: `{}`, Executor: agentdv1.Executor_EXECUTOR_CLIENT}}},
			{Kind: &agentdv1.Part_Media{Media: &agentdv1.MediaPart{MimeType: "image/png", Data: []byte{0x89, 'P'}, Uri: "https://example.com/a.png", Name: "a.png"}}},
		}},
		{Id: "msg_2", Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
			{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "call_1", Name: "fetch",
				Output:  &agentdv1.ToolResultPart_Json{Json: trickyJSON(t)},
				IsError: true,
				Media: []*agentdv1.MediaPart{
					{MimeType: "image/png", Data: []byte{9, 9}, Uri: "https://example.com/b.png", Name: "b.png"},
					{MimeType: "text/plain", Data: []byte("second")},
				}}}},
			{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "call_2", Name: "ask",
				Output: &agentdv1.ToolResultPart_Text{Text: "yes"}}}},
		}},
		{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "thanks"}}}},
	}
}

func mustDigest(t testing.TB, msgs []*agentdv1.Message) []byte {
	t.Helper()
	d, err := Digest(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestTranscriptDigestV1Golden pins projection version 1: a continuation sealed by one
// release is checked by the next, so the digest of a transcript may never change within
// a version, whatever protobuf-go or Go release builds agentd.
func TestTranscriptDigestV1Golden(t *testing.T) {
	tests := []struct {
		name string
		msgs []*agentdv1.Message
		want string
	}{
		{"no messages", nil, "5a1188f0e4eb9907047383cf994d8c70d016402b26cb38f21f26b943f038d061"},
		{"testTranscript", testTranscript(t), "9d023ed292e32d8ecb5d957151f64f153b4ed311faadef0f68422898f312dba6"},
		{"richTranscript", richTranscript(t), "2020848a5c6a4645e00d96b3230d9244dbb94a6da6abdad8530a4e81873ca8bf"},
	}
	for _, tt := range tests {
		if got := hex.EncodeToString(mustDigest(t, tt.msgs)); got != tt.want {
			t.Errorf("%s: digest = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestTranscriptDigestV1Layout spells out the bytes projection version 1 hashes for a
// small transcript, as digest.go describes them.
func TestTranscriptDigestV1Layout(t *testing.T) {
	u64 := func(v uint64) string { return string(binary.BigEndian.AppendUint64(nil, v)) }
	str := func(s string) string { return u64(uint64(len(s))) + s }
	v, err := structpb.NewValue(map[string]any{"b": 1, "a": []any{true, nil}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []*agentdv1.Message{
		{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Id: "ignored", Kind: &agentdv1.Part_Text{Text: "hi"}}}},
		{Id: "msg_1", Role: agentdv1.Role_ROLE_ASSISTANT, Partial: true, Parts: []*agentdv1.Part{
			{Kind: &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: "r", State: []byte{0}}}},
			{Kind: &agentdv1.Part_ToolCall{ToolCall: &agentdv1.ToolCallPart{Id: "c1", Name: "f", ArgumentsJson: "{}", Executor: agentdv1.Executor_EXECUTOR_CLIENT}}},
			{Kind: &agentdv1.Part_Media{Media: &agentdv1.MediaPart{MimeType: "image/png", Data: []byte{1, 2}, Uri: "u", Name: "n"}}},
			{},
		}},
		{Id: "msg_2", Role: agentdv1.Role_ROLE_TOOL, Parts: []*agentdv1.Part{
			{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "c1", Name: "f", Output: &agentdv1.ToolResultPart_Json{Json: v}, IsError: true,
				Media: []*agentdv1.MediaPart{{MimeType: "text/plain", Data: []byte("x")}}}}},
			{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{ToolCallId: "c2"}}},
		}},
	}
	want := "agentd transcript v1\n" +
		// role, id, partial, parts
		u64(2) + str("") + "\x00" + u64(1) +
		"\x02" + str("hi") +
		u64(3) + str("msg_1") + "\x01" + u64(4) +
		"\x03" + str("r") + str("\x00") +
		"\x04" + str("c1") + str("f") + str("{}") +
		"\x06" + str("image/png") + str("\x01\x02") + str("u") + str("n") +
		"\x00" +
		u64(4) + str("msg_2") + "\x00" + u64(2) +
		"\x05" + str("c1") + str("f") + "j" + str(`{"a":[true,null],"b":1}`) + "\x01" + u64(1) + str("text/plain") + str("x") + str("") + str("") +
		"\x05" + str("c2") + str("") + "t" + str("") + "\x00" + u64(0)
	sum := sha256.Sum256([]byte(want))
	if got := mustDigest(t, msgs); !bytes.Equal(got, sum[:]) {
		t.Errorf("digest = %x, want %x, the SHA-256 of\n%q", got, sum, want)
	}
}

func TestTranscriptDigestStable(t *testing.T) {
	a := mustDigest(t, richTranscript(t))
	if len(a) != 32 {
		t.Fatalf("digest is %d bytes, want 32", len(a))
	}
	// Same messages, built again (the maps in the structpb.Value are re-created, so their
	// iteration order differs from run to run); and the same after a wire round trip, as a
	// client sending them back would produce.
	for i := range 20 {
		msgs := richTranscript(t)
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
		if b := mustDigest(t, msgs); !bytes.Equal(a, b) {
			t.Fatalf("attempt %d: digest %x, want %x", i, b, a)
		}
	}
}

// appendUnknown re-encodes m with a field this release does not know appended to its
// encoding, as a peer on a release that added one (to Message, Part or any of theirs)
// would send it.
func appendUnknown(t testing.TB, m proto.Message) {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 1000, protowire.BytesType)
	b = protowire.AppendString(b, "a field from the future")
	b = protowire.AppendTag(b, 1001, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	proto.Reset(m)
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
}

// withNewFields returns msgs with unknown fields appended to every agentd.v1 message in
// them, innermost first, so that each level's encoding carries its own.
func withNewFields(t testing.TB, msgs []*agentdv1.Message) []*agentdv1.Message {
	t.Helper()
	out := make([]*agentdv1.Message, len(msgs))
	for i, m := range msgs {
		m = proto.CloneOf(m)
		for _, p := range m.GetParts() {
			switch k := p.GetKind().(type) {
			case *agentdv1.Part_Reasoning:
				appendUnknown(t, k.Reasoning)
			case *agentdv1.Part_ToolCall:
				appendUnknown(t, k.ToolCall)
			case *agentdv1.Part_ToolResult:
				for _, md := range k.ToolResult.GetMedia() {
					appendUnknown(t, md)
				}
				appendUnknown(t, k.ToolResult)
			case *agentdv1.Part_Media:
				appendUnknown(t, k.Media)
			}
			appendUnknown(t, p)
		}
		appendUnknown(t, m)
		if len(m.ProtoReflect().GetUnknown()) == 0 || len(m.GetParts()[0].ProtoReflect().GetUnknown()) == 0 {
			t.Fatal("premise: the message and its parts carry unknown fields")
		}
		out[i] = m
	}
	return out
}

// TestTranscriptDigestIgnoresFieldsAddedLater: a release that adds a field to Message or
// Part (or anything in them) digests the transcript as the release before it did, so a
// resume verifies whether the client sends the field back or drops it (JSON clients and
// grpcurl drop fields they do not know).
func TestTranscriptDigestIgnoresFieldsAddedLater(t *testing.T) {
	plain := richTranscript(t)
	newer := withNewFields(t, plain)

	dropped := func(name string, drop func(m *agentdv1.Message) (*agentdv1.Message, error)) []*agentdv1.Message {
		out := make([]*agentdv1.Message, len(newer))
		for i, m := range newer {
			d, err := drop(m)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(d.ProtoReflect().GetUnknown()) != 0 {
				t.Fatalf("premise: %s keeps unknown fields", name)
			}
			out[i] = d
		}
		return out
	}
	viaProtoJSON := dropped("protojson", func(m *agentdv1.Message) (*agentdv1.Message, error) {
		b, err := protojson.Marshal(m)
		if err != nil {
			return nil, err
		}
		out := &agentdv1.Message{}
		return out, protojson.Unmarshal(b, out)
	})
	viaDiscard := dropped("DiscardUnknown", func(m *agentdv1.Message) (*agentdv1.Message, error) {
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		out := &agentdv1.Message{}
		return out, proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, out)
	})

	want := mustDigest(t, plain)
	for name, msgs := range map[string][]*agentdv1.Message{
		"the fields sent back":                     newer,
		"the fields dropped by a JSON round trip":  viaProtoJSON,
		"the fields dropped by a client's decoder": viaDiscard,
	} {
		if got := mustDigest(t, msgs); !bytes.Equal(got, want) {
			t.Errorf("%s: digest %x, want %x", name, got, want)
		}
	}

	// Through the codec: a run parked by a server that knew the fields (its transcript
	// had them) resumes with the transcript the client sent back without them.
	c := newTestCodec(testKey, time.Hour, fixedClock(testT0))
	b, err := c.seal(&parked{Agent: "assistant", ThreadID: "thr_1", Digest: mustDigest(t, newer)})
	if err != nil {
		t.Fatal(err)
	}
	ct, err := c.open(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := ct.check("assistant", "thr_1", hasherOf(t, viaProtoJSON)); err != nil {
		t.Errorf("resume without the fields: %v", err)
	}

}

// TestTranscriptDigestSurvivesJSONRoundTrip: a client that keeps the transcript as JSON
// (protojson, grpcurl, a browser) sends back messages that decode to the same digest,
// tool results' JSON values included, however its encoder orders keys and writes
// numbers.
func TestTranscriptDigestSurvivesJSONRoundTrip(t *testing.T) {
	want := mustDigest(t, richTranscript(t))
	roundTrips := []struct {
		name string
		do   func(b []byte) ([]byte, error)
		opts protojson.MarshalOptions
	}{
		{name: "protojson", opts: protojson.MarshalOptions{}},
		{name: "protojson, proto names, unpopulated fields", opts: protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}},
		{name: "protojson, indented", opts: protojson.MarshalOptions{Multiline: true, Indent: "    "}},
		{
			// A client of its own: decodes the JSON into generic values and encodes them
			// again, with its own key order, number forms and escapes.
			name: "a JSON client's own encoder",
			do: func(b []byte) ([]byte, error) {
				var v any
				if err := json.Unmarshal(b, &v); err != nil {
					return nil, err
				}
				return json.Marshal(v)
			},
		},
	}
	for _, rt := range roundTrips {
		t.Run(rt.name, func(t *testing.T) {
			msgs := richTranscript(t)
			for i, m := range msgs {
				b, err := rt.opts.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				if rt.do != nil {
					if b, err = rt.do(b); err != nil {
						t.Fatal(err)
					}
				}
				msgs[i] = &agentdv1.Message{}
				if err := protojson.Unmarshal(b, msgs[i]); err != nil {
					t.Fatalf("%s: %v", b, err)
				}
			}
			if got := mustDigest(t, msgs); !bytes.Equal(got, want) {
				t.Errorf("digest after the round trip %x, want %x", got, want)
			}
		})
	}
}

// projectedV1 lists every field of the messages a transcript is made of, and whether
// projection version 1 holds it (see digest.go for why). A field added to
// agentd.v1 later must be added here as false: it enters the projection only with a new
// version.
var projectedV1 = map[protoreflect.FullName]bool{
	"agentd.v1.Message.id":      true,
	"agentd.v1.Message.role":    true,
	"agentd.v1.Message.parts":   true,
	"agentd.v1.Message.partial": true,

	"agentd.v1.Part.id":          false,
	"agentd.v1.Part.text":        true,
	"agentd.v1.Part.reasoning":   true,
	"agentd.v1.Part.tool_call":   true,
	"agentd.v1.Part.tool_result": true,
	"agentd.v1.Part.media":       true,

	"agentd.v1.ReasoningPart.text":  true,
	"agentd.v1.ReasoningPart.state": true,

	"agentd.v1.ToolCallPart.id":             true,
	"agentd.v1.ToolCallPart.name":           true,
	"agentd.v1.ToolCallPart.arguments_json": true,
	"agentd.v1.ToolCallPart.executor":       false,

	"agentd.v1.ToolResultPart.tool_call_id": true,
	"agentd.v1.ToolResultPart.name":         true,
	"agentd.v1.ToolResultPart.text":         true,
	"agentd.v1.ToolResultPart.json":         true,
	"agentd.v1.ToolResultPart.is_error":     true,
	"agentd.v1.ToolResultPart.media":        true,

	"agentd.v1.MediaPart.mime_type": true,
	"agentd.v1.MediaPart.data":      true,
	"agentd.v1.MediaPart.uri":       true,
	"agentd.v1.MediaPart.name":      true,
}

// transcriptFields returns the fields of md and of every agentd.v1 message reachable
// from it.
func transcriptFields(md protoreflect.MessageDescriptor) []protoreflect.FullName {
	var out []protoreflect.FullName
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] || md.ParentFile().Package() != "agentd.v1" {
			return
		}
		seen[md.FullName()] = true
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			out = append(out, fd.FullName())
			if fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	walk(md)
	return out
}

// fieldAt is one populated field of one message of a transcript.
type fieldAt struct {
	m  protoreflect.Message
	fd protoreflect.FieldDescriptor
}

// populatedFields returns every populated field of the agentd.v1 messages in m.
func populatedFields(m protoreflect.Message) []fieldAt {
	var out []fieldAt
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out = append(out, fieldAt{m, fd})
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				out = append(out, populatedFields(v.List().Get(i).Message())...)
			}
		case fd.Message() != nil && fd.Message().ParentFile().Package() == "agentd.v1":
			out = append(out, populatedFields(v.Message())...)
		}
		return true
	})
	return out
}

// change sets f's field to another value and returns what puts it back: a string or
// bytes field grows, a bool flips, an enum takes the next number, a list loses its last
// element, a message field is cleared (a part loses its kind, a result its JSON).
func change(f fieldAt) (undo func()) {
	m, fd := f.m, f.fd
	if fd.IsList() {
		l := m.Get(fd).List()
		elems := make([]protoreflect.Value, l.Len())
		for i := range elems {
			elems[i] = l.Get(i)
		}
		set := func(vs []protoreflect.Value) {
			nl := m.NewField(fd).List()
			for _, v := range vs {
				nl.Append(v)
			}
			m.Set(fd, protoreflect.ValueOfList(nl))
		}
		set(elems[:len(elems)-1])
		return func() { set(elems) }
	}
	old := m.Get(fd)
	switch fd.Kind() {
	case protoreflect.MessageKind:
		m.Clear(fd)
	case protoreflect.StringKind:
		m.Set(fd, protoreflect.ValueOfString(old.String()+"x"))
	case protoreflect.BytesKind:
		m.Set(fd, protoreflect.ValueOfBytes(append(slices.Clone(old.Bytes()), 1)))
	case protoreflect.BoolKind:
		m.Set(fd, protoreflect.ValueOfBool(!old.Bool()))
	case protoreflect.EnumKind:
		m.Set(fd, protoreflect.ValueOfEnum(old.Enum()+1))
	default:
		panic("change: no change for " + fd.FullName())
	}
	return func() { m.Set(fd, old) }
}

// TestTranscriptDigestProjectedFields changes every field of a transcript in turn, at
// every place it is set: the digest changes exactly when the field is in the projection.
func TestTranscriptDigestProjectedFields(t *testing.T) {
	// Every field the schema has is listed, so none joins the transcript unnoticed.
	schema := map[protoreflect.FullName]bool{}
	for _, name := range transcriptFields((&agentdv1.Message{}).ProtoReflect().Descriptor()) {
		schema[name] = true
		if _, ok := projectedV1[name]; !ok {
			t.Errorf("field %s is not in projectedV1: add it as false (a field joins the projection only with a new version)", name)
		}
	}
	for name := range projectedV1 {
		if !schema[name] {
			t.Errorf("projectedV1 lists %s, which the schema does not have", name)
		}
	}

	msgs := richTranscript(t)
	base := mustDigest(t, msgs)
	exercised := map[protoreflect.FullName]bool{}
	for i, m := range msgs {
		for _, f := range populatedFields(m.ProtoReflect()) {
			name := f.fd.FullName()
			projected, listed := projectedV1[name]
			if !listed {
				t.Errorf("message %d: field %s is not in projectedV1", i, name)
				continue
			}
			exercised[name] = true
			undo := change(f)
			got := mustDigest(t, msgs)
			undo()
			if changed := !bytes.Equal(got, base); changed != projected {
				t.Errorf("message %d: changing %s: digest changed %t, want %t", i, name, changed, projected)
			}
		}
	}
	if !bytes.Equal(mustDigest(t, msgs), base) {
		t.Fatal("the changes were not undone")
	}
	for name := range projectedV1 {
		if !exercised[name] {
			t.Errorf("richTranscript never sets %s: the test cannot change it", name)
		}
	}
}

// TestTranscriptDigestChanges: what the projection's framing and the JSON values'
// canonical form must keep apart.
func TestTranscriptDigestChanges(t *testing.T) {
	base := mustDigest(t, richTranscript(t))
	jsonOf := func(m []*agentdv1.Message) *structpb.Struct {
		return m[2].Parts[0].GetToolResult().GetJson().GetStructValue()
	}
	tests := []struct {
		name   string
		change func(msgs []*agentdv1.Message) []*agentdv1.Message
	}{
		{"json: a number", func(m []*agentdv1.Message) []*agentdv1.Message {
			jsonOf(m).Fields["zeta"] = structpb.NewNumberValue(2)
			return m
		}},
		{"json: a number became a string", func(m []*agentdv1.Message) []*agentdv1.Message {
			jsonOf(m).Fields["zeta"] = structpb.NewStringValue("1")
			return m
		}},
		{"json: a key renamed", func(m []*agentdv1.Message) []*agentdv1.Message {
			jsonOf(m).Fields["omega"] = jsonOf(m).Fields["zeta"]
			delete(jsonOf(m).Fields, "zeta")
			return m
		}},
		{"json: null became false", func(m []*agentdv1.Message) []*agentdv1.Message {
			jsonOf(m).Fields["nested"].GetStructValue().Fields["b"].GetStructValue().Fields["y"] = structpb.NewBoolValue(false)
			return m
		}},
		{"json: null removed", func(m []*agentdv1.Message) []*agentdv1.Message {
			delete(jsonOf(m).Fields["nested"].GetStructValue().Fields["b"].GetStructValue().Fields, "y")
			return m
		}},
		{"json: array order", func(m []*agentdv1.Message) []*agentdv1.Message {
			l := jsonOf(m).Fields["alpha"].GetListValue()
			l.Values[0], l.Values[1] = l.Values[1], l.Values[0]
			return m
		}},
		{"json: an empty array became an empty object", func(m []*agentdv1.Message) []*agentdv1.Message {
			jsonOf(m).Fields["nested"].GetStructValue().Fields["a"] = structpb.NewStructValue(&structpb.Struct{})
			return m
		}},
		{"json: a string's escape", func(m []*agentdv1.Message) []*agentdv1.Message {
			jsonOf(m).Fields["text"] = structpb.NewStringValue(strings.Replace(jsonOf(m).Fields["text"].GetStringValue(), "\t", "\\t", 1))
			return m
		}},
		{"json output became its text", func(m []*agentdv1.Message) []*agentdv1.Message {
			tr := m[2].Parts[0].GetToolResult()
			var b []byte
			b, _ = appendCanonicalJSON(b, tr.GetJson())
			tr.Output = &agentdv1.ToolResultPart_Text{Text: string(b)}
			return m
		}},
		{"text became reasoning", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[1].Parts[1].Kind = &agentdv1.Part_Reasoning{Reasoning: &agentdv1.ReasoningPart{Text: "calling"}}
			return m
		}},
		{"media moved from data to uri", func(m []*agentdv1.Message) []*agentdv1.Message {
			md := m[2].Parts[0].GetToolResult().Media[1]
			md.Uri, md.Data = string(md.Data), nil
			return m
		}},
		{"message dropped", func(m []*agentdv1.Message) []*agentdv1.Message { return m[:3] }},
		{"message added", func(m []*agentdv1.Message) []*agentdv1.Message {
			return append(m, &agentdv1.Message{Role: agentdv1.Role_ROLE_USER})
		}},
		{"empty message added", func(m []*agentdv1.Message) []*agentdv1.Message {
			return append(m, &agentdv1.Message{})
		}},
		{"messages swapped", func(m []*agentdv1.Message) []*agentdv1.Message { m[2], m[3] = m[3], m[2]; return m }},
		{"parts swapped", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[1].Parts[0], m[1].Parts[1] = m[1].Parts[1], m[1].Parts[0]
			return m
		}},
		{"media swapped", func(m []*agentdv1.Message) []*agentdv1.Message {
			md := m[2].Parts[0].GetToolResult().Media
			md[0], md[1] = md[1], md[0]
			return m
		}},
		{"two messages merged into one", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[2].Parts = append(m[2].Parts, m[3].Parts...)
			return m[:3]
		}},
		{"a text moved from one part to the next", func(m []*agentdv1.Message) []*agentdv1.Message {
			m[1].Parts[1].Kind = &agentdv1.Part_Text{Text: "callin"}
			m[1].Parts[2].GetToolCall().Id = "gcall_1"
			return m
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustDigest(t, tt.change(richTranscript(t))); bytes.Equal(got, base) {
				t.Errorf("digest unchanged after %s", tt.name)
			}
		})
	}
}

func TestTranscriptDigestMergedMessages(t *testing.T) {
	// The concatenation the framing guards against, in its plainest form: these two
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
	if bytes.Equal(mustDigest(t, two), mustDigest(t, one)) {
		t.Error("two messages and one message with both parts have the same digest")
	}
}

func TestTranscriptHasherIncremental(t *testing.T) {
	msgs := richTranscript(t)
	h := NewHasher()
	var sums, wants [][]byte
	for i := 0; i <= len(msgs); i++ {
		want := mustDigest(t, msgs[:i])
		sums, wants = append(sums, h.Sum()), append(wants, want)
		// sum twice: reading the digest must not disturb the hasher.
		if got := h.Sum(); !bytes.Equal(got, want) {
			t.Errorf("after %d messages: sum = %x, want %x", i, got, want)
		}
		if got := h.Sum(); !bytes.Equal(got, want) {
			t.Errorf("after %d messages, second sum = %x, want %x", i, got, want)
		}
		if i < len(msgs) {
			if err := h.Add(msgs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A digest handed out earlier is not changed by later adds.
	if diff := cmp.Diff(wants, sums); diff != "" {
		t.Errorf("earlier sums changed (-want +got):\n%s", diff)
	}
}

func TestTranscriptHasherClone(t *testing.T) {
	msgs := richTranscript(t)
	h := hasherOf(t, msgs[:2])
	c, err := h.Clone()
	if err != nil {
		t.Fatal(err)
	}
	// The digest is cloned, and each hasher goes on alone.
	if !bytes.Equal(c.Sum(), h.Sum()) {
		t.Error("the digest of the clone differs")
	}
	if err := c.Add(msgs[2]); err != nil {
		t.Fatal(err)
	}
	if want := hasherOf(t, msgs[:2]); !bytes.Equal(h.Sum(), want.Sum()) {
		t.Error("adding to the clone changed the original")
	}
	if want := hasherOf(t, msgs[:3]); !bytes.Equal(c.Sum(), want.Sum()) {
		t.Error("the clone does not digest as a hasher fed the same messages")
	}
	d, err := h.DigestWith(msgs[2:])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d, mustDigest(t, msgs)) {
		t.Error("digestWith differs from the digest of all messages")
	}
	if !bytes.Equal(h.Sum(), hasherOf(t, msgs[:2]).Sum()) {
		t.Error("digestWith changed the hasher")
	}
}

func TestTranscriptDigestRefuses(t *testing.T) {
	badKey := structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"\xff": structpb.NewNullValue()}})
	badString := structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("ok"), structpb.NewStringValue("\xfe")}})
	result := func(v *structpb.Value) []*agentdv1.Message {
		return []*agentdv1.Message{{Id: "msg_r", Parts: []*agentdv1.Part{
			{Kind: &agentdv1.Part_Text{Text: "fine"}},
			{Kind: &agentdv1.Part_ToolResult{ToolResult: &agentdv1.ToolResultPart{Output: &agentdv1.ToolResultPart_Json{Json: v}}}},
		}}}
	}
	tests := []struct {
		name string
		msgs []*agentdv1.Message
		want string
	}{
		{"nil message", []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER}, nil}, "message 1: transcript message is nil"},
		{"invalid UTF-8", []*agentdv1.Message{{Id: "msg_bad", Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "\xff"}}}}}, `message 0: transcript message "msg_bad": parts[0].text: not valid UTF-8`},
		{"invalid UTF-8 id", []*agentdv1.Message{{Id: "msg_\xff"}}, "id: not valid UTF-8"},
		{"invalid UTF-8 in a media name", []*agentdv1.Message{{Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Media{Media: &agentdv1.MediaPart{Name: "\xff"}}}}}}, "parts[0].media.name: not valid UTF-8"},
		{"invalid UTF-8 in a JSON key", result(badKey), `transcript message "msg_r": parts[1].tool_result.json: a JSON string is not valid UTF-8`},
		{"invalid UTF-8 in a JSON string", result(badString), "parts[1].tool_result.json: a JSON string is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Digest(tt.msgs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("transcriptDigest = %x, %v; want error containing %q", d, err, tt.want)
			}
		})
	}
	// A refused message leaves the hasher as it was.
	h := hasherOf(t, testTranscript(t))
	before := h.Sum()
	for _, m := range []*agentdv1.Message{invalidUTF8Message(), result(badKey)[0]} {
		if err := h.Add(m); err == nil {
			t.Fatal("add of invalid UTF-8 succeeded")
		}
	}
	if !bytes.Equal(h.Sum(), before) {
		t.Error("a refused add changed the digest")
	}
}

func invalidUTF8Message() *agentdv1.Message {
	return &agentdv1.Message{Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "\xff"}}}}
}

func TestCanonicalJSON(t *testing.T) {
	num := structpb.NewNumberValue
	str := structpb.NewStringValue
	obj := func(kv ...any) *structpb.Value {
		s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for i := 0; i < len(kv); i += 2 {
			s.Fields[kv[i].(string)] = kv[i+1].(*structpb.Value)
		}
		return structpb.NewStructValue(s)
	}
	list := func(vs ...*structpb.Value) *structpb.Value {
		return structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	tests := []struct {
		name string
		in   *structpb.Value
		want string
	}{
		{"nil", nil, "null"},
		{"no kind", &structpb.Value{}, "null"},
		{"null", structpb.NewNullValue(), "null"},
		{"true", structpb.NewBoolValue(true), "true"},
		{"false", structpb.NewBoolValue(false), "false"},
		{"zero", num(0), "0"},
		{"negative zero", num(math.Copysign(0, -1)), "0"},
		{"integer", num(100), "100"},
		{"negative", num(-3), "-3"},
		{"fraction", num(0.1), "0.1"},
		{"1e20", num(1e20), "100000000000000000000"},
		{"1e21", num(1e21), "1e+21"},
		{"1e-6", num(1e-6), "0.000001"},
		{"1e-7", num(1e-7), "1e-7"},
		{"1.5e-10", num(1.5e-10), "1.5e-10"},
		{"2^53+1 as float64", num(9007199254740993), "9007199254740992"},
		{"max float64", num(math.MaxFloat64), "1.7976931348623157e+308"},
		{"smallest float64", num(5e-324), "5e-324"},
		// Not JSON: no JSON value hashes like them.
		{"NaN", num(math.NaN()), "NaN"},
		{"+Inf", num(math.Inf(1)), "Infinity"},
		{"-Inf", num(math.Inf(-1)), "-Infinity"},
		{"string escapes", str("\" \\ / \b \f \n \r \t \x00 \x1f \x7f"), `"\" \\ / \b \f \n \r \t \u0000 \u001f ` + "\x7f" + `"`},
		{"string kept as is", str("<&> \u2028 é 🙂"), "\"<&> \u2028 é 🙂\""},
		{"keys sorted by code point", obj("b", num(1), "a", num(2), "é", num(3), "Z", num(4), "aa", num(5), "\U0001F642", num(6), "\uff5e", num(7)),
			"{\"Z\":4,\"a\":2,\"aa\":5,\"b\":1,\"é\":3,\"\uff5e\":7,\"\U0001F642\":6}"},
		{"nested", list(obj(), list(), obj("x", list(structpb.NewNullValue(), structpb.NewBoolValue(true)))), `[{},[],{"x":[null,true]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendCanonicalJSON(nil, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("canonical JSON = %s, want %s", got, tt.want)
			}
			// It is JSON, and the same JSON: it reads back as the value (NaN and ±Inf aside,
			// which JSON cannot hold).
			if n := tt.in.GetNumberValue(); math.IsNaN(n) || math.IsInf(n, 0) {
				return
			}
			back := &structpb.Value{}
			if err := back.UnmarshalJSON(got); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			want := tt.in
			if want.GetKind() == nil {
				want = structpb.NewNullValue()
			}
			if diff := cmp.Diff(want, back, protocmp.Transform()); diff != "" {
				t.Errorf("reads back as another value (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := appendCanonicalJSON(nil, obj("\xff", num(1))); err == nil {
		t.Error("a key that is not UTF-8 was accepted")
	}
}
