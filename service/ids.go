package service

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/agentd/agentd/internal/wire"
)

// Every id a client sends (run_id, thread_id, request_id, client_key, an approval's or
// a tool call's id, a message's, an agent's name) is checked at the door, before the
// store or a log sees it: at most maxIDBytes, and no NUL, which PostgreSQL's text
// columns cannot hold (it would fail the statement, read as a store outage, and the
// client would retry forever). Errors and logs quote ids whole, which the bound keeps
// short. A run's metadata, echoed in logs and hooks, is bounded by maxMetadataBytes.
const (
	maxIDBytes       = 256
	maxMetadataBytes = 16 << 10
)

// badIDs returns the violations of m's ids and metadata, or nil. It walks every field
// set of m, the transcript's messages included, as decoding did.
func badIDs(m proto.Message) wire.FieldErrors {
	var fe wire.FieldErrors
	walkIDs(m.ProtoReflect(), "", 0, &fe)
	return fe
}

// isIDField reports whether a string field holds an id.
func isIDField(fd protoreflect.FieldDescriptor) bool {
	name := string(fd.Name())
	return name == "id" || strings.HasSuffix(name, "_id") || name == "client_key" || name == "agent"
}

func walkIDs(m protoreflect.Message, prefix string, depth int, fe *wire.FieldErrors) {
	if depth > protowire.DefaultRecursionLimit {
		return // proto.Unmarshal refused deeper messages
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		switch {
		case fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Struct" && !fd.IsList() && !fd.IsMap():
			if n := proto.Size(v.Message().Interface()); n > maxMetadataBytes {
				fe.Add(path, "%d bytes, more than the %d allowed", n, maxMetadataBytes)
			}
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				walkIDs(l.Get(i).Message(), fmt.Sprintf("%s[%d].", path, i), depth+1, fe)
			}
		case fd.IsMap() || fd.IsList():
		case fd.Message() != nil:
			walkIDs(v.Message(), path+".", depth+1, fe)
		case fd.Kind() == protoreflect.StringKind && isIDField(fd):
			checkID(path, v.String(), fe)
		}
		return true
	})
}

// checkID adds the violation of id, the value of the field at path, if any.
func checkID(path, id string, fe *wire.FieldErrors) {
	switch {
	case len(id) > maxIDBytes:
		fe.Add(path, "%d bytes, more than the %d an id may have", len(id), maxIDBytes)
	case strings.IndexByte(id, 0) >= 0:
		fe.Add(path, "holds a NUL character, which no id may")
	}
}
