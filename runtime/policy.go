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
	return ToolPolicy{Disabled: p.Disabled || q.Disabled, Approval: max(p.Approval, q.Approval)}
}
