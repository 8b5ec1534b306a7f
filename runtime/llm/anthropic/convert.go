package anthropic

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	ant "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/runtime"
)

// params builds the request of one call.
func (m *Model) params(req *runtime.ModelRequest) (ant.MessageNewParams, error) {
	system, msgs, err := messages(req.Messages)
	if err != nil {
		return ant.MessageNewParams{}, err
	}
	p := ant.MessageNewParams{
		Model:     ant.Model(m.cfg.Model),
		MaxTokens: cmp.Or(req.Settings.MaxOutputTokens, m.cfg.MaxTokens),
		Messages:  msgs,
		System:    system,
	}
	switch {
	case m.cfg.AdaptiveThinking:
		p.Thinking = ant.ThinkingConfigParamUnion{OfAdaptive: &ant.ThinkingConfigAdaptiveParam{}}
	case m.cfg.ThinkingBudget > 0:
		p.Thinking = ant.ThinkingConfigParamUnion{OfEnabled: &ant.ThinkingConfigEnabledParam{BudgetTokens: m.cfg.ThinkingBudget}}
	}
	for _, spec := range req.Tools {
		t, err := tool(spec)
		if err != nil {
			return ant.MessageNewParams{}, err
		}
		p.Tools = append(p.Tools, t)
	}
	if req.ToolChoice != "" && m.ForcesTool() {
		// A typed run's answer: the API refuses a forced tool with extended thinking.
		p.ToolChoice = ant.ToolChoiceParamOfTool(req.ToolChoice)
	}
	if !m.cfg.NoPromptCache {
		markCache(&p)
	}
	if len(req.Settings.Extra) > 0 {
		extra := make(map[string]any, len(req.Settings.Extra))
		for k, v := range req.Settings.Extra {
			extra[k] = v
		}
		p.SetExtraFields(extra)
	}
	return p, nil
}

// maxCacheBreakpoints is how many cache_control breakpoints the Messages API takes in one
// request.
const maxCacheBreakpoints = 4

// markCache puts prompt-caching breakpoints (cache_control, ephemeral: five minutes) on
// what repeats from call to call of a run: the tool definitions (the last one), the system
// prompt (its last block), and the history, on the last block of the last two messages.
// The API caches the prefix up to each breakpoint, so the next step's call reads from the
// cache everything up to the messages that step added, and pays full price only for them;
// the breakpoint one message back keeps a hit when a step added more blocks than the API
// looks back over. Prefixes shorter than the model's minimum (1,024 tokens or more) are
// not cached, and cost nothing more.
func markCache(p *ant.MessageNewParams) {
	left := maxCacheBreakpoints
	mark := func(cc *ant.CacheControlEphemeralParam) bool {
		if cc == nil || left == 0 {
			return false
		}
		*cc = ant.NewCacheControlEphemeralParam()
		left--
		return true
	}
	if n := len(p.Tools); n > 0 {
		mark(p.Tools[n-1].GetCacheControl())
	}
	if n := len(p.System); n > 0 {
		mark(&p.System[n-1].CacheControl)
	}
	marked := 0
	for i := len(p.Messages) - 1; i >= 0 && marked < 2; i-- {
		var blocks []ant.ContentBlockParamUnion
		switch msg := p.Messages[i]; {
		case msg.OfUser != nil:
			blocks = msg.OfUser.Content
		case msg.OfAssistant != nil:
			blocks = msg.OfAssistant.Content
		}
		// The last block that takes a breakpoint: thinking blocks take none.
		for j := len(blocks) - 1; j >= 0; j-- {
			if mark(blocks[j].GetCacheControl()) {
				marked++
				break
			}
		}
	}
}

// tool converts a tool's spec; a spec without parameters takes any object.
func tool(spec runtime.ToolSpec) (ant.ToolUnionParam, error) {
	var schema ant.ToolInputSchemaParam
	if len(spec.Parameters) > 0 {
		// Raw values keep the schema's text as it is below the top level.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(spec.Parameters, &raw); err != nil {
			return ant.ToolUnionParam{}, fmt.Errorf("tool %s: parameters: %w", spec.Name, err)
		}
		for k, v := range raw {
			switch k {
			case "type": // always "object"
			case "properties":
				schema.Properties = v
			case "required":
				if err := json.Unmarshal(v, &schema.Required); err != nil {
					return ant.ToolUnionParam{}, fmt.Errorf("tool %s: parameters: required: %w", spec.Name, err)
				}
			default:
				if schema.ExtraFields == nil {
					schema.ExtraFields = map[string]any{}
				}
				schema.ExtraFields[k] = v
			}
		}
	}
	if schema.Properties == nil {
		schema.Properties = map[string]any{}
	}
	t := ant.ToolUnionParamOfTool(schema, spec.Name)
	if spec.Description != "" {
		t.OfTool.Description = ant.String(spec.Description)
	}
	return t, nil
}

// messages converts the transcript: system messages to the system prompt, the rest to
// turns, joining consecutive messages of one role.
func messages(msgs []runtime.Message) ([]ant.TextBlockParam, []ant.MessageParam, error) {
	var system []ant.TextBlockParam
	var out []ant.MessageParam
	add := func(role string, blocks []ant.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 {
			if last := &out[n-1]; role == "user" && last.OfUser != nil {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
				return
			} else if role == "assistant" && last.OfAssistant != nil {
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
				return
			}
		}
		if role == "user" {
			out = append(out, ant.NewUserMessage(blocks...))
		} else {
			out = append(out, ant.NewAssistantMessage(blocks...))
		}
	}
	for i, msg := range msgs {
		switch msg.Role {
		case runtime.RoleSystem:
			if text := msg.Text(); text != "" {
				system = append(system, ant.TextBlockParam{Text: text})
			}
		case runtime.RoleUser:
			add("user", userBlocks(msg.Parts))
		case runtime.RoleAssistant:
			add("assistant", assistantBlocks(msg.Parts))
		case runtime.RoleTool:
			add("user", toolResults(msg.Parts))
		default:
			return nil, nil, fmt.Errorf("message %d: unsupported role %s", i, msg.Role)
		}
	}
	return system, out, nil
}

