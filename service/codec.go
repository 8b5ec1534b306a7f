package service

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protoreflect"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
)

// ServerOptions are the grpc.ServerOptions a grpc.Server that serves agentd needs, for
// servers built outside cmd/agentd:
//
//	gs := grpc.NewServer(append(service.ServerOptions(), myOptions...)...)
//	srv.Register(gs)
//
// Today it is one option: grpc.ForceServerCodecV2([Codec]), so that a client message
// with invalid UTF-8 in a string field is refused with INVALID_ARGUMENT naming the
// field, or in its input_ack on a running stream, instead of gRPC's INTERNAL, which
// also ends the stream and cancels the run. Without it everything else works.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(Codec())}
}

// Codec returns the server codec [ServerOptions] installs. It is gRPC's protobuf codec
// ("proto"), except that a message of package agentd.v1 with invalid UTF-8 in string
// fields still decodes: each run of invalid bytes becomes U+FFFD
// ([strings.ToValidUTF8]) and the service, seeing which fields they were in, refuses
// the message. Messages of other packages (health, reflection) decode as usual. A
// message that decodes normally costs one proto.Unmarshal, as with gRPC's codec; the
// wire bytes are walked only after a failed one. Marshal is gRPC's.
//
// Being forced, it also serves calls whose content-subtype names another codec: agentd
// speaks protobuf only. It is safe for concurrent use.
func Codec() encoding.CodecV2 {
	return utf8Codec{std: encoding.GetCodecV2(grpcproto.Name)}
}

// utf8Codec is [Codec]. The fields found invalid travel with the decoded message, as
// records of field invalidUTF8Field in its unknown fields: nothing outside the message
// holds them, so they go when it does. The service reads and removes them with
// takeInvalidUTF8. A client cannot forge them: the codec drops that field from what it
// decodes.
type utf8Codec struct{ std encoding.CodecV2 }

// invalidUTF8Field is the unknown field of a decoded top-level agentd.v1 message that
// names a string field (one record each) that held invalid UTF-8. The number is in the
// range 19000-19999 that protobuf reserves for its implementation: no .proto file can
// declare it.
const invalidUTF8Field protowire.Number = 19999

// undecodableField is the unknown field of a RunRequest that a transcoder in front of
// the service (agentd's HTTP listener, decoding a Connect or gRPC-Web client's JSON)
// could not decode: it holds the decoder's error, the message is otherwise empty, and
// the service refuses it as it refuses invalid UTF-8, in an ack while the run goes on
// (INVALID_MESSAGE), or the stream when it is the first message. Refused by the
// transcoder itself, mid-stream, the message ended the stream from the goroutine reading
// its body while the handler wrote to it. A client that sends the field itself only has
// its own message refused.
const undecodableField protowire.Number = 19998

// MarkUndecodable makes m, a RunRequest a transcoder could not decode from the client's
// encoding, one the service refuses with why: it resets m and records why in its unknown
// fields (undecodableField), which travel with it through the gRPC server.
func MarkUndecodable(m *agentdv1.RunRequest, why string) {
	proto.Reset(m)
	b := protowire.AppendTag(nil, undecodableField, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendString(b, why))
}

// takeUndecodable removes the record MarkUndecodable left on m and returns why it was
// made; ok is false for a message without one.
func takeUndecodable(m *agentdv1.RunRequest) (why string, ok bool) {
	if whys := takeRecords(m, undecodableField); len(whys) > 0 {
		return whys[0], true
	}
	return "", false
}

// maxInvalidUTF8Fields bounds the fields named for one message; the rest are fixed all
// the same.
const maxInvalidUTF8Fields = 10

var agentdPackage = agentdv1.File_agentd_v1_agent_service_proto.Package()

func (c utf8Codec) Name() string { return c.std.Name() }

// Marshal is gRPC's, except for a response that carries a journal frame (sendFrame):
// its encoding is the frame itself, which goes out as it is, neither copied nor
// marshaled again.
func (c utf8Codec) Marshal(v any) (mem.BufferSlice, error) {
	if f := frameOf(v); f != nil {
		return mem.BufferSlice{mem.SliceBuffer(f)}, nil
	}
	return c.std.Marshal(v)
}

// frameOf returns the frame a response carries as its only content (sendFrame): nil for
// any other message. A frame is never changed once journaled, so the transport may
// hold it as long as it needs.
func frameOf(v any) []byte {
	var m interface {
		proto.Message
		GetEvent() *agentdv1.RunEvent
	}
	switch r := v.(type) {
	case *agentdv1.RunResponse:
		m = r
	case *agentdv1.StartRunResponse:
		m = r
	case *agentdv1.AttachRunResponse:
		m = r
	default:
		return nil
	}
	if m.GetEvent() != nil {
		return nil
	}
	return m.ProtoReflect().GetUnknown()
}

