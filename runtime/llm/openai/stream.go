package openai

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// decoder turns the chunks of one streamed call into model events. The finish reason
// and usage are held until the stream ends, since the usage comes in a chunk of its own
// after the one with the finish reason. The served model, which every chunk names, is
// held until the first event, so that a call that fails before it has emitted nothing
// and may be retried.
type decoder struct {
	yield func(runtime.ModelEvent) bool

	reason    string // the finish reason, once a chunk has one
	calls     bool   // a tool call was streamed
	usage     runtime.Usage
	haveUsage bool
	served    provider.Served // the first model a chunk named
}

// send yields ev, after the report of the served model when it is the first event.
func (d *decoder) send(ev runtime.ModelEvent) bool { return d.served.Send(d.yield, ev) }

// chunk handles one chunk; it returns false when the consumer stopped.
func (d *decoder) chunk(c oai.ChatCompletionChunk) bool {
	// Some servers leave the model out of the chunks that carry no choice.
	d.served.Named(c.Model)
	if c.JSON.Usage.Valid() {
		d.usage, d.haveUsage = usage(c.Usage), true
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 { // requests ask for one choice
			continue
		}
		if !d.delta(&ch.Delta) {
			return false
		}
		if ch.FinishReason != "" {
			d.reason = ch.FinishReason
		}
	}
	return true
}

func (d *decoder) delta(delta *oai.ChatCompletionChunkChoiceDelta) bool {
	if r := reasoning(delta.JSON.ExtraFields); r != "" {
		if !d.send(runtime.ModelEvent{Kind: runtime.ModelReasoningDelta, Index: -1, Text: r}) {
			return false
		}
	}
	for _, text := range []string{delta.Content, delta.Refusal} {
		if text != "" && !d.send(runtime.ModelEvent{Kind: runtime.ModelTextDelta, Index: -1, Text: text}) {
			return false
		}
	}
	for i := range delta.ToolCalls {
		tc := &delta.ToolCalls[i]
		ev := runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: -1, ID: tc.ID, Name: tc.Function.Name, Text: tc.Function.Arguments}
		if tc.JSON.Index.Valid() {
			ev.Index = int(tc.Index)
		}
		if ev.ID == "" && ev.Name == "" && ev.Text == "" {
			continue
		}
		d.calls = true
		if !d.send(ev) {
			return false
		}
	}
	return true
}

// reasoning returns the reasoning text of a delta: reasoning_content (vLLM, llama.cpp,
// DeepSeek) or reasoning (Ollama, OpenRouter). Null, absent and non-string values give "".
func reasoning(extra map[string]respjson.Field) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		// The SDK marks fields it does not know as not Valid; Raw has them.
		if f, ok := extra[key]; ok {
			if s, ok := unquote(f.Raw()); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

// unquote decodes the JSON string literal s; ok is false when s is not one (null, a
// number, an object, or a literal with a broken escape). Unlike encoding/json it keeps
// bytes that are not valid UTF-8 as they are: a delta may end or begin in the middle of a
// character, and the runtime joins the halves. A literal without escapes, the common
// case, comes back as a substring of s, without copying.
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	s = s[1 : len(s)-1]
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s, true
	}
	b := make([]byte, 0, len(s))
	for {
		b = append(b, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return "", false
		}
		switch c := s[1]; c {
		case '"', '\\', '/':
			b = append(b, c)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(s[2:])
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A pair takes two escapes; a lone half becomes U+FFFD, as in
				// encoding/json, and what follows it is decoded on its own.
				r2, ok := rune(0), false
				if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
					r2, ok = hex4(s[8:])
				}
				if r = utf16.DecodeRune(r, r2); ok && r != utf8.RuneError {
					s = s[6:]
				}
			}
			b = utf8.AppendRune(b, r)
			s = s[4:]
		default:
			return "", false
		}
		s = s[2:]
		if i = strings.IndexByte(s, '\\'); i < 0 {
			return string(append(b, s...)), true
		}
	}
}

// hex4 decodes the four hex digits that s begins with.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// finish ends a stream that ended without an error: the usage, then the finish event.
// A stream without a finish reason fails, transient: the server may finish it next time.
func (d *decoder) finish() *ProviderError {
	if d.reason == "" {
		return &ProviderError{Err: runtime.ErrMissingFinishReason, Transient: true}
	}
	if d.haveUsage && !d.send(runtime.ModelEvent{Kind: runtime.ModelUsage, Index: -1, Usage: d.usage}) {
		return nil
	}
	d.send(runtime.ModelEvent{Kind: runtime.ModelFinish, Index: -1, Reason: finishReason(d.reason, d.calls)})
	return nil
}

// finishReason maps a Chat Completions finish reason. Servers that say "stop" after
// calling tools (older Ollama) report tool calls; reasons no server documents end the
// call as a stop.
func finishReason(r string, calls bool) runtime.FinishReason {
	switch r {
	case "length":
		return runtime.FinishLength
	case "content_filter":
		return runtime.FinishContentFilter
	case "tool_calls", "function_call":
		return runtime.FinishToolCalls
	}
	if calls {
		return runtime.FinishToolCalls
	}
	return runtime.FinishStop
}

// usage maps the usage of the final chunk. prompt_tokens counts cached tokens too, and
// completion_tokens reasoning tokens, as the runtime's Usage does.
func usage(u oai.CompletionUsage) runtime.Usage {
	return runtime.Usage{
		InputTokens:              u.PromptTokens,
		OutputTokens:             u.CompletionTokens,
		ReasoningTokens:          u.CompletionTokensDetails.ReasoningTokens,
		CacheReadInputTokens:     u.PromptTokensDetails.CachedTokens,
		CacheCreationInputTokens: u.PromptTokensDetails.CacheWriteTokens,
	}
}
