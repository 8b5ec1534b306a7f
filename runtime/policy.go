package runtime

// Policy says, per tool, whether it may be called and whether calls need an approval.
// The zero Policy enables every tool and approves every call automatically.
type Policy struct {
	// Tools holds policies by tool name; tools not named get Default.
	Tools   map[string]ToolPolicy
	Default ToolPolicy
}

// ToolPolicy is the policy of one tool.
type ToolPolicy struct {
	// Disabled tools are not offered to the model, and calls of them get an error result.
	Disabled bool
	Approval Approval
	// MaxGrant is the widest a client's approval of one of the tool's calls may reach
	// (a grant, which approves later calls as they come): GrantOnce, the call alone;
	// GrantRun, the run's later calls; GrantThread, the thread's runs. The zero value
	// is GrantThread. A grant never approves a call of an ApprovalAlways tool.
	MaxGrant GrantScope
	// GrantAnyArguments lets a grant approve the tool's calls whatever their arguments;
	// without it a grant approves only calls with the very arguments approved.
	GrantAnyArguments bool
}

// GrantScope is how far an approval reaches.
type GrantScope uint8

// The scopes, from narrowest to widest.
const (
	// GrantDefault, the zero value, is GrantThread.
	GrantDefault GrantScope = iota
	GrantOnce
	GrantRun
	GrantThread
)

// Widest returns s, GrantThread for GrantDefault.
func (s GrantScope) Widest() GrantScope {
	if s == GrantDefault {
		return GrantThread
	}
	return s
}

// Approval says whether calls of a tool need an approval.
type Approval uint8

// The approval levels, from loosest to tightest.
const (
	// ApprovalAuto runs calls without asking.
	ApprovalAuto Approval = iota
	// ApprovalAsk asks; a client's auto-approve policy may answer for it.
	ApprovalAsk
	// ApprovalAlways asks, and only an explicit decision approves.
	ApprovalAlways
)

// For returns the policy of the named tool.
func (p Policy) For(tool string) ToolPolicy {
	if tp, ok := p.Tools[tool]; ok {
		return tp
	}
	return p.Default
}

// Tighten returns the tighter of p and q: disabled if either is, and the stricter
// approval. It can never loosen p.
func (p ToolPolicy) Tighten(q ToolPolicy) ToolPolicy {
	return ToolPolicy{
		Disabled: p.Disabled || q.Disabled, Approval: max(p.Approval, q.Approval),
		// Only the agent's own policy lets grants take any arguments.
		MaxGrant: min(p.MaxGrant.Widest(), q.MaxGrant.Widest()), GrantAnyArguments: p.GrantAnyArguments,
	}
}