func (c utf8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.std.Unmarshal(data, v)
	m := messageOf(v)
	if m == nil || m.ProtoReflect().Descriptor().ParentFile().Package() != agentdPackage {
		return err
	}
	if err == nil {
		if len(m.ProtoReflect().GetUnknown()) > 0 {
			takeInvalidUTF8Paths(m) // a client's, not ours
		}
		return nil
	}
	// Whatever the error, try again with the strings made valid: if that decodes, the
	// invalid UTF-8 was the cause.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if sanitizeMessage(buf.ReadOnlyData(), m) {
		return nil
	}
	return err
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		return v
	}
	return nil
}

// sanitizeMessage decodes b into m with the invalid UTF-8 of its strings made valid, and
// records in m which fields held it. It reports false, leaving m in an unspecified
// state, when b has no invalid UTF-8 or does not decode for another reason too.
func sanitizeMessage(b []byte, m proto.Message) bool {
	var s sanitizer
	fixed, changed, ok := s.message(b, m.ProtoReflect().Descriptor())
	if !ok || !changed {
		return false
	}
	if err := proto.Unmarshal(fixed, m); err != nil {
		return false
	}
	r := m.ProtoReflect()
	unknown := r.GetUnknown()
	if len(unknown) > 0 {
		takeInvalidUTF8Paths(m)
		unknown = r.GetUnknown()
	}
	for _, p := range s.paths {
		unknown = protowire.AppendTag(unknown, invalidUTF8Field, protowire.BytesType)
		unknown = protowire.AppendString(unknown, p)
	}
	r.SetUnknown(unknown)
	return true
}

// takeInvalidUTF8Paths removes the record of invalid UTF-8 the codec left on m and
// returns the fields it names.
func takeInvalidUTF8Paths(m proto.Message) []string {
	return takeRecords(m, invalidUTF8Field)
}

// takeRecords removes from m's unknown fields every record of field num and returns
// their values.
func takeRecords(m proto.Message, num protowire.Number) []string {
	r := m.ProtoReflect()
	unknown := r.GetUnknown()
	if len(unknown) == 0 {
		return nil
	}
	var values []string
	var kept protoreflect.RawFields
	for b := unknown; len(b) > 0; {
		n, typ, l := protowire.ConsumeField(b)
		if l < 0 {
			return values // unknown fields are well-formed: proto.Unmarshal checked them
		}
		if n != num {
			kept = append(kept, b[:l]...)
		} else if typ == protowire.BytesType {
			_, _, tn := protowire.ConsumeTag(b)
			v, _ := protowire.ConsumeBytes(b[tn:l])
			values = append(values, string(v))
		}
		b = b[l:]
	}
	if len(kept) != len(unknown) {
		r.SetUnknown(kept)
	}
	return values
}

// takeInvalidUTF8 removes the record of invalid UTF-8 the codec left on a client's
// message and returns the field violations it names, or nil.
func takeInvalidUTF8(m proto.Message) wire.FieldErrors {
	var fe wire.FieldErrors
	for _, p := range takeInvalidUTF8Paths(m) {
		fe.Add(p, "not valid UTF-8: protobuf strings must be UTF-8")
	}
	return fe
}

// utf8Refusal is the input_ack error of a message with invalid UTF-8.
func utf8Refusal(fe wire.FieldErrors) *agentdv1.RunError {
	return ackError(reasonInvalidUTF8, "%s", fe.Summary())
}

// sanitizer rewrites the wire bytes of a message, making the strings that must be UTF-8
// valid, and names the fields that were not.
type sanitizer struct {
	stack []pathStep // the fields the walk is in, outermost first
	depth int
	paths []string
}

// pathStep is one field on the way to a string: an element of it, when repeated, or an
// entry, when a map.
type pathStep struct {
	fd    protoreflect.FieldDescriptor
	index int    // the element of a list, else -1
	key   string // the entry of a map, rendered
}

