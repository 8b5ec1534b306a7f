package runtime

import "cmp"

// assembler builds one assistant message from a model stream, emitting every delta as an
// event at once. It keeps the order in which text, reasoning and tool calls arrived, and
// joins tool-call fragments by call id, falling back to the provider's index, falling back
// to the most recent call.
type assembler struct {
	emit  func(Event) bool
	newID func(string) string
	// used reports whether a call id is taken already (nil: none is); a call the model
	// gives a taken id is renamed.
	used     func(id string) bool
	executor func(name string) Executor
	msgID    string
	stepID   string

	parts   []*block
	open    *block // the text or reasoning block deltas append to, if any
	calls   []*callBlock
	byID    map[string]*callBlock
	byIndex map[int]*callBlock
	emitted bool // whether any event was emitted
}

type block struct {
	kind  PartKind
	id    string
	text  []byte
	state []byte
	call  *callBlock
	tail  string // the start of a character split across deltas, not emitted yet
}

type callBlock struct {
	id, name string
	args     []byte // every fragment; those that came before the call started go out with it
	started  bool   // ToolCallStarted was emitted
	tail     string // the start of a character split across fragments, not emitted yet
}

// completeUTF8 returns the part of tail+delta that ends on a character boundary, and the
// incomplete character after it. Providers may split a multi-byte character across
// deltas; events carry whole characters only, since each becomes a protobuf string. In
// the common case (no tail, delta ends on a boundary) it allocates nothing.
func completeUTF8(tail, delta string) (emit, rest string) {
	if tail != "" {
		delta = tail + delta
	}
	n := len(delta)
	for i := 1; i <= 3 && i <= n; i++ {
		c := delta[n-i]
		if c < 0x80 {
			break // ASCII: complete
		}
		if c >= 0xC0 { // the first byte of a character: is all of it here?
			need := 2
			if c >= 0xF0 {
				need = 4
			} else if c >= 0xE0 {
				need = 3
			}
			if need > i {
				return delta[:n-i], delta[n-i:]
			}
			break
		}
	}
	return delta, ""
}

func newAssembler(emit func(Event) bool, newID func(string) string, executor func(string) Executor, msgID, stepID string) *assembler {
	return &assembler{emit: emit, newID: newID, executor: executor, msgID: msgID, stepID: stepID}
}

func (a *assembler) send(ev Event) bool {
	a.emitted = true
	return a.emit(ev)
}

// closeOpen finishes the open text or reasoning block.
func (a *assembler) closeOpen(partial bool) bool {
	b := a.open
	if b == nil {
		return true
	}
	a.open = nil
	if b.tail != "" { // an incomplete character at the end of the block goes out as it is
		ev := deltaEvent(b, b.tail)
		b.tail = ""
		if !a.send(ev) {
			return false
		}
	}
	return a.send(&MessageFinished{MessageID: b.id, Role: RoleAssistant, Kind: blockKind(b.kind), State: b.state, Partial: partial})
}

func blockKind(k PartKind) BlockKind {
	if k == PartReasoning {
		return BlockReasoning
	}
	return BlockText
}

// openBlock returns the open block of kind k, starting one if needed.
func (a *assembler) openBlock(k PartKind) (*block, bool) {
	if a.open != nil && a.open.kind == k {
		return a.open, true
	}
	if !a.closeOpen(false) {
		return nil, false
	}
	// Room for a typical block up front saves the first few regrowths of the buffer.
	b := &block{kind: k, id: a.newID("msg"), text: make([]byte, 0, 256)}
	a.parts = append(a.parts, b)
	a.open = b
	return b, a.send(&MessageStarted{MessageID: b.id, ParentID: a.msgID, StepID: a.stepID, Role: RoleAssistant, Kind: blockKind(k)})
}

// delta appends a text or reasoning delta (k is PartText or PartReasoning) to the open
// block of its kind.
func (a *assembler) delta(k PartKind, delta string) bool {
	if delta == "" {
		return true
	}
	b, ok := a.openBlock(k)
	if !ok {
		return false
	}
	b.text = append(b.text, delta...)
	if delta, b.tail = completeUTF8(b.tail, delta); delta == "" {
		return true
	}
	return a.send(deltaEvent(b, delta))
}

// deltaEvent is the event of a delta of text or reasoning block b.
func deltaEvent(b *block, delta string) Event {
	if b.kind == PartReasoning {
		return &ReasoningDelta{MessageID: b.id, Delta: delta}
	}
	return &TextDelta{MessageID: b.id, Delta: delta}
}

// reasoningState attaches opaque state to the current reasoning block (or a new, empty
// one: redacted reasoning has state and no text).
func (a *assembler) reasoningState(state []byte) bool {
	b := a.open
	if b == nil || b.kind != PartReasoning {
		if n := len(a.parts); n > 0 && a.parts[n-1].kind == PartReasoning && a.open == nil {
			b = a.parts[n-1]
		} else {
			var ok bool
			if b, ok = a.openBlock(PartReasoning); !ok {
				return false
			}
		}
	}
	b.state = append(b.state, state...)
	return true
}

