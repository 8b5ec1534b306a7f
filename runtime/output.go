package runtime

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// A typed result: an agent whose Config.OutputSchema is set answers by calling its output
// tool (Config.OutputToolName, "final_answer" unless named) with arguments that match the
// schema, and may use its other tools first. The arguments are the run's result
// (RunFinished.Output). An answer that does not match, or an answer in text, goes back to
// the model as an error naming what is wrong, up to Config.OutputCorrections times; past
// that the run ends EndFailed with an *OutputInvalidError. Nothing is ever accepted that
// the schema refuses.

// DefaultOutputToolName is the output tool's name when Config.OutputToolName is empty.
const DefaultOutputToolName = "final_answer"

// ErrOutputInvalid is wrapped by every *OutputInvalidError.
var ErrOutputInvalid = errors.New("runtime: the answer does not match the output schema")

// OutputInvalidError ends a run whose model did not give an answer matching the output
// schema within its corrections (Config.OutputCorrections). The transcript keeps every
// attempt, and the error the model was told for each.
type OutputInvalidError struct {
	// Attempts is how many answers the model gave, in text or through the output tool.
	Attempts int
	// Errors are what was wrong with each, in order.
	Errors []string
	// Last is the last answer: the output tool's arguments, or the text.
	Last string
}

func (e *OutputInvalidError) Error() string {
	last := ""
	if len(e.Errors) > 0 {
		last = ": " + e.Errors[len(e.Errors)-1]
	}
	return fmt.Sprintf("%v after %d attempts%s", ErrOutputInvalid, e.Attempts, last)
}

func (e *OutputInvalidError) Unwrap() error { return ErrOutputInvalid }

// ErrorType names the failure on spans and metrics (error.type).
func (e *OutputInvalidError) ErrorType() string { return "output_invalid" }

// outputTool is the tool a typed agent answers through. Running it accepts the answer:
// prepare validated its arguments already.
type outputTool struct{ spec ToolSpec }

func (t *outputTool) Spec() ToolSpec { return t.spec }

func (t *outputTool) Execute(context.Context, ToolCall) (Output, error) {
	return Output{Text: "accepted: the run ends with this answer"}, nil
}

// newOutputEntry compiles cfg's output schema into the output tool, or returns nil when
// the agent has none.
func newOutputEntry(cfg *Config) (*toolEntry, error) {
	if len(cfg.OutputSchema) == 0 {
		return nil, nil
	}
	var root map[string]any
	if err := json.Unmarshal(cfg.OutputSchema, &root); err != nil {
		return nil, fmt.Errorf("runtime: OutputSchema: not a JSON object: %v", err)
	}
	if root["type"] != "object" {
		return nil, errors.New(`runtime: OutputSchema: the root must be an object schema ("type": "object"); put a value of another kind in a property`)
	}
	schema, err := CompileSchema(cfg.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("runtime: OutputSchema: %w", err)
	}
	name := cmp.Or(cfg.OutputToolName, DefaultOutputToolName)
	if !toolNameRE.MatchString(name) {
		return nil, fmt.Errorf("runtime: OutputToolName %q: want 1 to 64 letters, digits, '_' or '-'", name)
	}
	spec := ToolSpec{
		Name:         name,
		Description:  "Give your final answer by calling this tool once you are done, with arguments that match its parameters. Use your other tools first if you need them. An answer in plain text is not accepted.",
		Parameters:   cfg.OutputSchema,
		CompletesRun: true,
		Executor:     ExecutorServer,
	}
	return &toolEntry{tool: &outputTool{spec: spec}, spec: spec, schema: schema, output: true}, nil
}

// outputState is a typed run's account of its answers.
type outputState struct {
	entry       *toolEntry      // the output tool, offered unless native
	also        *Schema         // the agent's schema, when the run's own tightens it
	native      bool            // the answer is the reply's text, which the provider constrains
	force       bool            // the output tool, the only tool offered, is forced (ToolChoice)
	corrections int             // how many wrong answers the model may correct
	errs        []string        // what was wrong with each wrong answer, in order
	last        string          // the last wrong answer
	result      json.RawMessage // the accepted answer
}

// validate checks an answer against the run's schema, and then against the agent's
// when the run's tightens it.
func (o *outputState) validate(ctx context.Context, answer string) error {
	if err := o.entry.schema.ValidateContext(ctx, answer); err != nil {
		return err
	}
	if o.also != nil {
		return o.also.ValidateContext(ctx, answer)
	}
	return nil
}

