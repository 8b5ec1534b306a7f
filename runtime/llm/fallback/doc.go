// Package fallback chains models: [New] returns a [runtime.Model] that calls its models
// in order, moving to the next when one fails before it emitted anything, so that an
// agent can name fallback models for when its own is down or rate limited.
//
// A model "fails before emitting" when the first item of its sequence is an error. The
// provider adapters (packages openai and anthropic) retry such failures themselves
// first, so a fallback is tried once a model's retries are exhausted. Once a model has
// emitted an event, the chain is committed to it: its later events and errors pass
// through unchanged, since the consumer has already shown its output.
//
// Any error moves to the next model, save the context's: a cancelled call ends the chain
// at once. When every model fails, the sequence ends with an [*Error] holding each
// model's error.
package fallback
