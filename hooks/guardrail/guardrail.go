package guardrail

import (
	"fmt"
	"slices"

	"github.com/agentd/agentd/runtime"
)

// The names the guardrails go by when their spec names none.
const (
	DenyListName         = "deny_list"
	MaxSizeName          = "max_size"
	ToolOutputSchemaName = "tool_output_schema"
)

// withDefaults returns spec with an empty Name set to name and zero Stages set to stages,
// holding its own copy of Tools.
func withDefaults(spec runtime.GuardSpec, name string, stages runtime.GuardStage) runtime.GuardSpec {
	if spec.Name == "" {
		spec.Name = name
	}
	if spec.Stages == 0 {
		spec.Stages = stages
	}
	spec.Tools = slices.Clone(spec.Tools)
	return spec
}

// guardSpec is what a guardrail's Guard returns: spec, with a Tools the caller may keep.
func guardSpec(spec runtime.GuardSpec) runtime.GuardSpec {
	spec.Tools = slices.Clone(spec.Tools)
	return spec
}

// configError is the error of a constructor given what it cannot build a guardrail from;
// format may hold %w.
func configError(name, format string, args ...any) error {
	return fmt.Errorf("guardrail %s: "+format, append([]any{name}, args...)...)
}
