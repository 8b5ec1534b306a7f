package demo

import (
	"context"
	"iter"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/runtime"
)

// ModelName is the name of the demo model, as [Model.Name] returns it.
const ModelName = "demo:agentd-demo"

// Config configures a [Model].
type Config struct {
	// Delay is the pause before each delta but the first, so that a person sees the
	// answer stream; agentd uses about 20ms. Zero streams without pausing.
	Delay time.Duration
}

// Model is the demo model. It keeps no state between calls: the same request always
// gets the same events. It is safe for concurrent use.
type Model struct {
	cfg Config
}

// New returns the demo model.
func New(cfg Config) *Model { return &Model{cfg: cfg} }

// Name returns [ModelName].
func (*Model) Name() string { return ModelName }

// Stream answers req, as the package documentation describes. The sequence ends with a
// ModelFinish event, or with ctx's error as soon as ctx is done. It is single-use and
// starts no goroutine; breaking out of it stops the call.
func (m *Model) Stream(ctx context.Context, req *runtime.ModelRequest) iter.Seq2[runtime.ModelEvent, error] {
	return func(yield func(runtime.ModelEvent, error) bool) {
		if req == nil {
			req = &runtime.ModelRequest{}
		}
		r := respond(req)
		if req.Output != nil && r.call == nil {
			r.text = typedAnswer(req.Output.Schema, r.text)
		}
		s := &streamer{ctx: ctx, yield: yield, delay: m.cfg.Delay}
		var out int
		if r.call != nil {
			out = len(r.call.Name) + len(r.call.Arguments)
			for i, frag := range fragments(r.call.Arguments, argsFragment) {
				ev := runtime.ModelEvent{Kind: runtime.ModelToolCallDelta, Index: 0, Text: frag}
				if i == 0 {
					ev.ID, ev.Name = r.call.ID, r.call.Name
				}
				if !s.delta(ev) {
					return
				}
			}
		} else {
			out = len(r.text)
			for _, chunk := range words(r.text, wordsPerDelta) {
				if !s.delta(runtime.ModelEvent{Kind: runtime.ModelTextDelta, Index: -1, Text: chunk}) {
					return
				}
			}
		}
		usage := runtime.Usage{InputTokens: tokens(requestSize(req)), OutputTokens: tokens(out)}
		if !s.send(runtime.ModelEvent{Kind: runtime.ModelUsage, Index: -1, Usage: usage}) {
			return
		}
		reason := runtime.FinishStop
		if r.call != nil {
			reason = runtime.FinishToolCalls
		}
		s.send(runtime.ModelEvent{Kind: runtime.ModelFinish, Index: -1, Reason: reason})
	}
}

// How finely answers are streamed.
const (
	wordsPerDelta = 3
	argsFragment  = 12 // bytes, at most, unless one character is longer
)

// streamer yields events, pausing between deltas and stopping when the context is done
// or the consumer stops.
type streamer struct {
	ctx    context.Context
	yield  func(runtime.ModelEvent, error) bool
	delay  time.Duration
	deltas int
}

// delta sends a delta, after the delay if it is not the first.
func (s *streamer) delta(ev runtime.ModelEvent) bool {
	if s.deltas > 0 && s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-s.ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	s.deltas++
	return s.send(ev)
}

func (s *streamer) send(ev runtime.ModelEvent) bool {
	if err := s.ctx.Err(); err != nil {
		s.yield(runtime.ModelEvent{}, err)
		return false
	}
	return s.yield(ev, nil)
}

// words splits text into chunks of n words, each keeping the spaces that follow it, so
// that the chunks join to text.
func words(text string, n int) []string {
	var chunks []string
	count, start := 0, 0
	inWord := false
	for i, r := range text {
		space := r == ' ' || r == '\n' || r == '\t'
		if !space && !inWord {
			if count == n {
				chunks = append(chunks, text[start:i])
				start, count = i, 0
			}
			count++
		}
		inWord = !space
	}
	if start < len(text) {
		chunks = append(chunks, text[start:])
	}
	return chunks
}

// fragments splits s into pieces of at most size bytes, never inside a UTF-8 sequence:
// each fragment travels as a string of its own, which must stay valid UTF-8.
func fragments(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if out == nil {
		out = []string{""}
	}
	return out
}

// tokens estimates the tokens of n bytes: one per four, at least one.
func tokens(n int) int64 { return int64(max(1, (n+3)/4)) }

// requestSize is the size in bytes of what a real model would read.
func requestSize(req *runtime.ModelRequest) int {
	n := 0
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			n += len(p.Text) + len(p.ToolCall.Name) + len(p.ToolCall.Arguments) + len(p.ToolResult.Output.String())
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}

// callID returns the id of the demo's call in a request with n messages. A transcript
// grows by at least one message a step, so ids never repeat within one.
func callID(n int) string { return "call_demo_" + strconv.Itoa(n) }

// hasTool reports whether req offers the named tool.
func hasTool(req *runtime.ModelRequest, name string) bool {
	for _, t := range req.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}