// toolDelta joins a tool-call fragment to its call.
func (a *assembler) toolDelta(ev ModelEvent) bool {
	c, indexed := a.findCall(ev)
	if c == nil {
		if !a.closeOpen(false) {
			return false
		}
		c = &callBlock{id: ev.ID, args: make([]byte, 0, 128)}
		if c.id == "" || a.used != nil && a.used(c.id) {
			c.id = a.newID("call")
		}
		if a.byID == nil {
			a.byID = map[string]*callBlock{}
			a.byIndex = map[int]*callBlock{}
		}
		a.byID[cmp.Or(ev.ID, c.id)] = c // the model's fragments name it by its own id
		a.calls = append(a.calls, c)
		a.parts = append(a.parts, &block{kind: PartToolCall, call: c})
	}
	if ev.Index >= 0 && !indexed {
		a.byIndex[ev.Index] = c
	}
	if c.name == "" && ev.Name != "" {
		c.name = ev.Name
	}
	c.args = append(c.args, ev.Text...)
	if !c.started {
		if c.name == "" {
			return true // announced once the tool's name is known
		}
		return a.startCall(c)
	}
	delta := ev.Text
	if delta, c.tail = completeUTF8(c.tail, delta); delta == "" {
		return true
	}
	return a.send(&ToolCallArgsDelta{CallID: c.id, Delta: delta})
}

// findCall returns the call ev continues, or nil for a new call; indexed reports that
// the call was found by ev's index, which then needs no update.
func (a *assembler) findCall(ev ModelEvent) (c *callBlock, indexed bool) {
	if ev.ID != "" {
		return a.byID[ev.ID], false // a new id is a new call, whatever its index says
	}
	if ev.Index >= 0 {
		if c := a.byIndex[ev.Index]; c != nil {
			return c, true
		}
		if len(a.calls) > 0 && len(a.byIndex) == 0 {
			return a.calls[len(a.calls)-1], false
		}
		return nil, false
	}
	if n := len(a.calls); n > 0 {
		return a.calls[n-1], false
	}
	return nil, false
}

// startCall announces a call, with the fragments that came before: until then every
// fragment went to args only.
func (a *assembler) startCall(c *callBlock) bool {
	c.started = true
	if !a.send(&ToolCallStarted{CallID: c.id, Name: c.name, MessageID: a.msgID, StepID: a.stepID, Executor: a.executor(c.name)}) {
		return false
	}
	if len(c.args) == 0 {
		return true
	}
	var early string
	if early, c.tail = completeUTF8("", string(c.args)); early == "" {
		return true
	}
	return a.send(&ToolCallArgsDelta{CallID: c.id, Delta: early})
}

// finish closes the stream and returns the message. Every call's arguments are final now,
// so ToolCallArgsDone goes out for each, in call order.
func (a *assembler) finish() (Message, bool) {
	if !a.closeOpen(false) {
		return Message{}, false
	}
	for _, c := range a.calls {
		if !c.started && !a.startCall(c) {
			return Message{}, false
		}
		if c.tail != "" {
			if !a.send(&ToolCallArgsDelta{CallID: c.id, Delta: c.tail}) {
				return Message{}, false
			}
			c.tail = ""
		}
		if !a.send(&ToolCallArgsDone{CallID: c.id, Arguments: string(c.args)}) {
			return Message{}, false
		}
	}
	return a.message(false), true
}

// abort closes the stream cut short: the open block is finished as partial, started calls
// are cancelled, and the message keeps its text and reasoning only.
func (a *assembler) abort(reason string) Message {
	a.closeOpen(true)
	var ids []string
	for _, c := range a.calls {
		if c.started {
			ids = append(ids, c.id)
		}
	}
	if len(ids) > 0 {
		a.send(&ToolCallsCancelled{CallIDs: ids, Reason: reason})
	}
	return a.message(true)
}

func (a *assembler) message(partial bool) Message {
	m := Message{ID: a.msgID, Role: RoleAssistant, Partial: partial, Parts: make([]Part, 0, len(a.parts))}
	for _, b := range a.parts {
		switch b.kind {
		case PartToolCall:
			if partial {
				continue
			}
			c := b.call
			m.Parts = append(m.Parts, Part{Kind: PartToolCall, ToolCall: ToolCall{ID: c.id, Name: c.name, Arguments: string(c.args), Executor: a.executor(c.name)}})
		default:
			m.Parts = append(m.Parts, Part{Kind: b.kind, ID: b.id, Text: string(b.text), State: b.state})
		}
	}
	return m
}
