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

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
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

// DefaultMaxDepth is Config.MaxDepth's default.
const DefaultMaxDepth = 4

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
	return parent.srv.runChild(ctx, parent, t.sa, call, args.Task), nil
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
// the call's result.
func (s *Manager) runChild(ctx context.Context, parent *session, sa Subagent, call runtime.ToolCall, task string) runtime.Output {
	lin := lineage{parent: parent.runID, parentCall: call.ID, root: cmp.Or(parent.lineage.root, parent.runID), depth: parent.lineage.depth + 1}
	if lin.depth > s.cfg.MaxDepth {
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s was not started: runs nest at most %d deep, and this one would be %d deep", sa.Agent, s.cfg.MaxDepth, lin.depth))
	}
	lin.childID = childRunID(parent.thread, call.ID)
	spec := &agentdv1.RunSpec{
		Agent: sa.Agent,
		Input: task,
		// The tree's clients answer the child as they answer its root: under the root's
		// policy, what the child needs a person for is asked on the root's streams.
		Config: &agentdv1.RunConfig{ApprovalPolicy: parent.policy},
	}
	st, err := s.Start(context.WithValue(ctx, lineageKey{}, lin), ModeChild, spec)
	if err != nil {
		return runtime.ErrorOutput(fmt.Sprintf("the agent %s was not started: %v", sa.Agent, err))
	}
	var rf *agentdv1.RunFinished
	switch st.Outcome {
	case StartedNew:
		child := st.ss
		child.childEvents, child.forward = parent.childEvents, forwarder(parent, child, sa.Agent, call.ID)
		child.tree, child.parentRun = cmp.Or(parent.tree, parent), parent
		for a := parent; a != nil; a = a.parentRun {
			a.joinTree(child)
		}
		child.own(st.req)
		for a := parent; a != nil; a = a.parentRun {
			a.leaveTree(child)
		}
		rf = child.result
		if rf == nil {
			return runtime.ErrorOutput(fmt.Sprintf("the agent %s (run %s) failed: %v", sa.Agent, st.RunID, st.ss.status))
		}
	default:
		// The call ran before (a run resumed, or taken up): its child is the one to wait for.
		resp, err := s.executedAlready(ctx, st.RunID)
		if resp.GetResult() == nil {
			return runtime.ErrorOutput(fmt.Sprintf("the agent %s (run %s) failed: %v", sa.Agent, st.RunID, err))
		}
		rf = resp.GetResult()
	}
	return childOutput(sa.Agent, st.RunID, rf)
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
		if inner := ev.GetChildEvent(); inner != nil {
			ce = &agentdv1.ChildEvent{RunId: inner.GetRunId(), ParentRunId: inner.GetParentRunId(), ParentToolCallId: inner.GetParentToolCallId(),
				AgentPath: append([]string{agent}, inner.GetAgentPath()...), Event: inner.GetEvent()}
		} else if !shown(level, ev) {
			return
		}
		parent.mu.Lock()
		defer parent.mu.Unlock()
		if err := parent.sendLocked(&agentdv1.RunEvent{Kind: &agentdv1.RunEvent_ChildEvent{ChildEvent: ce}}); err != nil && !errors.Is(err, errRunMoved) {
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

// treeRunLocked returns the run below ss that has approval id open (or had it), or nil.
// Called with ss's mu held, which it lets go of while it looks at each run below: a
// child's lock is never taken under its root's.
func (ss *session) treeRunLocked(approvalID string) *session {
	if len(ss.treeRuns) == 0 {
		return nil
	}
	below := make([]*session, 0, len(ss.treeRuns))
	for _, c := range ss.treeRuns {
		below = append(below, c)
	}
	ss.mu.Unlock()
	defer ss.mu.Lock()
	for _, c := range below {
		c.mu.Lock()
		_, ok := c.approvals[approvalID]
		c.mu.Unlock()
		if ok {
			return c
		}
	}
	return nil
}
