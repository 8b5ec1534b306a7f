package guardrail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"

	"github.com/agentd/agentd/runtime"
)

// ToolOutputSchema returns a guardrail that checks tool results against schema, a JSON
// Schema (draft 2020-12 or draft-07) compiled with runtime.CompileSchema, within its
// limits. It checks the tool output stage only, whatever spec.Stages says; an empty
// spec.Name means [ToolOutputSchemaName]. With no spec.Tools it checks every tool's
// results: name the tools whose results schema describes.
//
// A result marked IsError passes: it says why a call failed, for the model to read. The
// value checked is the result's JSON, or else its text parsed as JSON, of any kind:
// object, array, string, number, boolean or null. A result that is not JSON trips, and so
// does one that does not match the schema, or one past the limits CompileSchema sets on
// what validating a value may cost (nested more than 64 deep, say). The trip's Reason
// says what is wrong, naming the failing subschema by its path, as the validator does
// ("validating root: validating /properties/n: type: …"), and its Details name the tool
// under "tool".
//
// ToolOutputSchema refuses an empty schema, one that is neither a JSON object nor a
// boolean, one whose $schema names a draft other than 2020-12 and draft-07, one
// CompileSchema refuses (its error is wrapped), and the rare schema it cannot apply to
// values other than objects without changing its meaning: a draft-07 schema whose root's
// $id has a fragment that a $ref names, or one within two levels of CompileSchema's
// nesting limits.
func ToolOutputSchema(spec runtime.GuardSpec, schema json.RawMessage) (runtime.Guardrail, error) {
	spec = withDefaults(spec, ToolOutputSchemaName, runtime.GuardToolOutput)
	spec.Stages = runtime.GuardToolOutput
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, configError(spec.Name, "no schema")
	}
	wrapped, unwrap, err := wrapSchema(schema)
	if err != nil {
		return nil, configError(spec.Name, "schema: %v", err)
	}
	g := &toolOutputSchema{spec: spec, unwrap: unwrap}
	if g.object, err = runtime.CompileSchema(schema); err != nil {
		return nil, configError(spec.Name, "schema: %w", err)
	}
	if g.other, err = runtime.CompileSchema(wrapped); err != nil {
		return nil, configError(spec.Name, "schema: it cannot be applied to results other than objects: %w", err)
	}
	return g, nil
}

// toolOutputSchema is the guardrail ToolOutputSchema returns. It is safe for concurrent
// use: nothing in it changes once it is built, and a runtime.Schema is safe for concurrent
// use.
type toolOutputSchema struct {
	runtime.NoHooks
	spec runtime.GuardSpec
	// object validates results that are JSON objects. runtime.Schema validates objects
	// only, being made for arguments: other results are validated as {"value": result}
	// against other, which holds the schema as properties.value (see wrapSchema).
	object, other *runtime.Schema
	// unwrap rewrites other's messages as object's would read.
	unwrap *strings.Replacer
}

// Guard returns the guardrail's spec.
func (g *toolOutputSchema) Guard() runtime.GuardSpec { return guardSpec(g.spec) }

// Check trips when in.Result, unless it is an error, is not JSON or does not match the
// schema. It returns ctx's error if ctx ends while it validates.
func (g *toolOutputSchema) Check(ctx context.Context, in *runtime.GuardCheck) (*runtime.Trip, error) {
	if in.Result.IsError {
		return nil, nil
	}
	trip := func(reason string) *runtime.Trip {
		return &runtime.Trip{Reason: reason, Details: map[string]string{"tool": in.Call.Name}}
	}
	body := strings.Trim(in.Result.String(), " \t\r\n")
	if body == "" {
		return trip("the result is empty, not JSON"), nil
	}
	if !json.Valid([]byte(body)) {
		err := json.Unmarshal([]byte(body), new(json.RawMessage))
		return trip("the result is not JSON: " + err.Error()), nil
	}
	isObject := body[0] == '{'
	var err error
	if isObject {
		err = g.object.ValidateContext(ctx, body)
	} else {
		err = g.other.ValidateContext(ctx, `{"value":`+body+`}`)
	}
	switch {
	case err == nil:
		return nil, nil
	case !errors.Is(err, runtime.ErrInvalidArguments):
		return nil, err
	}
	msg := strings.TrimPrefix(err.Error(), runtime.ErrInvalidArguments.Error()+": ")
	if !isObject {
		msg = g.unwrap.Replace(strings.TrimPrefix(msg, "validating root: "))
	}
	return trip("the result does not match the schema: " + msg), nil
}

