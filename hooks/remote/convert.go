package remote

import (
	"context"
	"encoding/json"

	"google.golang.org/protobuf/types/known/structpb"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// The transcripts a hook server is sent are converted by internal/wire, as the service's
// are, with hookWire's options. Requests leave out media bytes and opaque reasoning
// state: a hook decides on text, and a transcript with images would soon outgrow a hook
// server's message size limit.

// runInfo converts the run's description. Metadata that does not encode as a JSON object
// is left out, with a warning.
func (h *Hook) runInfo(ctx context.Context, in *runtime.RunInfo) *hooksv1.RunInfo {
	if in == nil {
		return nil
	}
	ri := &hooksv1.RunInfo{RunId: in.RunID, ThreadId: in.ThreadID, Agent: wire.ProtoString(in.Agent), Model: wire.ProtoString(in.Model)}
	if len(in.Metadata) > 0 {
		md, err := metadataToStruct(in.Metadata)
		if err != nil {
			h.log.WarnContext(ctx, "remote hook: run metadata left out of the request", "hook", h.name, "error", err)
		}
		ri.Metadata = md
	}
	return ri
}

// metadataToStruct encodes metadata through JSON, so that any value encoding/json
// accepts (structs, typed slices, numbers of every width) becomes a Struct.
func metadataToStruct(md map[string]any) (*structpb.Struct, error) {
	b, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return s, nil
}

func outputToProto(o runtime.Output) *hooksv1.ToolOutput {
	out := &hooksv1.ToolOutput{IsError: o.IsError}
	if v := wire.OutputJSON(o); v != nil {
		out.Output = &hooksv1.ToolOutput_Json{Json: v}
	} else {
		out.Output = &hooksv1.ToolOutput_Text{Text: wire.ProtoString(o.String())}
	}
	return out
}

// outputFromProto converts an output a hook server wrote; field names it in errors.
func outputFromProto(o *hooksv1.ToolOutput, field string) (runtime.Output, error) {
	out := runtime.Output{Text: o.GetText(), IsError: o.GetIsError()}
	if js := o.GetJson(); js != nil {
		b, err := json.Marshal(js.AsInterface())
		if err != nil {
			return out, invalid("%s.json: %v", field, err)
		}
		out.JSON = b
	}
	return out, nil
}

// hookWire sends the transcript to a hook server without media bytes or opaque reasoning
// state: a hook inspects, it does not replay.
var hookWire = wire.Options{OmitBinary: true}
