// Package fallback chains models: a [Chain] is a [runtime.Model] that calls its models
// in order, moving to the next when one fails before it emitted anything, so that an
// agent can name fallback models for when its own is down, rate limited or refuses the
// call. [New] makes one without a logger.
//
// A model "fails before emitting" when the first item of its sequence is an error (a
// report of the served model, [runtime.ModelResponseInfo], before it does not count). The
// provider adapters (packages openai and anthropic) retry such failures themselves
// first, the one place agentd retries a model call, so a fallback is tried once a
// model's retries are spent. Once a model has emitted an event, the chain is committed
// to it: its later events and errors pass through unchanged, since the consumer has
// already shown its output.
//
// Whether the next model may help is read from the failure, as the adapters classify it
// (the same classification that decides their retries): every failure of the model
// itself moves on, transient or not (down, overloaded, rate limited, stalled, a wrong
// key or model name, a request this model refuses), but not one of the caller: a done
// context (cancelled, or past its deadline) ends the chain at once with the context's
// error. When every model fails, the sequence ends with an [*Error] holding each model's
// error.
//
// A fallback is never silent. Each move to the next model adds an event named
// "gen_ai.model.fallback" to the span of the call's context (the runtime's
// "chat {model}" span), with the attributes agentd.fallback.from_model,
// agentd.fallback.to_model and error.type (the failure's, as the runtime names it); and, when
// the [Chain] has a Logger, it logs a warning with the call's context, the two models'
// names and the failure's text, never the request. When a fallback answers, the call's
// span says which: agentd.fallback.model is its name and agentd.fallback.index its place
// in the chain (1 for the first fallback); and its events start with a report of the
// model that served the call, the fallback's own or else the model part of its name, so
// that the runtime's gen_ai.response.model names it rather than the model asked for. The
// span's gen_ai.provider.name and gen_ai.request.model still describe the request.
package fallback