// runOutput returns the output tool of req's run, and the agent's schema an answer
// must match as well: the agent's own tool when the request names no schema, one made
// from the request's schema otherwise.
func (a *Agent) runOutput(req *Request) (entry *toolEntry, also *Schema, err error) {
	if len(req.OutputSchema) == 0 {
		return a.out, nil, nil
	}
	entry, err = newOutputEntry(&Config{OutputSchema: req.OutputSchema, OutputToolName: a.cfg.OutputToolName})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidRequest, strings.Replace(err.Error(), "OutputSchema", "Request.OutputSchema", 1))
	}
	if a.out != nil {
		// The model is offered both schemas at once where that keeps their meaning.
		if both := allOf(a.out.spec.Parameters, req.OutputSchema); both != nil {
			entry.spec.Parameters = both
		}
	}
	if _, clash := a.tools[entry.spec.Name]; clash {
		return nil, nil, fmt.Errorf("%w: Request.OutputSchema: the agent has a tool named %s, the output tool's name", ErrInvalidRequest, entry.spec.Name)
	}
	if a.out != nil {
		also = a.out.schema
	}
	return entry, also, nil
}

// allOf returns a schema that holds both a and b, for the model to read, or nil when
// either refers within itself ($ref, $defs, definitions, $id, $anchor): nested in another
// schema such references would point elsewhere.
func allOf(a, b json.RawMessage) json.RawMessage {
	for _, s := range []json.RawMessage{a, b} {
		for _, kw := range []string{`"$ref"`, `"$defs"`, `"definitions"`, `"$id"`, `"$anchor"`, `"$dynamicRef"`} {
			if bytes.Contains(s, []byte(kw)) {
				return nil
			}
		}
	}
	both, err := json.Marshal(struct {
		Type  string            `json:"type"`
		AllOf []json.RawMessage `json:"allOf"`
	}{"object", []json.RawMessage{a, b}})
	if err != nil {
		return nil
	}
	return both
}

// wrong records a wrong answer and what was wrong with it, and reports whether the model
// may still correct it.
func (o *outputState) wrong(answer, why string) bool {
	o.errs = append(o.errs, why)
	o.last = answer
	return !o.exhausted()
}

// exhausted reports whether the model gave more wrong answers than it may correct.
func (o *outputState) exhausted() bool { return len(o.errs) > o.corrections }

// err is the end of a run whose model used up its corrections.
func (o *outputState) err() *OutputInvalidError {
	// Every answer was wrong: none was accepted.
	return &OutputInvalidError{Attempts: len(o.errs), Errors: o.errs, Last: o.last}
}

// accept records the arguments of the output call that ends the run, compacted.
func (o *outputState) accept(args string) {
	var b bytes.Buffer
	if json.Compact(&b, []byte(args)) != nil {
		b.Reset()
		b.WriteString(args)
	}
	o.result = b.Bytes()
}

// textAnswer is what the model is told when it answers in text instead of calling the
// output tool.
func (o *outputState) textAnswer() string {
	if o.native {
		return "Your answer was not JSON: answer with JSON alone that matches the required schema."
	}
	return fmt.Sprintf("Your answer was plain text, which is not accepted: call the tool %s with your final answer as its arguments, matching its parameters.", o.entry.spec.Name)
}

// invalidAnswer is the error result of an output call whose arguments do not match.
func (o *outputState) invalidAnswer(err error) string {
	return fmt.Sprintf("The answer does not match the parameters of %s: %s. Call %s again with a corrected answer.", o.entry.spec.Name, mismatch(err), o.entry.spec.Name)
}

// CheckOutputSchema reports what New would refuse of raw as Config.OutputSchema: not
// JSON, a root other than an object, or a schema past CompileSchema's bounds.
func CheckOutputSchema(raw json.RawMessage) error {
	_, err := newOutputEntry(&Config{OutputSchema: raw})
	return err
}

// OutputMode says how a typed agent's model gives its answer.
type OutputMode uint8

const (
	// OutputAuto is native where the model can (NativeOutputModel), the tool otherwise.
	OutputAuto OutputMode = iota
	// OutputTool always offers the output tool.
	OutputTool
	// OutputNative always asks the provider for JSON matching the schema; a run on a
	// model that cannot is refused (ErrInvalidRequest).
	OutputNative
)

// nativeOutput reports whether a typed run on model m asks for its answer natively.
func nativeOutput(mode OutputMode, m Model) (bool, error) {
	nm, ok := m.(NativeOutputModel)
	can := ok && nm.NativeOutput()
	switch {
	case mode == OutputTool:
		return false, nil
	case mode == OutputNative && !can:
		return false, fmt.Errorf("%w: OutputNative, but model %s cannot constrain its replies to a schema", ErrInvalidRequest, m.Name())
	}
	return can, nil
}

// nativeAnswer is what the model is told of a reply that does not match the schema.
func (o *outputState) nativeAnswer(err error) string {
	return fmt.Sprintf("Your answer does not match the required JSON Schema: %s. Answer again with JSON alone that matches it.", mismatch(err))
}

// mismatch is the validator's error for an answer, without the prefix it has for a
// tool's arguments.
func mismatch(err error) string {
	return strings.TrimPrefix(err.Error(), ErrInvalidArguments.Error()+": ")
}