func userBlocks(parts []runtime.Part) []ant.ContentBlockParamUnion {
	var blocks []ant.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Kind {
		case runtime.PartText:
			if p.Text != "" { // the API refuses empty text blocks
				blocks = append(blocks, ant.NewTextBlock(p.Text))
			}
		case runtime.PartMedia:
			blocks = append(blocks, mediaBlock(p.Media))
		}
	}
	return blocks
}

// mediaBlock sends an image as an image block and a PDF as a document block, inline
// unless the media is a URI; the API takes no other media, which is named in a text
// block instead.
func mediaBlock(md runtime.Media) ant.ContentBlockParamUnion {
	switch {
	case strings.HasPrefix(md.MIMEType, "image/") && md.URI != "":
		return ant.NewImageBlock(ant.URLImageSourceParam{URL: md.URI})
	case strings.HasPrefix(md.MIMEType, "image/"):
		return ant.NewImageBlock(ant.Base64ImageSourceParam{Data: base64.StdEncoding.EncodeToString(md.Data), MediaType: ant.Base64ImageSourceMediaType(md.MIMEType)})
	case md.MIMEType == "application/pdf" && md.URI != "":
		return ant.NewDocumentBlock(ant.URLPDFSourceParam{URL: md.URI})
	case md.MIMEType == "application/pdf":
		return ant.NewDocumentBlock(ant.Base64PDFSourceParam{Data: base64.StdEncoding.EncodeToString(md.Data)})
	}
	return ant.NewTextBlock(fmt.Sprintf("[%s (%s) is not shown: the model takes images and PDFs only]", cmp.Or(md.Name, md.URI, "an attachment"), md.MIMEType))
}

// assistantBlocks keeps the parts' order: thinking blocks from reasoning parts with this
// package's state, text blocks, tool_use blocks.
func assistantBlocks(parts []runtime.Part) []ant.ContentBlockParamUnion {
	var blocks []ant.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Kind {
		case runtime.PartReasoning:
			blocks = append(blocks, thinkingBlocks(p)...)
		case runtime.PartText:
			if p.Text != "" {
				blocks = append(blocks, ant.NewTextBlock(p.Text))
			}
		case runtime.PartToolCall:
			blocks = append(blocks, ant.NewToolUseBlock(p.ToolCall.ID, input(p.ToolCall.Arguments), p.ToolCall.Name))
		}
	}
	return blocks
}

// input returns a call's arguments as tool_use input: the text as it is when it is a
// JSON object, else {} (the API takes objects only; the runtime told the model its
// arguments were invalid in the call's result).
func input(args string) json.RawMessage {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		return json.RawMessage(args)
	}
	return json.RawMessage("{}")
}

// thinkingBlocks splits a reasoning part back into the blocks its state records. A part
// without this package's state gives none.
func thinkingBlocks(p runtime.Part) []ant.ContentBlockParamUnion {
	if len(p.State) == 0 {
		return nil
	}
	var states []thinkingState
	dec := json.NewDecoder(bytes.NewReader(p.State))
	for {
		var s thinkingState
		if err := dec.Decode(&s); err == io.EOF {
			break
		} else if err != nil || (s.Type != "thinking" && s.Type != "redacted_thinking") {
			return nil
		}
		states = append(states, s)
	}
	text := p.Text
	blocks := make([]ant.ContentBlockParamUnion, 0, len(states))
	lastThinking := -1
	for _, s := range states {
		if s.Type == "redacted_thinking" {
			blocks = append(blocks, ant.NewRedactedThinkingBlock(s.Data))
			continue
		}
		n := min(max(s.TextBytes, 0), len(text))
		lastThinking = len(blocks)
		blocks = append(blocks, ant.NewThinkingBlock(s.Signature, text[:n]))
		text = text[n:]
	}
	if text != "" && lastThinking >= 0 {
		// More text than the states account for: it belongs to the last block.
		blocks[lastThinking].OfThinking.Thinking += text
	}
	return blocks
}

// toolResults converts a tool message's results, with the media each returned.
func toolResults(parts []runtime.Part) []ant.ContentBlockParamUnion {
	var blocks []ant.ContentBlockParamUnion
	for _, p := range parts {
		if p.Kind != runtime.PartToolResult {
			continue
		}
		r := p.ToolResult
		tr := ant.ToolResultBlockParam{ToolUseID: r.CallID}
		if r.Output.IsError {
			tr.IsError = ant.Bool(true)
		}
		if text := r.Output.String(); text != "" {
			tr.Content = append(tr.Content, ant.ToolResultBlockParamContentUnion{OfText: &ant.TextBlockParam{Text: text}})
		}
		for _, md := range r.Output.Media {
			b := mediaBlock(md)
			switch {
			case b.OfImage != nil:
				tr.Content = append(tr.Content, ant.ToolResultBlockParamContentUnion{OfImage: b.OfImage})
			case b.OfDocument != nil:
				tr.Content = append(tr.Content, ant.ToolResultBlockParamContentUnion{OfDocument: b.OfDocument})
			case b.OfText != nil:
				tr.Content = append(tr.Content, ant.ToolResultBlockParamContentUnion{OfText: b.OfText})
			}
		}
		blocks = append(blocks, ant.ContentBlockParamUnion{OfToolResult: &tr})
	}
	return blocks
}
