package builtin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/runtime"
)

const currentTimeSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "timezone": {
      "type": "string",
      "description": "IANA time zone name, such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\". Optional; the default is UTC.",
      "minLength": 1,
      "maxLength": 64
    }
  },
  "additionalProperties": false
}`

// TimeResult is the JSON output of current_time.
type TimeResult struct {
	// Time is the current time in the zone, as RFC 3339 with the zone's offset.
	Time string `json:"time"`
	// Timezone is the zone's IANA name.
	Timezone string `json:"timezone"`
	// Unix is the time in seconds since 1970-01-01 UTC.
	Unix int64 `json:"unix"`
}

// CurrentTime returns the current_time tool. Its arguments are {"timezone": name}, the
// name optional (UTC by default); its output is a [TimeResult]. An unknown zone is an
// error. [WithClock] sets the clock; other options are ignored.
func CurrentTime(opts ...Option) runtime.Tool {
	now := newOptions(opts).now
	spec := runtime.ToolSpec{
		Name: CurrentTimeName,
		Description: "Returns the current date and time. Call it whenever the user asks what time or " +
			"date it is, or needs the current time to answer; do not guess the time. The result holds " +
			"the time as RFC 3339 in the requested IANA time zone (UTC when none is given) and as Unix seconds.",
		Parameters: []byte(currentTimeSchema),
		Parallel:   true,
		Idempotent: true, // it changes nothing: running it again is harmless
	}
	return runtime.NewTool(spec, func(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
		var args struct {
			Timezone string `json:"timezone"`
		}
		if err := decodeArgs(call.Arguments, &args); err != nil {
			return runtime.Output{}, err
		}
		loc, err := loadLocation(args.Timezone)
		if err != nil {
			return runtime.Output{}, err
		}
		t := now().In(loc)
		return jsonOutput(TimeResult{Time: t.Format(time.RFC3339), Timezone: loc.String(), Unix: t.Unix()})
	})
}

// loadLocation loads an IANA zone. "Local" is refused: it names the server's zone, which
// is neither the user's nor stable across replicas.
func loadLocation(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "" || strings.EqualFold(name, "UTC"):
		return time.UTC, nil
	case name == "Local" || len(name) > 64:
		return nil, fmt.Errorf("unknown time zone %q: want an IANA name such as \"Europe/Berlin\"", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: want an IANA name such as \"Europe/Berlin\"", name)
	}
	return loc, nil
}
