package wire

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
)

// MaxValueDepth bounds the nesting of the JSON values a client sends (edited arguments,
// tool results, client tool parameters, metadata): objects and arrays more than this
// many levels deep are refused with an error naming the limit.
const MaxValueDepth = 64

// CheckValueDepth refuses a value nested deeper than MaxValueDepth.
func CheckValueDepth(v *structpb.Value) error {
	if valueDepth(v, 0) > MaxValueDepth {
		return fmt.Errorf("objects and arrays nested too deep: the limit is %d levels", MaxValueDepth)
	}
	return nil
}

// valueDepth returns how deep v's objects and arrays nest below depth d, stopping as
// soon as it passes MaxValueDepth.
func valueDepth(v *structpb.Value, d int) int {
	if d > MaxValueDepth {
		return d
	}
	deepest := d
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		deepest = d + 1
		for _, f := range k.StructValue.GetFields() {
			if deepest = max(deepest, valueDepth(f, d+1)); deepest > MaxValueDepth {
				break
			}
		}
	case *structpb.Value_ListValue:
		deepest = d + 1
		for _, e := range k.ListValue.GetValues() {
			if deepest = max(deepest, valueDepth(e, d+1)); deepest > MaxValueDepth {
				break
			}
		}
	}
	return deepest
}

// ValueToJSON encodes a google.protobuf.Value as compact JSON with sorted keys: the exact
// bytes that run and that approvals and transcripts record. Values nested deeper than
// MaxValueDepth are refused.
func ValueToJSON(v *structpb.Value) (string, error) {
	if err := CheckValueDepth(v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v.AsInterface())
	if err != nil {
		return "", err
	}
	return string(b), nil
}
