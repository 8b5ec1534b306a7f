// Package builtin provides three small, safe tools that agentd offers out of the box, so
// that a first run can show tool calls, approvals and tool results without configuring
// anything, and one that reaches the network only where its configuration allows:
//
//   - [CurrentTime] (current_time) reports the current time in an IANA time zone.
//   - [Calculate] (calculate) evaluates an arithmetic expression with a small parser of
//     its own: numbers, + - * / %, ^ or ** for powers, parentheses, sqrt() and abs().
//     Nothing is ever evaluated as code.
//   - [SaveNote] (save_note) stores a note in an in-memory [Notes] store, kept apart per
//     caller and thread ([NoteScope]) and bounded per scope and in all. It is the one
//     tool with an effect, so [Policy] makes its calls ask for an approval.
//   - [HTTPFetch] (http_fetch) GETs an http or https URL whose host is on the allow-list
//     it is made with, bounded in size and time, redirects included; it connects to
//     the host's own network (loopback, private, link-local addresses) or a cloud's
//     metadata service only where the list names the address. It is not among [Tools]:
//     it needs that list. [Policy] makes its calls ask for an approval too.
//
// [Tools] returns the first three:
//
//	notes := new(builtin.Notes)
//	agent, err := runtime.New(runtime.Config{
//		Model:  model,
//		Tools:  builtin.Tools(builtin.WithNotes(notes)),
//		Policy: builtin.Policy(),
//	})
//
// Every tool has a precise JSON Schema (draft 2020-12, no additional properties) that the
// runtime checks before a call runs, and checks its arguments again itself, so a tool
// called directly is as safe as one called through an agent. Failures are Go errors; the
// runtime turns them into error results the model reads.
//
// current_time loads zones with [time.LoadLocation], which needs a time zone database on
// the host; a program that may run without one (a scratch container) should import
// time/tzdata in its main package.
//
// All tools are safe for concurrent use.
package builtin
