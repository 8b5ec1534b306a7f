package builtin

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentd/agentd/runtime"
)

const calculateSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "expression": {
      "type": "string",
      "description": "The arithmetic expression, such as \"(3 + 4) / 2\" or \"2^10 - sqrt(16)\". Numbers (decimals and 1e3 notation), + - * / %, ^ or ** for powers, parentheses, sqrt() and abs(). No variables or units.",
      "minLength": 1,
      "maxLength": 256
    }
  },
  "required": ["expression"],
  "additionalProperties": false
}`

// CalculateResult is the JSON output of calculate.
type CalculateResult struct {
	// Expression is the expression evaluated, without surrounding spaces.
	Expression string `json:"expression"`
	// Result is its value, rounded to 15 significant digits.
	Result float64 `json:"result"`
}

// Calculate returns the calculate tool. Its arguments are {"expression": text}; its output
// is a [CalculateResult]. The expression is evaluated by [Evaluate]; its errors (a syntax
// error, a division by zero) are the tool's errors.
func Calculate() runtime.Tool {
	spec := runtime.ToolSpec{
		Name: CalculateName,
		Description: "Evaluates an arithmetic expression exactly as written and returns its value. Use it " +
			"for any arithmetic instead of computing in your head. Supports numbers, + - * / % (remainder), " +
			"^ or ** (power), unary minus, parentheses, sqrt(x) and abs(x); -2^2 is -(2^2). " +
			"Division by zero and results that are not finite real numbers are errors.",
		Parameters: []byte(calculateSchema),
		Parallel:   true,
		Idempotent: true, // it changes nothing: running it again is harmless
	}
	return runtime.NewTool(spec, func(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
		var args struct {
			Expression string `json:"expression"`
		}
		if err := decodeArgs(call.Arguments, &args); err != nil {
			return runtime.Output{}, err
		}
		v, err := Evaluate(args.Expression)
		if err != nil {
			return runtime.Output{}, fmt.Errorf("cannot evaluate %q: %w", args.Expression, err)
		}
		return jsonOutput(CalculateResult{Expression: strings.TrimSpace(args.Expression), Result: v})
	})
}
