// Package providertest holds the tests every provider adapter shares, written once and
// parameterised by an [Adapter]: what differs between adapters is data (the API's path,
// its error bodies, the names of recorded streams, environment variables), the logic
// under test is the same.
//
//   - [TestNew]: the model's name, a missing model, the key and base URL from the
//     environment.
//   - [TestRetries]: what is retried before the first delta (error statuses, error
//     events, dropped connections), how long the waits are, and what is not retried.
//   - [TestStalls]: a stalled stream before and after the first delta, a slow stream and
//     a slow consumer that are not stalls, no idle timeout.
//   - [TestCancel]: cancelling or stopping a call ends its HTTP request.
//   - [TestKeyNotInErrors]: the API key is sent in its header and written nowhere else.
//   - [TestStream] and [TestAssemble] run an adapter's own table of recorded streams: the
//     events it decodes from each, and the message the runtime assembles from them.
//   - [TestServedModel] runs an adapter's table of recorded streams and the model each
//     says served the call: the report of it, once, first, and not for a failed attempt.
//   - [FuzzStream] feeds arbitrary bytes to Stream as the provider's SSE body.
//
// An adapter's test package calls [TestShared], which runs the five that need only the
// Adapter as subtests, and each of the others from a test of the same name.
package providertest
