package runs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
)

// Sub-agents: an agent offered to another as a tool. A call of the tool starts a child
// run of the named agent: a run of its own, with its own id, journal and record, which
// AttachRun follows and whose record names its parent run and call, its tree's root and
// its depth. The call's result is the child's answer: its final text, or its typed
// result as JSON. A child that does not complete gives the call an error result the
// parent's model can correct from.
//
// The call waits for the child on its goroutine, as a tool waits for its work. The
// child runs under its parent's approval policy and is answered by its tree's clients:
// its approval requests show on the root's streams (as child_event), and a decision
// sent to the root, on a stream or by SendRunInput, reaches the child that asked by
// the approval's id (routeLocked), as a steer does by the child's run id. A child of a
// run nobody can answer (StartRun's and ExecuteRun's, under INTERRUPT) ends
// AWAITING_INPUT when it needs a person, and the call says so. Cancelling the parent
// cancels the child.

// Subagent describes an agent offered as a tool.
type Subagent struct {
	// Agent names the agent a call runs.
	Agent string
	// Tool is the tool's name; "" means Agent.
	Tool string
	// Description tells the model what the agent does; "" makes one of Agent.
	Description string
	// Timeout bounds a call, the child's whole run; 0 means 10 minutes.
	Timeout time.Duration
}

// DefaultMaxDepth is Config.MaxDepth's default, and DefaultMaxChildren
// Config.MaxChildren's.
const (
	DefaultMaxDepth    = 4
	DefaultMaxChildren = 32
)

// subagentParameters is the schema of a sub-agent call: the task, in words.
const subagentParameters = `{"type":"object","properties":{"task":{"type":"string","description":"What the agent is to do, with everything it needs to know: it sees nothing else of this conversation."}},"required":["task"],"additionalProperties":false}`

// SubagentTool returns the tool a parent agent calls sa's agent through. Its calls run
// only in the engine's runs (a runtime.Agent run alone gets an error result).
func SubagentTool(sa Subagent) runtime.Tool {
	sa.Tool = cmp.Or(sa.Tool, sa.Agent)
	spec := runtime.ToolSpec{
		Name:        sa.Tool,
		Description: cmp.Or(sa.Description, fmt.Sprintf("Delegate a task to the agent %s, which works on it on its own and answers with its result.", sa.Agent)),
		Parameters:  json.RawMessage(subagentParameters),
		Timeout:     cmp.Or(sa.Timeout, 10*time.Minute),
		// Children run side by side, as many as the parent's parallel_tools allows.
		Parallel: true,
	}
	return &subagentTool{sa: sa, spec: spec}
}

type subagentTool struct {
	sa   Subagent
	spec runtime.ToolSpec
}

func (t *subagentTool) Spec() runtime.ToolSpec { return t.spec }

func (t *subagentTool) Execute(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
	parent, _ := ctx.Value(sessionKey{}).(*session)
	if parent == nil {
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s can be called only in a run of agentd's engine", t.sa.Agent)), nil
	}
	var args struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil || strings.TrimSpace(args.Task) == "" {
		return runtime.ErrorOutput(`give the agent its task: {"task": "..."}`), nil
	}
	return parent.srv.runChild(ctx, parent, t.sa, call, args.Task)
}

// sessionKey carries a run's session in the context its tools run in.
type sessionKey struct{}

// lineage places a run in its tree; the zero value is a root's.
type lineage struct {
	parent, parentCall, root string
	depth                    int
	// childID is the id the child run takes.
	childID string
}

type lineageKey struct{}

// childRunID is the id of the child run a call starts: the same for the same call of the
// same thread, however often the call runs (a resumed run, one taken up elsewhere), so
// that the store refuses to start it twice and the call finds the run it started.
func childRunID(thread, callID string) string {
	sum := sha256.Sum256([]byte(thread + "\x00" + callID))
	return "run_k" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:15]))
}

