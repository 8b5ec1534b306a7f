package openai

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/runtime"
)

// params builds the request of one call.
func (m *Model) params(req *runtime.ModelRequest) (oai.ChatCompletionNewParams, error) {
	msgs, err := messages(req.Messages, m.cfg.OmitReasoning)
	if err != nil {
		return oai.ChatCompletionNewParams{}, err
	}
	p := oai.ChatCompletionNewParams{
		Model:         m.cfg.Model,
		Messages:      msgs,
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	}
	for _, spec := range req.Tools {
		t, err := tool(spec)
		if err != nil {
			return oai.ChatCompletionNewParams{}, err
		}
		p.Tools = append(p.Tools, t)
	}
	if o := req.Output; o != nil {
		// strict where the schema allows it (strictSchema); agentd validates the reply
		// either way. The schema goes as written, in its order.
		p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: o.Name, Schema: o.Schema, Strict: oai.Bool(strictSchema(o.Schema))},
		}}
	}
	sm := m.sampling(req.Settings)
	p.Temperature, p.TopP, p.MaxCompletionTokens = sm.temperature, sm.topP, sm.maxTokens
	if m.cfg.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(m.cfg.ReasoningEffort)
	}
	if sm.extra != nil {
		p.SetExtraFields(sm.extra)
	}
	return p, nil
}

// sampling is what a call's settings ask of either API: each the request's, else the
// Config's, unset when neither says; and the request's extra fields, sent as they are.
type sampling struct {
	temperature, topP param.Opt[float64]
	maxTokens         param.Opt[int64]
	extra             map[string]any
}

func (m *Model) sampling(s runtime.CallSettings) sampling {
	var sm sampling
	if t := cmp.Or(s.Temperature, m.cfg.Temperature); t != nil {
		sm.temperature = oai.Float(*t)
	}
	if t := cmp.Or(s.TopP, m.cfg.TopP); t != nil {
		sm.topP = oai.Float(*t)
	}
	if n := cmp.Or(s.MaxOutputTokens, m.cfg.MaxTokens); n > 0 {
		sm.maxTokens = oai.Int(n)
	}
	if len(s.Extra) > 0 {
		sm.extra = make(map[string]any, len(s.Extra))
		for k, v := range s.Extra {
			sm.extra[k] = v
		}
	}
	return sm
}

// tool converts a tool's spec; a spec without parameters takes any object.
func tool(spec runtime.ToolSpec) (oai.ChatCompletionToolUnionParam, error) {
	params := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	if len(spec.Parameters) > 0 {
		// Raw values keep the schema's text as it is below the top level.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(spec.Parameters, &raw); err != nil {
			return oai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool %s: parameters: %w", spec.Name, err)
		}
		params = make(shared.FunctionParameters, len(raw))
		for k, v := range raw {
			params[k] = v
		}
	}
	fn := shared.FunctionDefinitionParam{Name: spec.Name, Parameters: params}
	if spec.Description != "" {
		fn.Description = oai.String(spec.Description)
	}
	return oai.ChatCompletionFunctionTool(fn), nil
}

