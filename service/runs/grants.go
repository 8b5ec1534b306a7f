package runs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/ids"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// An approval may reach past its call (ApprovalDecision.scope): a decision of scope RUN
// or THREAD makes a grant, which approves the later calls of the same tool with the
// same arguments (any arguments, where the agent's policy says so) without asking,
// decided_by GRANT. RUN grants live with the run (its session, and the continuations
// and checkpoints it seals, which carry them sealed); THREAD grants are kept in the
// store with the thread, which the server must keep (history THREAD), until revoked.
//
// A grant never widens what the agent's policy allows: the policy bounds each tool's
// scope (runtime.ToolPolicy.MaxGrant); a tool whose every call needs an explicit
// decision (ApprovalAlways) takes no grant; and a client's tightening (AUTO_DENY, or a
// tool made ALWAYS for the run) beats any grant.

// allowedScopes returns the scopes a decision on a call of tool may give, and whether a
// grant of it takes any arguments.
func (ss *session) allowedScopes(tool string, autoApprovable bool) ([]agentdv1.ApprovalScope, bool) {
	return allowedScopes(ss.entry, tool, autoApprovable, ss.threaded != nil)
}

// allowedScopes returns the scopes the agent's policy allows a decision on a call of
// tool, on a thread the server keeps or not, and whether a grant takes any arguments.
func allowedScopes(entry *Agent, tool string, autoApprovable, threaded bool) ([]agentdv1.ApprovalScope, bool) {
	scopes := []agentdv1.ApprovalScope{agentdv1.ApprovalScope_APPROVAL_SCOPE_ONCE}
	if !autoApprovable || entry == nil || entry.Runtime == nil {
		return scopes, false
	}
	pol := entry.Runtime.Policy().For(tool)
	if pol.Approval == runtime.ApprovalAlways {
		return scopes, false
	}
	if widest := pol.MaxGrant.Widest(); widest >= runtime.GrantRun {
		scopes = append(scopes, agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN)
		if widest >= runtime.GrantThread && threaded {
			scopes = append(scopes, agentdv1.ApprovalScope_APPROVAL_SCOPE_THREAD)
		}
	}
	return scopes, pol.GrantAnyArguments
}

// argumentsHash is what a grant binds a call's arguments by.
func argumentsHash(args string) []byte {
	sum := sha256.Sum256([]byte(args))
	return sum[:]
}

// grantFor returns the grant that approves call, if one does: the run's, then its
// thread's.
func (ss *session) grantFor(ctx context.Context, call runtime.ToolCall) *agentdv1.Grant {
	hash := argumentsHash(call.Arguments)
	matches := func(g *agentdv1.Grant) bool {
		return g.GetToolName() == call.Name && g.GetAgent() == ss.entry.Name &&
			(g.GetAnyArguments() || g.GetArgumentsJson() == call.Arguments)
	}
	ss.mu.Lock()
	for _, g := range ss.grants {
		if matches(g) {
			ss.mu.Unlock()
			return g
		}
	}
	threaded := ss.threaded != nil
	ss.mu.Unlock()
	if !threaded {
		return nil
	}
	gs, err := ss.srv.store.Grants(ctx, ss.thread)
	if err != nil {
		ss.srv.log.Warn("reading the thread's grants failed: the call is asked", "run_id", ss.runID, "thread_id", ss.thread, "error", err)
		return nil
	}
	for _, g := range gs {
		if g.Tool == call.Name && g.Agent == ss.entry.Name && (g.ArgumentsHash == nil || bytes.Equal(g.ArgumentsHash, hash)) {
			return grantToProto(g)
		}
	}
	return nil
}

// grantDecision approves a call that a grant approves, and records which: the
// approval's approval_resolved names it.
func (ss *session) grantDecision(ctx context.Context, req runtime.ApprovalRequest) (runtime.Decision, bool) {
	if !req.AutoApprovable {
		return runtime.Decision{}, false
	}
	switch ss.policy {
	case agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_DENY, agentdv1.ApprovalPolicy_APPROVAL_POLICY_AUTO_APPROVE:
		return runtime.Decision{}, false // the run's own policy answers
	}
	if scopes, _ := ss.allowedScopes(req.Call.Name, true); len(scopes) == 1 {
		return runtime.Decision{}, false // the policy allows no grant of the tool (any more)
	}
	ss.mu.Lock()
	slot, pre := ss.approvals[req.ID], ss.preDecisions[req.ID]
	decided := slot != nil && slot.answered || pre.Outcome != 0
	ss.mu.Unlock()
	if decided {
		return runtime.Decision{}, false // the client's decision came first: it stands
	}
	g := ss.grantFor(ctx, req.Call)
	if g == nil || g.GetApprovalId() == req.ID {
		// The grant this very approval's decision made, which came in before the
		// approval was awaited (the client saw it asked): the decision stands, not its
		// grant.
		return runtime.Decision{}, false
	}
	ss.mu.Lock()
	ss.noteLocked(req.ID, g.GetGrantId(), agentdv1.ApprovalScope_APPROVAL_SCOPE_UNSPECIFIED)
	ss.mu.Unlock()
	return runtime.Decision{Outcome: runtime.OutcomeApproved, DecidedBy: runtime.DecidedByGrant, Reason: "approved by grant " + g.GetGrantId()}, true
}