// runChild runs sa's agent on task as a child of parent, for parent's call, and returns
// the call's result, or runtime.ErrInterrupt when the child parked and parent parks
// with it.
func (s *Manager) runChild(ctx context.Context, parent *session, sa Subagent, call runtime.ToolCall, task string) (runtime.Output, error) {
	lin := lineage{parent: parent.runID, parentCall: call.ID, root: cmp.Or(parent.lineage.root, parent.runID), depth: parent.lineage.depth + 1}
	if lin.depth > s.cfg.MaxDepth {
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s was not started: runs nest at most %d deep, and this one would be %d deep", sa.Agent, s.cfg.MaxDepth, lin.depth)), nil
	}
	lin.childID = childRunID(parent.thread, call.ID)
	if refusal := s.childRefusal(parent, lin.childID); refusal != "" {
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s was not started: %s", sa.Agent, refusal)), nil
	}
	spec := &agentdv1.RunSpec{
		Agent: sa.Agent,
		Input: task,
		// The tree's clients answer the child as they answer its root: under the root's
		// policy, what the child needs a person for is asked on the root's streams.
		Config: &agentdv1.RunConfig{ApprovalPolicy: parent.policy},
	}
	st, err := s.Start(context.WithValue(ctx, lineageKey{}, lin), ModeChild, spec)
	if err != nil {
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s was not started: %v", sa.Agent, err)), nil
	}
	if st.Outcome != StartedNew {
		// The call ran before (its run parked and woke, or was taken up): its child is
		// the one to wait for.
		return s.awaitChild(ctx, parent, sa, call, st.RunID)
	}
	parent.mu.Lock()
	parent.childrenStarted++
	parent.mu.Unlock()
	child := st.ss
	child.wakeCtx = context.WithoutCancel(ctx) // what a wake of the child runs with
	leave := adopt(parent, child, sa.Agent, call.ID)
	defer leave()
	child.own(st.req)
	return childResult(parent, child, sa.Agent)
}

// adopt makes child, a run parent's call started, parent's: its events shown on
// parent's streams, the input for it that parent and the runs above take reaching it.
// It returns what undoes the second, once the call no longer waits for child.
func adopt(parent, child *session, agent, callID string) (leave func()) {
	child.mu.Lock()
	child.childEvents, child.forward = parent.childEvents, forwarder(parent, child, agent, callID)
	child.tree, child.parentRun = cmp.Or(parent.tree, parent), parent
	child.mu.Unlock()
	for a := parent; a != nil; a = a.parentRun {
		a.joinTree(child)
	}
	parent.mu.Lock()
	if parent.kids == nil {
		parent.kids = map[string]*session{}
	}
	parent.kids[child.runID] = child
	parent.mu.Unlock()
	return func() {
		for a := parent; a != nil; a = a.parentRun {
			a.leaveTree(child)
		}
	}
}

// childResult is the result of parent's call once child's stretch is over: its answer
// when it ended, or runtime.ErrInterrupt when it parked, parent parking with it.
func childResult(parent, child *session, agent string) (runtime.Output, error) {
	child.mu.Lock()
	ph, rf, status := child.phase, child.result, child.status
	child.mu.Unlock()
	if ph == phaseParked {
		return parent.parkOnChild()
	}
	parent.mu.Lock()
	delete(parent.kids, child.runID) // the call has the child's end: nothing waits for it
	parent.mu.Unlock()
	if rf == nil {
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s (run %s) failed: %v", agent, child.runID, status)), nil
	}
	parent.noteChild(agent, child.runID, rf)
	return childOutput(agent, child.runID, rf), nil
}

// parkOnChild parks the run, a child of which parked: nobody can answer the tree.
// The child's end wakes it (wakeParent), as does any input for it.
func (ss *session) parkOnChild() (runtime.Output, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.startParkingLocked()
	return runtime.Output{}, runtime.ErrInterrupt
}