// message returns b, a message of type md, with its invalid strings made valid, and
// whether that changed anything (else it returns b itself). ok is false when b is not
// well-formed: proto.Unmarshal will refuse it anyway.
func (s *sanitizer) message(b []byte, md protoreflect.MessageDescriptor) (out []byte, changed, ok bool) {
	if s.depth >= protowire.DefaultRecursionLimit {
		return nil, false, false
	}
	s.depth++
	defer func() { s.depth-- }()
	fields := md.Fields()
	var counts []int // elements seen of each repeated field, by field index
	for pos := 0; pos < len(b); {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return nil, false, false
		}
		valStart := pos + n
		m := protowire.ConsumeFieldValue(num, typ, b[valStart:])
		if m < 0 {
			return nil, false, false
		}
		end := valStart + m
		fd := fields.ByNumber(num)
		if fd == nil || typ != protowire.BytesType || !(fd.Kind() == protoreflect.MessageKind || (fd.Kind() == protoreflect.StringKind && enforceUTF8(fd))) {
			// Unknown fields, other kinds, and a wire type that does not match the field
			// (decoded as unknown) go through as they are.
			if out != nil {
				out = append(out, b[pos:end]...)
			}
			pos = end
			continue
		}
		v, _ := protowire.ConsumeBytes(b[valStart:end])
		st := pathStep{fd: fd, index: -1}
		if fd.IsList() {
			if counts == nil {
				counts = make([]int, fields.Len())
			}
			st.index = counts[fd.Index()]
			counts[fd.Index()]++
		}
		var nv []byte
		var fixed bool
		switch {
		case fd.Kind() == protoreflect.StringKind:
			if !utf8.Valid(v) {
				nv, fixed = []byte(strings.ToValidUTF8(string(v), "\uFFFD")), true
				s.stack = append(s.stack, st)
				s.report()
				s.stack = s.stack[:len(s.stack)-1]
			}
		default:
			if fd.IsMap() {
				st.key = mapKey(v, fd.MapKey())
			}
			s.stack = append(s.stack, st)
			nv, fixed, ok = s.message(v, fd.Message())
			s.stack = s.stack[:len(s.stack)-1]
			if !ok {
				return nil, false, false
			}
		}
		switch {
		case fixed:
			if out == nil {
				out = append(make([]byte, 0, len(b)+len(b)/8+8), b[:pos]...)
			}
			out = append(out, b[pos:valStart]...)
			out = protowire.AppendBytes(out, nv)
		case out != nil:
			out = append(out, b[pos:end]...)
		}
		pos = end
	}
	if out == nil {
		return b, false, true
	}
	return out, true, true
}

// report records the field the walk is in as invalid.
func (s *sanitizer) report() {
	if len(s.paths) >= maxInvalidUTF8Fields {
		return
	}
	if p := s.path(); !slices.Contains(s.paths, p) {
		s.paths = append(s.paths, p)
	}
}

// path renders the field the walk is in as the service names fields in BadRequest
// violations: "start.messages[0].parts[1].text". A map entry is name["key"];
// google.protobuf.Struct, Value and ListValue read as the JSON they stand for:
// edited_arguments["tags"][0], not edited_arguments.struct_value.fields["tags"]....
func (s *sanitizer) path() string {
	var b strings.Builder
	for _, st := range s.stack {
		parent := st.fd.ContainingMessage()
		switch {
		case parent.IsMapEntry() || parent.FullName() == "google.protobuf.Value":
			// The key or value of an entry (named by the map's step), or the kind of a
			// Value.
			continue
		case parent.FullName() == "google.protobuf.Struct" || parent.FullName() == "google.protobuf.ListValue":
			// fields["key"], values[i]: the key or the index alone.
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(st.fd.Name()))
		}
		switch {
		case st.index >= 0:
			fmt.Fprintf(&b, "[%d]", st.index)
		case st.fd.IsMap():
			fmt.Fprintf(&b, "[%s]", st.key)
		}
	}
	return b.String()
}

// mapKey renders the key of a map entry: quoted (and made valid) if a string. The last
// key in the entry wins, as in proto.Unmarshal; a missing one is the zero value.
func mapKey(entry []byte, kd protoreflect.FieldDescriptor) string {
	var raw []byte
	var num uint64
	for b := entry; len(b) > 0; {
		n, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			break
		}
		vn := protowire.ConsumeFieldValue(n, typ, b[tn:])
		if vn < 0 {
			break
		}
		if n == kd.Number() {
			v := b[tn : tn+vn]
			switch typ {
			case protowire.BytesType:
				raw, _ = protowire.ConsumeBytes(v)
			case protowire.VarintType:
				num, _ = protowire.ConsumeVarint(v)
			case protowire.Fixed32Type:
				x, _ := protowire.ConsumeFixed32(v)
				num = uint64(x)
			case protowire.Fixed64Type:
				num, _ = protowire.ConsumeFixed64(v)
			}
		}
		b = b[tn+vn:]
	}
	switch kd.Kind() {
	case protoreflect.StringKind:
		return strconv.Quote(strings.ToValidUTF8(string(raw), "\uFFFD"))
	case protoreflect.BoolKind:
		return strconv.FormatBool(num != 0)
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return strconv.FormatInt(int64(int32(num)), 10)
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(int64(num), 10)
	case protoreflect.Sint32Kind:
		return strconv.FormatInt(int64(int32(protowire.DecodeZigZag(num&math.MaxUint32))), 10)
	case protoreflect.Sint64Kind:
		return strconv.FormatInt(protowire.DecodeZigZag(num), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.FormatUint(uint64(uint32(num)), 10)
	default:
		return strconv.FormatUint(num, 10)
	}
}

// enforceUTF8 reports whether proto.Unmarshal checks that fd holds UTF-8: proto3 strings,
// and editions strings unless utf8_validation = NONE. It mirrors the protobuf module's
// internal strs.EnforceUTF8.
func enforceUTF8(fd protoreflect.FieldDescriptor) bool {
	if fd.Syntax() == protoreflect.Editions {
		if e, ok := fd.(interface{ EnforceUTF8() bool }); ok {
			return e.EnforceUTF8()
		}
	}
	return fd.Syntax() == protoreflect.Proto3
}
