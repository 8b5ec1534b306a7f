package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// The Responses API (Config.Responses). Each call is stateless: store is false, and the
// whole transcript goes in input. The model's reasoning comes back as reasoning items,
// asked for with their encrypted_content; each becomes a reasoning part whose state is
// the item (id, encrypted content, summary), and goes back as the same item in the next
// call, the next step's and the next turn's alike, so that a reasoning model keeps its
// reasoning across a run's tool loop. What streams as reasoning text is the item's
// summary (reasoning.summary "auto"), or the reasoning itself where a server streams it
// (reasoning_text, as open-weight models served through the Responses API do).

// ResponsesProvider is the provider part of the names of Responses API models.
const ResponsesProvider = "openai-responses"

// responsesParams builds the request of one call to the Responses API.
func (m *Model) responsesParams(req *runtime.ModelRequest) (responses.ResponseNewParams, error) {
	input, instructions, err := responsesInput(req.Messages)
	if err != nil {
		return responses.ResponseNewParams{}, err
	}
	p := responses.ResponseNewParams{
		Model:   shared.ResponsesModel(m.cfg.Model),
		Input:   responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Store:   oai.Bool(false),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	}
	if instructions != "" {
		p.Instructions = oai.String(instructions)
	}
	for _, spec := range req.Tools {
		t, err := responsesTool(spec)
		if err != nil {
			return responses.ResponseNewParams{}, err
		}
		p.Tools = append(p.Tools, t)
	}
	if o := req.Output; o != nil {
		var schema map[string]any
		if err := json.Unmarshal(o.Schema, &schema); err != nil {
			return responses.ResponseNewParams{}, fmt.Errorf("output schema: %w", err)
		}
		// strict where the schema allows it (strictSchema); agentd validates the reply
		// either way.
		p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: o.Name, Schema: schema, Strict: oai.Bool(strictSchema(o.Schema))},
		}}
	}
	sm := m.sampling(req.Settings)
	p.Temperature, p.TopP, p.MaxOutputTokens = sm.temperature, sm.topP, sm.maxTokens
	p.Reasoning = shared.ReasoningParam{Summary: shared.ReasoningSummaryAuto}
	if m.cfg.ReasoningEffort != "" {
		p.Reasoning.Effort = shared.ReasoningEffort(m.cfg.ReasoningEffort)
	}
	if sm.extra != nil {
		p.SetExtraFields(sm.extra)
	}
	return p, nil
}

// responsesTool converts a tool's spec to a function tool. strict is off: agentd
// validates the arguments against the schema itself, and strict mode would refuse
// schemas it does not support (optional properties, formats).
func responsesTool(spec runtime.ToolSpec) (responses.ToolUnionParam, error) {
	params := map[string]any{"type": "object", "properties": map[string]any{}}
	if len(spec.Parameters) > 0 {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(spec.Parameters, &raw); err != nil {
			return responses.ToolUnionParam{}, fmt.Errorf("tool %s: parameters: %w", spec.Name, err)
		}
		params = make(map[string]any, len(raw))
		for k, v := range raw {
			params[k] = v
		}
	}
	t := responses.ToolParamOfFunction(spec.Name, params, false)
	if spec.Description != "" {
		t.OfFunction.Description = oai.String(spec.Description)
	}
	return t, nil
}

// responsesInput converts the transcript to input items, in order; system messages
// become the instructions.
func responsesInput(msgs []runtime.Message) (responses.ResponseInputParam, string, error) {
	var items responses.ResponseInputParam
	var instructions []string
	for i, msg := range msgs {
		switch msg.Role {
		case runtime.RoleSystem:
			if t := msg.Text(); t != "" {
				instructions = append(instructions, t)
			}
		case runtime.RoleUser:
			items = append(items, responsesUser(msg.Parts))
		case runtime.RoleAssistant:
			items = append(items, responsesAssistant(msg.Parts)...)
		case runtime.RoleTool:
			items = append(items, responsesToolResults(msg.Parts)...)
		default:
			return nil, "", fmt.Errorf("message %d: unsupported role %s", i, msg.Role)
		}
	}
	return items, strings.Join(instructions, "\n\n"), nil
}

// responsesUser sends a user message's text and media as input content.
func responsesUser(parts []runtime.Part) responses.ResponseInputItemUnionParam {
	var content responses.ResponseInputMessageContentListParam
	for _, p := range parts {
		switch p.Kind {
		case runtime.PartText:
			content = append(content, responses.ResponseInputContentParamOfInputText(p.Text))
		case runtime.PartMedia:
			content = append(content, responsesMedia(p.Media))
		}
	}
	return responses.ResponseInputItemParamOfInputMessage(content, "user")
}

// responsesMedia sends an image as input_image and a PDF as input_file, inline unless the
// media is a URI; other media is named in text.
func responsesMedia(md runtime.Media) responses.ResponseInputContentUnionParam {
	switch {
	case strings.HasPrefix(md.MIMEType, "image/"):
		img := responses.ResponseInputImageParam{Detail: responses.ResponseInputImageDetailAuto}
		img.ImageURL = oai.String(cmp.Or(md.URI, dataURL(md)))
		return responses.ResponseInputContentUnionParam{OfInputImage: &img}
	case md.MIMEType == "application/pdf" && md.URI == "":
		f := responses.ResponseInputFileParam{FileData: oai.String(dataURL(md)), Filename: oai.String(cmp.Or(md.Name, "document.pdf"))}
		return responses.ResponseInputContentUnionParam{OfInputFile: &f}
	}
	return responses.ResponseInputContentParamOfInputText(fmt.Sprintf("[%s (%s) is not shown: the model takes images and PDFs only]", cmp.Or(md.Name, md.URI, "an attachment"), md.MIMEType))
}

