package openai

import (
	"encoding/json"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/agentd/agentd/runtime"
)

// decoder turns the chunks of one streamed call into model events. The finish reason
// and usage are held until the stream ends, since the usage comes in a chunk of its own
// after the one with the finish reason.
type decoder struct {
	yield   func(runtime.ModelEvent, error) bool
	emitted bool // an event was yielded

	reason    string // the finish reason, once a chunk has one
	calls     bool   // a tool call was streamed
	usage     runtime.Usage
	haveUsage bool
}

func (d *decoder) send(ev runtime.ModelEvent) bool {
	d.emitted = true
	return d.yield(ev, nil)
}

// chunk handles one chunk; it returns false when the consumer stopped.
func (d *decoder) chunk(c oai.ChatCompletionChunk) bool {
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
// DeepSeek) or reasoning (Ollama, OpenRouter).
func reasoning(extra map[string]respjson.Field) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		// The SDK marks fields it does not know as not Valid; Raw has them.
		if f, ok := extra[key]; ok && f.Raw() != "" {
			var s string
			if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
				return s
			}
		}
	}
	return ""
}

// finish ends a stream that ended without an error: the usage, then the finish event.
// It returns false when the consumer stopped.
func (d *decoder) finish() (bool, *ProviderError) {
	if d.reason == "" {
		return true, &ProviderError{Err: runtime.ErrMissingFinishReason, Transient: true}
	}
	if d.haveUsage && !d.send(runtime.ModelEvent{Kind: runtime.ModelUsage, Index: -1, Usage: d.usage}) {
		return false, nil
	}
	return d.send(runtime.ModelEvent{Kind: runtime.ModelFinish, Index: -1, Reason: finishReason(d.reason, d.calls)}), nil
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
