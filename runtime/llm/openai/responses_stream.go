package openai

import (
	"cmp"
	"strings"

	"github.com/openai/openai-go/v3/responses"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
)

// responsesDecoder turns the events of one streamed Responses API call into model events.
// Usage and the finish reason come with the final event (response.completed or
// response.incomplete) and are sent as the stream ends. The served model, which
// response.created names, is held until the first event, so that a call that fails before
// it has emitted nothing and may be retried.
type responsesDecoder struct {
	yield func(runtime.ModelEvent) bool

	calls      map[string]int // function call item id to its output index
	summary    int            // the reasoning summary part being streamed, +1; 0 before one
	finished   string         // the final event's type, once it came
	incomplete string         // its incomplete_details.reason
	usage      runtime.Usage
	haveUsage  bool
	served     provider.Served // the model the response names
	// failure is the call's error when the stream said it failed (response.failed, an
	// error event): the decoder stops with it.
	failure *ProviderError
}

// send yields ev, after the report of the served model when it is the first event.
func (d *responsesDecoder) send(ev runtime.ModelEvent) bool { return d.served.Send(d.yield, ev) }

// event handles one event; it returns false when the stream is to stop: the consumer
// stopped, or the stream said the call failed (d.failure).
func (d *responsesDecoder) event(ev responses.ResponseStreamEventUnion) bool {
	d.served.Named(string(ev.Response.Model)) // response.created, and the final events
	switch ev.Type {
	case "response.output_item.added":
		if it := ev.Item; it.Type == "function_call" {
			d.calls[it.ID] = int(ev.OutputIndex)
			return d.send(runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: int(ev.OutputIndex), ID: it.CallID, Name: it.Name})
		}
		if ev.Item.Type == "reasoning" {
			d.summary = 0
		}
	case "response.output_text.delta", "response.refusal.delta":
		if ev.Delta != "" {
			return d.send(runtime.ModelEvent{Kind: runtime.ModelTextDelta, Index: -1, Text: ev.Delta})
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		text := ev.Delta
		if ev.Type == "response.reasoning_summary_text.delta" {
			// The parts of one item's summary are paragraphs of one reasoning block.
			if part := int(ev.SummaryIndex) + 1; part != d.summary {
				if d.summary > 0 {
					text = "\n\n" + text
				}
				d.summary = part
			}
		}
		if text != "" {
			return d.send(runtime.ModelEvent{Kind: runtime.ModelReasoningDelta, Index: -1, Text: text})
		}
	case "response.function_call_arguments.delta":
		if i, ok := d.calls[ev.ItemID]; ok && ev.Delta != "" {
			return d.send(runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: i, Text: ev.Delta})
		}
	case "response.output_item.done":
		if it := ev.Item; it.Type == "reasoning" {
			s := reasoningState{ID: it.ID, EncryptedContent: it.EncryptedContent}
			for _, p := range it.Summary {
				s.Summary = append(s.Summary, p.Text)
			}
			return d.send(runtime.ModelEvent{Kind: runtime.ModelReasoningState, Index: -1, State: encodeReasoning(s)})
		}
	case "response.completed", "response.incomplete":
		d.finished, d.incomplete = ev.Type, ev.Response.IncompleteDetails.Reason
		if ev.Response.JSON.Usage.Valid() {
			d.usage, d.haveUsage = responsesUsage(ev.Response.Usage), true
		}
	case "response.failed":
		e := ev.Response.Error
		d.failure = &ProviderError{Type: string(e.Code), Message: cmp.Or(e.Message, "the response failed"), Transient: transientType(string(e.Code))}
		return false
	case "error":
		d.failure = &ProviderError{Type: ev.Code, Message: cmp.Or(ev.Message, "the stream sent an error"), Transient: transientType(ev.Code)}
		return false
	}
	return true
}

// finish ends a stream that ended without an error: the usage, then the finish event. A
// stream without its final event fails, transient: the server may finish it next time.
func (d *responsesDecoder) finish() *ProviderError {
	if d.finished == "" {
		return &ProviderError{Err: runtime.ErrMissingFinishReason, Transient: true}
	}
	if d.haveUsage && !d.send(runtime.ModelEvent{Kind: runtime.ModelUsage, Index: -1, Usage: d.usage}) {
		return nil
	}
	reason := runtime.FinishStop
	switch {
	case d.finished == "response.incomplete" && strings.Contains(d.incomplete, "content_filter"):
		reason = runtime.FinishContentFilter
	case d.finished == "response.incomplete":
		reason = runtime.FinishLength // max_output_tokens, the one other reason documented
	case len(d.calls) > 0:
		reason = runtime.FinishToolCalls
	}
	d.send(runtime.ModelEvent{Kind: runtime.ModelFinish, Index: -1, Reason: reason})
	return nil
}

// responsesUsage maps a response's usage. input_tokens counts cached tokens too, and
// output_tokens reasoning tokens, as the runtime's Usage does.
func responsesUsage(u responses.ResponseUsage) runtime.Usage {
	return runtime.Usage{
		InputTokens:              u.InputTokens,
		OutputTokens:             u.OutputTokens,
		ReasoningTokens:          u.OutputTokensDetails.ReasoningTokens,
		CacheReadInputTokens:     u.InputTokensDetails.CachedTokens,
		CacheCreationInputTokens: u.InputTokensDetails.CacheWriteTokens,
	}
}