// awaitChild waits for the child run id that parent's call started before: a parked
// run of parent woke, and its call runs again. A child this server keeps is adopted
// again and waited for while the tree can be answered; parked with nobody to answer,
// it parks parent again. One in the store alone is followed to its end.
func (s *Manager) awaitChild(ctx context.Context, parent *session, sa Subagent, call runtime.ToolCall, id string) (runtime.Output, error) {
	s.liveMu.Lock()
	child := s.live[id]
	s.liveMu.Unlock()
	if child == nil {
		resp, err := s.executedAlready(ctx, id)
		if resp.GetResult() == nil {
			return runtime.ErrorOutput(fmt.Sprintf("the agent %s (run %s) failed: %v", sa.Agent, id, err)), nil
		}
		parent.noteChild(sa.Agent, id, resp.GetResult())
		return childOutput(sa.Agent, id, resp.GetResult()), nil
	}
	leave := adopt(parent, child, sa.Agent, call.ID)
	defer leave()
	// Cancelling the call cancels the child, parked or not: as a client's cancel would.
	stop := context.AfterFunc(ctx, func() {
		child.mu.Lock()
		defer child.mu.Unlock()
		child.readyLocked()
		if child.phase != phaseEnded {
			child.cancel(context.Cause(ctx))
		}
	})
	defer stop()
	for {
		child.mu.Lock()
		ph, done, changed := child.phase, child.done, child.phaseChangedLocked()
		child.mu.Unlock()
		parent.mu.Lock()
		parentChanged := parent.phaseChangedLocked()
		parent.mu.Unlock()
		var nobody <-chan struct{}
		switch ph {
		case phaseEnded:
			<-done
			return childResult(parent, child, sa.Agent)
		case phaseParked:
			parent.mu.Lock()
			// Parking already (another call's child parked): the stretch parks whatever
			// comes, and input for the tree waits for it to.
			parks := parent.phase == phaseParking || parent.canParkLocked() || (parent.tree == nil && !s.shared && parent.rootParksLocked())
			if root := cmp.Or(parent.tree, parent); root != parent {
				root.mu.Lock()
				nobody = root.nobody
				root.mu.Unlock()
			} else {
				nobody = parent.nobody
			}
			parent.mu.Unlock()
			if parks {
				return parent.parkOnChild()
			}
		}
		select {
		case <-changed:
		case <-parentChanged:
		case <-nobody:
		case <-ctx.Done():
			return runtime.Output{}, ctx.Err()
		}
	}
}

// wakeParent wakes the parked parent of ss, a child that ended whose answer its call
// has not taken: the call, running again, finds it. A parent parking now is woken once
// it has parked.
func (s *Manager) wakeParent(ss *session) {
	if ss.mode != ModeChild || ss.lineage.parent == "" {
		return
	}
	s.liveMu.Lock()
	parent := s.live[ss.lineage.parent]
	s.liveMu.Unlock()
	if parent == nil {
		return
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if _, waits := parent.kids[ss.runID]; waits && (parent.phase == phaseParked || parent.phase == phaseParking) {
		parent.readyLocked()
	}
}

// errParentEnded is why a child is cancelled that its parent's end left parked.
var errParentEnded = errors.New("its parent run ended")

// endKids cancels the children ss leaves parked as it ends (a child that runs is
// cancelled with the call that waits for it): each ends CANCELLED, with its usage.
func (s *Manager) endKids(ss *session) {
	ss.mu.Lock()
	kids := make([]*session, 0, len(ss.kids))
	for _, c := range ss.kids {
		kids = append(kids, c)
	}
	clear(ss.kids)
	ss.mu.Unlock()
	for _, c := range kids {
		c.mu.Lock()
		if c.phase == phaseParked || c.phase == phaseParking {
			c.readyLocked()
			if c.phase != phaseEnded {
				c.cancel(errParentEnded)
			}
		}
		c.mu.Unlock()
	}
}

// childRefusal says why parent's call may not start its child id, or "" when it may:
// the run has started Config.MaxChildren already, or its tree spent Config.MaxTreeTokens.
// A call that started its child before (a run woken, or taken up) may always wait for it.
func (s *Manager) childRefusal(parent *session, id string) string {
	root := cmp.Or(parent.tree, parent)
	parent.mu.Lock()
	started, seen := parent.childrenStarted, parent.childSeen[id] || parent.kids[id] != nil
	spent := tokens(parent.usage)
	parent.mu.Unlock()
	if seen {
		return ""
	}
	if root != parent {
		root.mu.Lock()
		spent += tokens(root.usage)
		root.mu.Unlock()
	}
	spent += root.treeTokens.Load()
	switch {
	case started >= s.cfg.MaxChildren:
		return fmt.Sprintf("this run has started %d child runs, as many as the server allows one run", started)
	case s.cfg.MaxTreeTokens > 0 && spent >= s.cfg.MaxTreeTokens:
		return fmt.Sprintf("this tree of runs has spent %d tokens, and the server allows a tree %d", spent, s.cfg.MaxTreeTokens)
	}
	return ""
}

// tokens is what u counts against a tree's token budget.
func tokens(u *agentdv1.Usage) int64 { return u.GetInputTokens() + u.GetOutputTokens() }

// noteChild records what the child run id of agent, ended with rf, and its own children
// used, for ss's run_finished; the tree's root counts its tokens.
func (ss *session) noteChild(agent, id string, rf *agentdv1.RunFinished) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.childSeen[id] {
		return
	}
	if ss.childSeen == nil {
		ss.childSeen = map[string]bool{}
	}
	ss.childSeen[id] = true
	ss.childUsage = append(ss.childUsage, &agentdv1.ChildUsage{RunId: id, ParentRunId: ss.runID, AgentPath: []string{agent}, Usage: rf.GetUsage(), Reason: rf.GetReason()})
	for _, c := range rf.GetChildUsage() {
		ss.childUsage = append(ss.childUsage, &agentdv1.ChildUsage{RunId: c.GetRunId(), ParentRunId: c.GetParentRunId(),
			AgentPath: append([]string{agent}, c.GetAgentPath()...), Usage: c.GetUsage(), Reason: c.GetReason()})
	}
	cmp.Or(ss.tree, ss).treeTokens.Add(tokens(rf.GetUsage()))
}

