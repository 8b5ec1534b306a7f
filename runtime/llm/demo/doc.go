// Package demo provides agentd's built-in demo model: a deterministic [runtime.Model]
// that follows a few fixed rules, so that agentd can be tried, and the runtime tested,
// without an API key or a network.
//
// The model is not a language model, and says so. It looks at the request alone:
//
//   - When the last message holds tool results, it answers from them in streamed text
//     ("It is … (UTC).", "12*7 = 84", "Saved your note …"), and says plainly when a tool
//     failed or a call was denied, quoting the error.
//   - Otherwise it reads the last user message. An arithmetic expression ("what is 12*7",
//     "calculate (3+4)/2", "12 times 7") calls calculate; a question about the time or the
//     date calls current_time (with the IANA zone the message names, if any); a request to
//     save, note or remember something calls save_note with a title and a text taken from
//     the message. Anything else gets an explanation of what the model is, what it can do
//     and how to configure a real model.
//
// The tools are the ones of package [github.com/agentd/agentd/runtime/tool/builtin]. The
// model calls a tool only when the request offers it, and otherwise says that the tool is
// not available.
//
// A request that asks for a reply matching a JSON Schema (a typed run: the model is a
// runtime.NativeOutputModel) gets a value of that schema made from the text it would have
// said: see NativeOutput.
//
// Text is streamed a few words per delta, tool-call arguments in small fragments, with
// [Config.Delay] between deltas; a usage event with token counts estimated from the
// request's size (a token per four bytes) comes before the finish event.
package demo
