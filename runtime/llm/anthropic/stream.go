package anthropic

import (
	"encoding/json"
	"strings"

	ant "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// decoder turns the events of one streamed call into model events. Usage and the stop
// reason are held until the stream ends, so that usage comes once, before the finish.
// The served model, which message_start names, is held until the first event, so that a
// call that fails before it has emitted nothing and may be retried.
type decoder struct {
	yield func(runtime.ModelEvent) bool

	blocks map[int64]*block // by content block index
	stop   string           // the stop reason, once message_delta has one
	usage  runtime.Usage    // input_tokens as the API counts them: cache excluded
	seen   bool             // usage came
	served provider.Served  // message_start's model
}

// block is what a content block needs until it stops.
type block struct {
	kind      string // "text", "thinking", "redacted_thinking", "tool_use", or another
	textBytes int    // thinking text streamed so far
	signature strings.Builder
	data      string // redacted_thinking's
	input     string // tool_use's input at content_block_start
	args      bool   // an input_json_delta with text came
}

// send yields ev, after the report of the served model when it is the first event.
func (d *decoder) send(ev runtime.ModelEvent) bool { return d.served.Send(d.yield, ev) }

// event handles one stream event; it returns false when the consumer stopped.
func (d *decoder) event(ev ant.MessageStreamEventUnion) bool {
	switch ev.Type {
	case "message_start":
		d.served.Named(string(ev.Message.Model))
		d.addUsage(ev.Message.Usage.JSON.InputTokens.Valid(), ev.Message.Usage.InputTokens,
			ev.Message.Usage.CacheReadInputTokens, ev.Message.Usage.CacheCreationInputTokens, ev.Message.Usage.OutputTokens)
	case "content_block_start":
		return d.start(ev.Index, &ev.ContentBlock)
	case "content_block_delta":
		return d.delta(ev.Index, &ev.Delta)
	case "content_block_stop":
		return d.stopBlock(ev.Index)
	case "message_delta":
		if ev.Delta.StopReason != "" {
			d.stop = string(ev.Delta.StopReason)
		}
		u := &ev.Usage
		d.addUsage(u.JSON.InputTokens.Valid(), u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	}
	return true
}

// addUsage takes a usage report. message_delta's counts are cumulative, and may leave
// out those message_start gave, so each count keeps its largest value.
func (d *decoder) addUsage(haveInput bool, in, cacheRead, cacheWrite, out int64) {
	d.seen = true
	if haveInput {
		d.usage.InputTokens = max(d.usage.InputTokens, in)
	}
	d.usage.CacheReadInputTokens = max(d.usage.CacheReadInputTokens, cacheRead)
	d.usage.CacheCreationInputTokens = max(d.usage.CacheCreationInputTokens, cacheWrite)
	d.usage.OutputTokens = max(d.usage.OutputTokens, out)
}

func (d *decoder) start(index int64, cb *ant.ContentBlockStartEventContentBlockUnion) bool {
	if d.blocks == nil {
		d.blocks = map[int64]*block{}
	}
	b := &block{kind: cb.Type}
	d.blocks[index] = b
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			return d.send(runtime.ModelEvent{Kind: runtime.ModelTextDelta, Index: -1, Text: cb.Text})
		}
	case "thinking":
		b.signature.WriteString(cb.Signature)
		if cb.Thinking != "" {
			b.textBytes += len(cb.Thinking)
			return d.send(runtime.ModelEvent{Kind: runtime.ModelReasoningDelta, Index: -1, Text: cb.Thinking})
		}
	case "redacted_thinking":
		b.data = cb.Data
	case "tool_use":
		b.input = cb.JSON.Input.Raw()
		return d.send(runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: int(index), ID: cb.ID, Name: cb.Name})
	}
	return true
}

func (d *decoder) delta(index int64, delta *ant.MessageStreamEventUnionDelta) bool {
	b := d.blocks[index]
	if b == nil {
		return true // a delta of a block that never started: nothing to add it to
	}
	switch delta.Type {
	case "text_delta":
		if delta.Text != "" {
			return d.send(runtime.ModelEvent{Kind: runtime.ModelTextDelta, Index: -1, Text: delta.Text})
		}
	case "thinking_delta":
		if delta.Thinking != "" {
			b.textBytes += len(delta.Thinking)
			return d.send(runtime.ModelEvent{Kind: runtime.ModelReasoningDelta, Index: -1, Text: delta.Thinking})
		}
	case "signature_delta":
		b.signature.WriteString(delta.Signature)
	case "input_json_delta":
		if b.kind == "tool_use" && delta.PartialJSON != "" {
			b.args = true
			return d.send(runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: int(index), Text: delta.PartialJSON})
		}
	}
	return true
}

func (d *decoder) stopBlock(index int64) bool {
	b := d.blocks[index]
	if b == nil {
		return true
	}
	delete(d.blocks, index)
	switch b.kind {
	case "thinking":
		return d.send(runtime.ModelEvent{Kind: runtime.ModelReasoningState, Index: -1,
			State: encodeState(thinkingState{Type: "thinking", Signature: b.signature.String(), TextBytes: b.textBytes})})
	case "redacted_thinking":
		return d.send(runtime.ModelEvent{Kind: runtime.ModelReasoningState, Index: -1,
			State: encodeState(thinkingState{Type: "redacted_thinking", Data: b.data})})
	case "tool_use":
		if !b.args {
			// No fragment came: the input was whole at the start, or empty.
			input := b.input
			if input == "" || input == "null" {
				input = "{}"
			}
			return d.send(runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: int(index), Text: input})
		}
	}
	return true
}

// finish ends a stream that ended without an error: the usage, then the finish event.
// A stream without a finish reason fails, transient: the server may finish it next time.
func (d *decoder) finish() *ProviderError {
	if d.stop == "" {
		return &ProviderError{Err: runtime.ErrMissingFinishReason, Transient: true}
	}
	if d.seen {
		u := d.usage
		// The runtime counts cached input as input.
		u.InputTokens += u.CacheReadInputTokens + u.CacheCreationInputTokens
		if !d.send(runtime.ModelEvent{Kind: runtime.ModelUsage, Index: -1, Usage: u}) {
			return nil
		}
	}
	d.send(runtime.ModelEvent{Kind: runtime.ModelFinish, Index: -1, Reason: finishReason(d.stop)})
	return nil
}

// finishReason maps a stop reason.
func finishReason(r string) runtime.FinishReason {
	switch ant.StopReason(r) {
	case ant.StopReasonToolUse:
		return runtime.FinishToolCalls
	case ant.StopReasonMaxTokens, ant.StopReasonModelContextWindowExceeded:
		return runtime.FinishLength
	case ant.StopReasonRefusal:
		return runtime.FinishContentFilter
	}
	// end_turn, stop_sequence, pause_turn (a server tool's long turn, which the caller
	// continues by calling again), and reasons added later.
	return runtime.FinishStop
}

// thinkingState is the opaque state of one thinking or redacted_thinking block: one line
// of JSON. TextBytes is the length of the block's thinking text, so that a part holding
// several blocks, joined by the runtime, splits back into them.
type thinkingState struct {
	Type      string `json:"type"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	TextBytes int    `json:"text_bytes,omitempty"`
}

func encodeState(s thinkingState) []byte {
	b, _ := json.Marshal(s) // strings and an int: cannot fail
	return append(b, '\n')
}