// treeUsageLocked sets rf's tree_usage and child_usage, for a run whose calls started
// children.
func (ss *session) treeUsageLocked(rf *agentdv1.RunFinished) {
	if len(ss.childUsage) == 0 {
		return
	}
	total := rf.GetUsage()
	for _, c := range ss.childUsage {
		total = addUsage(total, c.GetUsage())
	}
	rf.TreeUsage, rf.ChildUsage = total, ss.childUsage
}

// childOutput is the result of a call whose child ended with rf.
func childOutput(agent, runID string, rf *agentdv1.RunFinished) runtime.Output {
	switch rf.GetReason() {
	case agentdv1.RunEndReason_RUN_END_REASON_COMPLETED:
		if out := rf.GetOutput(); out != nil {
			b, err := json.Marshal(out.AsInterface()) // compact, keys sorted
			if err == nil {
				return runtime.Output{JSON: b}
			}
		}
		return runtime.Output{Text: rf.GetFinalText()}
	case agentdv1.RunEndReason_RUN_END_REASON_AWAITING_INPUT:
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s (run %s) stopped: it needs a decision or a client's tool result that a sub-agent cannot be given yet; do the task another way", agent, runID))
	}
	why := strings.ToLower(strings.TrimPrefix(rf.GetReason().String(), "RUN_END_REASON_"))
	if e := rf.GetError(); e != nil {
		why += ": " + e.GetReason() + ": " + e.GetMessage()
	}
	msg := fmt.Sprintf("the agent %s (run %s) ended %s", agent, runID, why)
	if t := rf.GetFinalText(); t != "" {
		msg += "; what it said last: " + t
	}
	return runtime.ErrorOutput(msg)
}

// forwarder returns the forward of child, a run parent's call started: it journals in
// parent's journal, as child_event, those of child's events parent's client asked to be
// shown, and its children's, which child forwarded already, with their agent path. The
// wrapper holds ev itself, not a copy: the parent's journal marshals it before forward
// returns, while child's lock keeps ev as it is.
func forwarder(parent, child *session, agent, callID string) func(*agentdv1.RunEvent) {
	level := parent.childEvents
	return func(ev *agentdv1.RunEvent) {
		ce := &agentdv1.ChildEvent{RunId: child.runID, ParentRunId: parent.runID, ParentToolCallId: callID, AgentPath: []string{agent}, Event: ev}
		show := true
		if inner := ev.GetChildEvent(); inner != nil {
			ce = &agentdv1.ChildEvent{RunId: inner.GetRunId(), ParentRunId: inner.GetParentRunId(), ParentToolCallId: inner.GetParentToolCallId(),
				AgentPath: append([]string{agent}, inner.GetAgentPath()...), Event: inner.GetEvent()}
		} else {
			show = shown(level, ev)
		}
		asked := ce.GetEvent().GetApprovalRequested()
		if !show && asked == nil {
			return
		}
		parent.mu.Lock()
		defer parent.mu.Unlock()
		if asked != nil {
			// Shown or not, a decision sent to parent on the approval finds its way, and
			// a second one the child's refusal (ALREADY_DECIDED) while the child is kept.
			if parent.routes == nil {
				parent.routes = map[string]string{}
			}
			parent.routes[asked.GetApprovalId()] = ce.GetRunId()
		}
		if !show || parent.phase == phaseParked {
			return // a parked run's journal takes nothing: the child's has the event
		}
		if err := parent.sendChildLocked(ce); err != nil && !errors.Is(err, errRunMoved) {
			parent.srv.log.Warn("a child's event was not shown on its parent's stream", "run_id", parent.runID, "child_run_id", child.runID, "error", err)
		}
	}
}

