package wire

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	"github.com/agentd/agentd/runtime"
)

// What a remote hook server (agentd.hooks.v1) is sent and answers, beyond the
// transcript, which it gets as agentd.v1 messages (MessagesToProto with OmitBinary).

// MetadataToStruct encodes metadata through JSON, so that any value encoding/json
// accepts (structs, typed slices, numbers of every width) becomes a Struct.
func MetadataToStruct(md map[string]any) (*structpb.Struct, error) {
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

// HookOutputToProto converts a tool output for a remote hook server (agentd.hooks.v1).
func HookOutputToProto(o runtime.Output) *hooksv1.ToolOutput {
	out := &hooksv1.ToolOutput{IsError: o.IsError}
	if v := OutputJSON(o); v != nil {
		out.Output = &hooksv1.ToolOutput_Json{Json: v}
	} else {
		out.Output = &hooksv1.ToolOutput_Text{Text: ProtoString(o.String())}
	}
	return out
}

// HookOutputFromProto converts an output a hook server wrote; field names it in errors.
func HookOutputFromProto(o *hooksv1.ToolOutput, field string) (runtime.Output, error) {
	out := runtime.Output{Text: o.GetText(), IsError: o.GetIsError()}
	if js := o.GetJson(); js != nil {
		b, err := json.Marshal(js.AsInterface())
		if err != nil {
			return out, fmt.Errorf("%s.json: %v", field, err)
		}
		out.JSON = b
	}
	return out, nil
}
