package wire

import (
	"encoding/json"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// The validating mode: what a client sends (a start's transcript, tool results,
// edited arguments). Every problem is collected as a field violation naming the field,
// and the conversion goes on, so that one answer names every wrong field.

// FieldErrors collects what is wrong with a client's message, field by field, for a
// google.rpc.BadRequest.
type FieldErrors []*errdetails.BadRequest_FieldViolation

func (fe *FieldErrors) Add(field, format string, args ...any) {
	*fe = append(*fe, &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// Summary is the first violation, "field: description", saying how many more there are.
func (fe FieldErrors) Summary() string {
	if len(fe) == 0 {
		return ""
	}
	s := fe[0].Field + ": " + fe[0].Description
	if len(fe) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(fe)-1)
	}
	return s
}

// OutputToProto is a typed run's result (runtime.RunFinished.Output) as the wire's
// RunFinished.output: nil for none.
func OutputToProto(raw json.RawMessage) *structpb.Value {
	if len(raw) == 0 {
		return nil
	}
	v, err := jsonToValue(raw)
	if err != nil {
		return nil // the runtime validated it: JSON it is
	}
	return v
}

// jsonToValue decodes JSON into a google.protobuf.Value.
func jsonToValue(raw []byte) (*structpb.Value, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return structpb.NewValue(v)
}

// MessagesFromProto converts a client's transcript; field names the list for errors.
func MessagesFromProto(ms []*agentdv1.Message, field string, fe *FieldErrors) []runtime.Message {
	out := make([]runtime.Message, 0, len(ms)+1)
	for i, m := range ms {
		out = append(out, MessageFromProto(m, fmt.Sprintf("%s[%d]", field, i), fe))
	}
	return out
}

func MessageFromProto(m *agentdv1.Message, field string, fe *FieldErrors) runtime.Message {
	rm := runtime.Message{ID: m.GetId(), Role: RoleFromProto(m.GetRole()), Partial: m.GetPartial()}
	if rm.Role == runtime.RoleUnspecified {
		fe.Add(field+".role", "must be set (ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL)")
	}
	if len(m.GetParts()) == 0 {
		fe.Add(field+".parts", "must not be empty")
	}
	rm.Parts = make([]runtime.Part, 0, len(m.GetParts()))
	for j, p := range m.GetParts() {
		pf := fmt.Sprintf("%s.parts[%d]", field, j)
		rp := runtime.Part{ID: p.GetId()}
		switch k := p.GetKind().(type) {
		case *agentdv1.Part_Text:
			rp.Kind, rp.Text = runtime.PartText, k.Text
		case *agentdv1.Part_Reasoning:
			rp.Kind, rp.Text, rp.State = runtime.PartReasoning, k.Reasoning.GetText(), k.Reasoning.GetState()
		case *agentdv1.Part_ToolCall:
			tc := k.ToolCall
			if tc.GetId() == "" || tc.GetName() == "" {
				fe.Add(pf+".tool_call", "needs an id and a name")
			}
			rp.Kind = runtime.PartToolCall
			rp.ToolCall = runtime.ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArgumentsJson(), Executor: ExecutorFromProto(tc.GetExecutor())}
		case *agentdv1.Part_ToolResult:
			tr := k.ToolResult
			if tr.GetToolCallId() == "" {
				fe.Add(pf+".tool_result.tool_call_id", "must be set")
			}
			out, err := OutputFromProto(tr.GetText(), tr.GetJson(), tr.GetIsError(), tr.GetMedia())
			if err != nil {
				fe.Add(pf+".tool_result.json", "%v", err)
			}
			rp.Kind = runtime.PartToolResult
			rp.ToolResult = runtime.ToolResult{CallID: tr.GetToolCallId(), Name: tr.GetName(), Output: out}
		case *agentdv1.Part_Media:
			rp.Kind, rp.Media = runtime.PartMedia, mediaFromProto(k.Media)
		default:
			fe.Add(pf, "kind must be set (text, reasoning, tool_call, tool_result or media)")
			continue
		}
		rm.Parts = append(rm.Parts, rp)
	}
	return rm
}

func OutputFromProto(text string, js *structpb.Value, isError bool, media []*agentdv1.MediaPart) (runtime.Output, error) {
	out := runtime.Output{Text: text, IsError: isError}
	if js != nil {
		s, err := ValueToJSON(js)
		if err != nil {
			return out, err
		}
		out.JSON = json.RawMessage(s)
	}
	for _, m := range media {
		out.Media = append(out.Media, mediaFromProto(m))
	}
	return out, nil
}

func mediaFromProto(m *agentdv1.MediaPart) runtime.Media {
	return runtime.Media{MIMEType: m.GetMimeType(), Data: m.GetData(), URI: m.GetUri(), Name: m.GetName()}
}