// shown reports whether a child's event is one level shows.
func shown(level agentdv1.ChildEvents, ev *agentdv1.RunEvent) bool {
	switch ev.GetKind().(type) {
	case *agentdv1.RunEvent_Checkpoint, *agentdv1.RunEvent_Heartbeat, *agentdv1.RunEvent_InputAck, *agentdv1.RunEvent_Attached:
		return false
	case *agentdv1.RunEvent_RunStarted, *agentdv1.RunEvent_RunFinished, *agentdv1.RunEvent_ApprovalRequested, *agentdv1.RunEvent_ApprovalResolved:
		return level != agentdv1.ChildEvents_CHILD_EVENTS_NONE
	case *agentdv1.RunEvent_MessageStarted, *agentdv1.RunEvent_TextDelta, *agentdv1.RunEvent_MessageFinished:
		return level == agentdv1.ChildEvents_CHILD_EVENTS_UNSPECIFIED || level == agentdv1.ChildEvents_CHILD_EVENTS_DEFAULT || level == agentdv1.ChildEvents_CHILD_EVENTS_ALL
	}
	return level == agentdv1.ChildEvents_CHILD_EVENTS_ALL
}

// joinTree records child, a run below ss, going on now: input for it sent to ss reaches it.
func (ss *session) joinTree(child *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.treeRuns == nil {
		ss.treeRuns = map[string]*session{}
	}
	ss.treeRuns[child.runID] = child
}

// leaveTree records that child, a run below ss, has ended here.
func (ss *session) leaveTree(child *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.treeRuns, child.runID)
}

// belowLocked returns the run below ss that approval id, or run id, names: the one
// that asked the approval its streams showed, or the run of that id when it is below
// ss. It is woken when parked, so that it takes the input. Called with ss's mu held,
// which it lets go of while it looks: a child's lock is never taken under its parent's.
func (ss *session) belowLocked(approvalID, runID string) *session {
	if runID == "" {
		runID = ss.routes[approvalID]
	}
	c := ss.treeRuns[runID]
	ss.mu.Unlock()
	defer ss.mu.Lock()
	if c == nil && runID != "" {
		// Not waited for now (ss has just woken, or the run between them is parked):
		// the server keeps it all the same, if it is below ss.
		c = ss.srv.liveBelow(ss.runID, runID)
	}
	if c != nil {
		c.mu.Lock()
		c.readyLocked()
		c.mu.Unlock()
	}
	return c
}

// liveBelow returns the run id this server keeps, if it is below the run above.
func (s *Manager) liveBelow(above, id string) *session {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	c := s.live[id]
	for r := c; r != nil; r = s.live[r.lineage.parent] {
		if r.lineage.parent == above {
			return c
		}
		if r.lineage.parent == "" {
			break
		}
	}
	return nil
}

// sendChildLocked journals ce, a child's event, as child_event: a child's delta merges
// with that child's previous one as the run's own deltas do (sendDelta), while no
// stream has taken it. The open tail holds a copy of the child's delta, which the merge
// changes; the event itself goes on up the tree unchanged.
func (ss *session) sendChildLocked(ce *agentdv1.ChildEvent) error {
	ev := &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ChildEvent{ChildEvent: ce}}
	kind, id, text, ok := journal.DeltaOf(ev)
	if !ok || ss.srv.cfg.ExactDeltas || !utf8.ValidString(text) {
		return ss.sendLocked(ev)
	}
	if ss.moved {
		return errRunMoved
	}
	if !ss.journal.MergeDelta(kind, id, text) {
		open := &agentdv1.ChildEvent{RunId: ce.GetRunId(), ParentRunId: ce.GetParentRunId(), ParentToolCallId: ce.GetParentToolCallId(),
			AgentPath: ce.GetAgentPath(), Event: proto.CloneOf(ce.GetEvent())}
		tail := &agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ChildEvent{ChildEvent: open}}
		ss.stampLocked(tail)
		ss.journal.OpenDelta(tail, kind, id, text)
		ss.srv.writer.Mark(ss)
	}
	if ss.forward != nil {
		ev.Seq, ev.RunId, ev.Time = ss.seq, ss.runID, timestamppb.New(ss.srv.now())
		ss.forward(ev)
	}
	return nil
}
