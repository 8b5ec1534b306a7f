package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentd/agentd/runtime"
)

// The names of the tools, as the model calls them.
const (
	CurrentTimeName = "current_time"
	CalculateName   = "calculate"
	SaveNoteName    = "save_note"
)

// Tools returns the three built-in tools, in the order current_time, calculate,
// save_note. Pass [WithNotes] to read the saved notes back.
func Tools(opts ...Option) []runtime.Tool {
	o := newOptions(opts)
	notes := o.notes
	if notes == nil {
		notes = new(Notes)
	}
	return []runtime.Tool{CurrentTime(opts...), Calculate(), SaveNote(notes, opts...)}
}

// Policy returns the policy the built-in tools are meant to run under: save_note and
// http_fetch ask for an approval ([runtime.ApprovalAsk]), every other tool runs without
// asking. An agent with more tools can copy its Tools entries into its own policy.
func Policy() runtime.Policy {
	return runtime.Policy{Tools: map[string]runtime.ToolPolicy{
		SaveNoteName:  {Approval: runtime.ApprovalAsk},
		HTTPFetchName: {Approval: runtime.ApprovalAsk},
	}}
}

// decodeArgs decodes a call's arguments into v, strictly: one JSON object with no fields
// v does not know. The runtime checks the schema first; this guards direct callers.
func decodeArgs(args string, v any) error {
	if args == "" {
		args = "{}"
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if dec.More() {
		return errors.New("invalid arguments: more than one JSON value")
	}
	return nil
}

// jsonOutput returns v as a JSON output. HTML characters stay as they are: the model
// reads them, not a browser.
func jsonOutput(v any) (runtime.Output, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return runtime.Output{}, err
	}
	return runtime.Output{JSON: bytes.TrimSuffix(b.Bytes(), []byte("\n"))}, nil
}