// messages converts the transcript.
func messages(msgs []runtime.Message, omitReasoning bool) ([]oai.ChatCompletionMessageParamUnion, error) {
	out := make([]oai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for i, msg := range msgs {
		switch msg.Role {
		case runtime.RoleSystem:
			out = append(out, oai.SystemMessage(msg.Text()))
		case runtime.RoleUser:
			out = append(out, userMessage(msg.Parts))
		case runtime.RoleAssistant:
			if am, ok := assistantMessage(msg, omitReasoning); ok {
				out = append(out, am)
			}
		case runtime.RoleTool:
			out = append(out, toolMessages(msg)...)
		default:
			return nil, fmt.Errorf("message %d: unsupported role %s", i, msg.Role)
		}
	}
	return out, nil
}

// userMessage sends text alone as a string, and text with media as content parts.
func userMessage(parts []runtime.Part) oai.ChatCompletionMessageParamUnion {
	var content []oai.ChatCompletionContentPartUnionParam
	media := false
	for _, p := range parts {
		switch p.Kind {
		case runtime.PartText:
			content = append(content, oai.TextContentPart(p.Text))
		case runtime.PartMedia:
			media = true
			content = append(content, mediaPart(p.Media))
		}
	}
	if !media {
		var b strings.Builder
		for _, p := range parts {
			if p.Kind == runtime.PartText {
				b.WriteString(p.Text)
			}
		}
		return oai.UserMessage(b.String())
	}
	return oai.UserMessage(content)
}

// mediaPart sends an image as an image_url part and a PDF as a file part, inline unless
// the media is a URI; Chat Completions takes no other media, which is named in a text
// part instead.
func mediaPart(md runtime.Media) oai.ChatCompletionContentPartUnionParam {
	switch {
	case strings.HasPrefix(md.MIMEType, "image/") && md.URI != "":
		return oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: md.URI})
	case strings.HasPrefix(md.MIMEType, "image/"):
		return oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(md)})
	case md.MIMEType == "application/pdf" && md.URI == "":
		return oai.FileContentPart(oai.ChatCompletionContentPartFileFileParam{
			FileData: oai.String(dataURL(md)),
			Filename: oai.String(cmp.Or(md.Name, "document.pdf")),
		})
	}
	return oai.TextContentPart(fmt.Sprintf("[%s (%s) is not shown: the model takes images and PDFs only]", cmp.Or(md.Name, md.URI, "an attachment"), md.MIMEType))
}

// dataURL returns inline media as a data URL.
func dataURL(md runtime.Media) string {
	return "data:" + md.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(md.Data)
}

// assistantMessage sends the text as the content, the tool calls with their argument
// text unchanged, and the reasoning as reasoning_content. A message with neither text
// nor tool calls (a partial message holding reasoning alone) is left out.
func assistantMessage(msg runtime.Message, omitReasoning bool) (oai.ChatCompletionMessageParamUnion, bool) {
	var text, reasoning strings.Builder
	var calls []oai.ChatCompletionMessageToolCallUnionParam
	for _, p := range msg.Parts {
		switch p.Kind {
		case runtime.PartText:
			text.WriteString(p.Text)
		case runtime.PartReasoning:
			reasoning.WriteString(p.Text)
		case runtime.PartToolCall:
			calls = append(calls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: p.ToolCall.ID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      p.ToolCall.Name,
						Arguments: cmp.Or(p.ToolCall.Arguments, "{}"),
					},
				},
			})
		}
	}
	if text.Len() == 0 && len(calls) == 0 {
		return oai.ChatCompletionMessageParamUnion{}, false
	}
	am := &oai.ChatCompletionAssistantMessageParam{ToolCalls: calls}
	if text.Len() > 0 {
		am.Content.OfString = oai.String(text.String())
	}
	if reasoning.Len() > 0 && !omitReasoning {
		am.SetExtraFields(map[string]any{"reasoning_content": reasoning.String()})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: am}, true
}

// toolMessages sends each result as a tool message. Tool messages carry text only, so
// media a tool returned follow in one user message.
func toolMessages(msg runtime.Message) []oai.ChatCompletionMessageParamUnion {
	var out []oai.ChatCompletionMessageParamUnion
	var media []oai.ChatCompletionContentPartUnionParam
	for _, p := range msg.Parts {
		if p.Kind != runtime.PartToolResult {
			continue
		}
		r := p.ToolResult
		content := r.Output.String()
		if r.Output.IsError {
			content = "Error: " + content
		}
		out = append(out, oai.ToolMessage(content, r.CallID))
		for _, md := range r.Output.Media {
			if len(media) == 0 {
				media = append(media, oai.TextContentPart("Media returned by the tool calls above:"))
			}
			media = append(media, oai.TextContentPart(fmt.Sprintf("From %s (%s):", r.Name, r.CallID)), mediaPart(md))
		}
	}
	if len(media) > 0 {
		out = append(out, oai.UserMessage(media))
	}
	return out
}