// valueID is the $id the wrapper gives a schema that has none.
const valueID = "urn:agentd:guardrail:tool-output"

// The $schema values of the drafts the validator knows.
const (
	draft07     = "http://json-schema.org/draft-07/schema#"
	draft07TLS  = "https://json-schema.org/draft-07/schema#"
	draft202012 = "https://json-schema.org/draft/2020-12/schema"
)

// wrapSchema returns the schema of {"value": v} for the values v that schema accepts, and
// the replacer that turns the validator's messages about the one into messages about the
// other, once the wrapper's own "validating root: " is cut.
//
// The wrapper holds schema as properties.value. References in schema ("#",
// "#/$defs/x", "#name") resolve against the base URI of the schema resource that holds
// them, which at the root was the document's: to keep them pointing where they did,
// schema becomes a resource of its own with an $id (its own if it has one, else valueID).
// Its $schema is copied to the wrapper's root, which says the draft of the whole.
//
// Draft-07 ignores every keyword beside a $ref, $id included. A draft-07 root with a $ref
// therefore becomes {"$id": valueID, "allOf": [{"$ref": …}]} and keeps, of its other
// keywords, only those a pointer may name a subschema in (definitions, $defs): the others
// had no effect. A draft-07 root $id with a fragment ("#name") names the root rather than
// giving it a base URI: it is replaced, and a $ref to it no longer resolves, which
// compiling the wrapper reports.
func wrapSchema(schema json.RawMessage) (json.RawMessage, *strings.Replacer, error) {
	schema = bytes.TrimSpace(schema)
	root := map[string]any{"type": "object", "required": []string{"value"}}
	var pairs []string
	if s := string(schema); s == "true" || s == "false" {
		// A boolean has no references, and no $id: the path names it.
		root["properties"] = map[string]json.RawMessage{"value": schema}
		pairs = append(pairs, "validating /properties/value:", "validating root:")
		return marshalWrapper(root, pairs)
	}
	if !json.Valid(schema) {
		return nil, nil, errors.New("not valid JSON")
	}
	var value map[string]json.RawMessage
	if schema[0] != '{' || json.Unmarshal(schema, &value) != nil {
		return nil, nil, errors.New("not a JSON object or boolean")
	}
	version, err := stringKeyword(value, "$schema")
	if err != nil {
		return nil, nil, err
	}
	switch version {
	case "", draft202012, draft07, draft07TLS:
	default:
		return nil, nil, errors.New("$schema: the draft " + version + " is not known; use 2020-12 or draft-07")
	}
	if version != "" {
		root["$schema"] = version
	}
	draft7 := version == draft07 || version == draft07TLS
	id, err := stringKeyword(value, "$id")
	if err != nil {
		return nil, nil, err
	}
	// An $id gives a base URI unless it has a fragment: draft-07 reads one as a name for
	// the schema (2020-12 refuses it, and so does compiling).
	ownID := false
	if u, err := url.Parse(id); err == nil && id != "" {
		ownID = u.Fragment == ""
	}
	if ref, ok := value["$ref"]; ok && draft7 {
		kept := map[string]json.RawMessage{"allOf": mustMarshal([]map[string]json.RawMessage{{"$ref": ref}})}
		for _, k := range []string{"$schema", "definitions", "$defs"} {
			if v, ok := value[k]; ok {
				kept[k] = v
			}
		}
		value, ownID = kept, false
		pairs = append(pairs, "validating /properties/value/allOf/0: ", "")
	}
	if !ownID {
		value["$id"] = mustMarshal(valueID)
		pairs = append(pairs, "validating "+valueID, "validating root")
	}
	root["properties"] = map[string]any{"value": value}
	pairs = append(pairs, "validating /properties/value/", "validating /")
	return marshalWrapper(root, pairs)
}

// stringKeyword returns the string value of keyword in schema, "" when it is absent.
func stringKeyword(schema map[string]json.RawMessage, keyword string) (string, error) {
	raw, ok := schema[keyword]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New(keyword + ": not a string")
	}
	return s, nil
}

func marshalWrapper(root map[string]any, pairs []string) (json.RawMessage, *strings.Replacer, error) {
	raw, err := json.Marshal(root)
	if err != nil {
		return nil, nil, err
	}
	return raw, strings.NewReplacer(pairs...), nil
}

// mustMarshal encodes v, which always encodes.
func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