// responsesAssistant sends an assistant message's parts as output items, in order:
// reasoning this adapter streamed as its reasoning items, text as an output message, and
// tool calls as function calls. Reasoning without such state (another provider's) is left
// out: the API takes reasoning items only as it made them.
func responsesAssistant(parts []runtime.Part) []responses.ResponseInputItemUnionParam {
	var items []responses.ResponseInputItemUnionParam
	var text strings.Builder
	flushText := func() {
		if text.Len() == 0 {
			return
		}
		items = append(items, responses.ResponseInputItemParamOfMessage(text.String(), responses.EasyInputMessageRoleAssistant))
		text.Reset()
	}
	for _, p := range parts {
		switch p.Kind {
		case runtime.PartReasoning:
			flushText()
			items = append(items, reasoningItems(p.State)...)
		case runtime.PartText:
			text.WriteString(p.Text)
		case runtime.PartToolCall:
			flushText()
			items = append(items, responses.ResponseInputItemParamOfFunctionCall(cmp.Or(p.ToolCall.Arguments, "{}"), p.ToolCall.ID, p.ToolCall.Name))
		}
	}
	flushText()
	return items
}

// responsesToolResults sends each result as a function_call_output. Outputs carry text
// only, so media a tool returned follow in one user message.
func responsesToolResults(parts []runtime.Part) []responses.ResponseInputItemUnionParam {
	var items []responses.ResponseInputItemUnionParam
	var media responses.ResponseInputMessageContentListParam
	for _, p := range parts {
		if p.Kind != runtime.PartToolResult {
			continue
		}
		r := p.ToolResult
		out := r.Output.String()
		if r.Output.IsError {
			out = "Error: " + out
		}
		item := responses.ResponseInputItemParamOfFunctionCallOutput(out)
		item.OfFunctionCallOutput.CallID = oai.String(r.CallID)
		items = append(items, item)
		for _, md := range r.Output.Media {
			if len(media) == 0 {
				media = append(media, responses.ResponseInputContentParamOfInputText("Media returned by the tool calls above:"))
			}
			media = append(media, responses.ResponseInputContentParamOfInputText(fmt.Sprintf("From %s (%s):", r.Name, r.CallID)), responsesMedia(md))
		}
	}
	if len(media) > 0 {
		items = append(items, responses.ResponseInputItemParamOfInputMessage(media, "user"))
	}
	return items
}

// reasoningState is what a reasoning part's state holds of one reasoning item: one JSON
// line each (the runtime joins the parts of adjacent reasoning blocks, and their states).
type reasoningState struct {
	Type             string   `json:"type"` // reasoningStateType
	ID               string   `json:"id"`
	EncryptedContent string   `json:"encrypted_content,omitempty"`
	Summary          []string `json:"summary,omitempty"`
}

// reasoningStateType marks a state line as a Responses API reasoning item.
const reasoningStateType = "openai.reasoning"

func encodeReasoning(s reasoningState) []byte {
	s.Type = reasoningStateType
	b, _ := json.Marshal(s) // strings: cannot fail
	return append(b, '\n')
}

// reasoningItems returns the reasoning items a part's state records, or none when the
// state is not this adapter's.
func reasoningItems(state []byte) []responses.ResponseInputItemUnionParam {
	var items []responses.ResponseInputItemUnionParam
	dec := json.NewDecoder(bytes.NewReader(state))
	for {
		var s reasoningState
		if err := dec.Decode(&s); err == io.EOF {
			return items
		} else if err != nil || s.Type != reasoningStateType || s.ID == "" {
			return nil
		}
		summary := make([]responses.ResponseReasoningItemSummaryParam, 0, len(s.Summary))
		for _, t := range s.Summary {
			summary = append(summary, responses.ResponseReasoningItemSummaryParam{Text: t})
		}
		item := responses.ResponseInputItemParamOfReasoning(s.ID, summary)
		if s.EncryptedContent != "" {
			item.OfReasoning.EncryptedContent = oai.String(s.EncryptedContent)
		}
		items = append(items, item)
	}
}

// responsesOnce makes one Responses API call and yields its events. It returns the
// call's failure, nil when it succeeded or the consumer stopped.
func (m *Model) responsesOnce(ctx context.Context, params responses.ResponseNewParams, yield func(runtime.ModelEvent) bool) *ProviderError {
	var res *http.Response
	d := responsesDecoder{yield: yield, calls: map[string]int{}}
	stream := m.client.Responses.NewStreaming(ctx, params, option.WithResponseInto(&res))
	if pe := provider.Read(stream, d.event, d.finish, func(err error) *ProviderError { return classify(err, res) }); pe != nil {
		return pe
	}
	return d.failure // a stream that said the call failed stopped with its failure here

}