// grantLocked makes the grant a client's approval of scope RUN or THREAD gives: a RUN
// grant joins the run's at once; a THREAD grant is returned, for keepGrant to store once
// mu is let go.
func (ss *session) grantLocked(approvalID, tool, args string, scope agentdv1.ApprovalScope, any bool) *agentdv1.Grant {
	g := &agentdv1.Grant{
		GrantId: ids.New("grant"), Scope: scope, Agent: ss.entry.Name, ToolName: tool, AnyArguments: any,
		RunId: ss.runID, ApprovalId: approvalID, CreatedAt: timestamppb.New(ss.srv.now()),
	}
	if !any {
		g.ArgumentsJson = args
	}
	ss.noteLocked(approvalID, g.GetGrantId(), scope)
	if scope == agentdv1.ApprovalScope_APPROVAL_SCOPE_RUN {
		ss.grants = append(ss.grants, g)
		return nil
	}
	return g
}

// noteLocked records, for approval_resolved, the grant that decided an approval or that
// its decision made, and the scope of a client's decision.
func (ss *session) noteLocked(approvalID, grantID string, scope agentdv1.ApprovalScope) {
	if ss.grantOf == nil {
		ss.grantOf, ss.scopeOf = map[string]string{}, map[string]agentdv1.ApprovalScope{}
	}
	if grantID != "" {
		ss.grantOf[approvalID] = grantID
	}
	if scope != agentdv1.ApprovalScope_APPROVAL_SCOPE_UNSPECIFIED {
		ss.scopeOf[approvalID] = scope
	}
}

// keepGrant stores a THREAD grant with the run's thread.
func (ss *session) keepGrant(g *agentdv1.Grant) {
	sg := store.Grant{
		ID: g.GetGrantId(), ThreadID: ss.thread, Agent: g.GetAgent(), Tool: g.GetToolName(),
		Arguments: g.GetArgumentsJson(), RunID: g.GetRunId(), ApprovalID: g.GetApprovalId(),
	}
	if !g.GetAnyArguments() {
		sg.ArgumentsHash = argumentsHash(g.GetArgumentsJson())
	}
	ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
	defer cancel()
	if err := ss.srv.store.PutGrant(ctx, sg); err != nil {
		ss.srv.log.Warn("keeping a thread's grant failed: the thread's later calls are asked", "run_id", ss.runID, "thread_id", ss.thread, "grant_id", sg.ID, "error", err)
	}
}

// runGrants returns the run's RUN grants, for a continuation to carry.
func (ss *session) runGrants() []*agentdv1.Grant {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.grants)
}

// grantToProto converts a thread's grant.
func grantToProto(g store.Grant) *agentdv1.Grant {
	return &agentdv1.Grant{
		GrantId: g.ID, Scope: agentdv1.ApprovalScope_APPROVAL_SCOPE_THREAD, Agent: g.Agent, ToolName: g.Tool,
		ArgumentsJson: g.Arguments, AnyArguments: g.ArgumentsHash == nil, RunId: g.RunID, ApprovalId: g.ApprovalID,
		CreatedAt: timestamppb.New(g.CreatedAt),
	}
}

// RevokeGrant revokes a thread's grant, for RevokeGrant.
func (s *Manager) RevokeGrant(ctx context.Context, threadID, grantID string) error {
	th, err := s.thread(ctx, threadID)
	if err != nil {
		return err
	}
	switch err := s.store.RevokeGrant(ctx, th.ID, grantID); {
	case errors.Is(err, store.ErrNotFound):
		return statusError(NotFound, reasonGrantNotFound, "the thread has no grant "+grantID, map[string]string{"grant_id": grantID})
	case err != nil:
		return storeStatus(err)
	}
	s.log.Info("grant revoked", "thread_id", th.ID, "grant_id", grantID)
	return nil
}

// threadGrants lists a thread's grants for GetThread.
func (s *Manager) threadGrants(ctx context.Context, id string) ([]*agentdv1.Grant, error) {
	gs, err := s.store.Grants(ctx, id)
	if err != nil {
		return nil, storeStatus(err)
	}
	out := make([]*agentdv1.Grant, len(gs))
	for i, g := range gs {
		out[i] = grantToProto(g)
	}
	return out, nil
}
