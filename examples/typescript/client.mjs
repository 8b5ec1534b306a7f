// @ts-check
// A small agentd client on @connectrpc/connect-node's gRPC transport, with the stubs that
// protoc-gen-es generates in gen/ts. It lists the agents, then holds one conversation on a
// Run stream: it asks the demo agent to save a note, steers the run while the approval is
// pending, approves the call with edited arguments, and prints the final answer.
//
//   npm ci                                    # at the repository root: buf, protoc-gen-es and
//                                             # @bufbuild/protobuf, which gen/ts imports
//   (cd examples/typescript && npm ci)        # this example's own packages
//   go run ./cmd/agentd --demo-delay 0 &      # agentd with the built-in demo agent
//   AGENTD_ADDR=localhost:50051 node examples/typescript/client.mjs
//
// AGENTD_TOKEN, when set, is sent as "authorization: Bearer <token>" (agentd's
// --auth-tokens-file). The connection is plaintext; for TLS use an https:// baseUrl.
//
// The conversation, and why it is deterministic:
//   1. start        "save a note: buy milk"; the demo model calls save_note, which needs an
//                   approval: agentd sends approval_requested and waits (the Run stream's
//                   default policy is ASK).
//   2. steer        NEXT_STEP "also, what is 6*7?", sent while the approval is pending, so it is
//                   queued before the call runs and enters the transcript before the next model
//                   call, whatever the timing. Its input_ack comes before anything it causes.
//   3. decision     once the steer is acked: APPROVED, with edited arguments (the note's text
//                   gets ", it's urgent"); save_note runs with them.
//   4. next step    steer_applied; the model answers the steer with a calculate call.
//   5. run_finished COMPLETED, final text "6*7 = 42". The client half-closes its side.

import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { pathToFileURL } from "node:url";

import { AgentService, RunRequestSchema } from "../../gen/ts/agentd/v1/agent_service_pb.js";
import { RunEndReason } from "../../gen/ts/agentd/v1/events_pb.js";
import { ApprovalOutcome, SteerMode } from "../../gen/ts/agentd/v1/run_pb.js";

/** What the conversation says and sends. */
export const INPUT = "save a note: buy milk";
export const STEER = "also, what is 6*7?";
export const EDITED_ARGUMENTS = { title: "Buy milk", text: "buy milk, it's urgent" };

/**
 * A queue of requests that is also the request stream of a bidi call: push() sends, end()
 * half-closes.
 * @template T
 */
class Outbox {
  /** @type {T[]} */ #items = [];
  /** @type {((r: IteratorResult<T>) => void) | undefined} */ #waiter;
  #ended = false;

  /** @param {T} item */
  push(item) {
    if (this.#ended) return;
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = undefined;
      w({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
  }

  end() {
    this.#ended = true;
    if (this.#waiter && this.#items.length === 0) {
      const w = this.#waiter;
      this.#waiter = undefined;
      w({ value: undefined, done: true });
    }
  }

  /** Takes the next item, waiting for one; undefined once the outbox has ended and is empty. */
  async #take() {
    const item = this.#items.shift();
    if (item !== undefined || this.#ended) return item;
    const r = await new Promise((resolve) => (this.#waiter = resolve));
    return r.done ? undefined : r.value;
  }

  /** The request stream: an async generator, so it has the return() and throw() connect calls. */
  async *[Symbol.asyncIterator]() {
    try {
      for (let item = await this.#take(); item !== undefined; item = await this.#take()) yield item;
    } finally {
      this.end();
    }
  }
}

/**
 * Connects to agentd at addr ("host:port", plaintext), with a bearer token if one is given.
 * @param {string} addr
 * @param {string} [token]
 */
export function connect(addr, token) {
  /** @type {import("@connectrpc/connect").Interceptor[]} */
  const interceptors = [];
  if (token) {
    interceptors.push((next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    });
  }
  const transport = createGrpcTransport({ baseUrl: `http://${addr}`, interceptors });
  return createClient(AgentService, transport);
}

/**
 * Lists the agents, then runs the conversation described at the top of this file.
 * @param {{ addr: string, token?: string, log?: (line: string) => void, timeoutMs?: number }} options
 */
export async function converse({ addr, token, log = () => {}, timeoutMs = 30_000 }) {
  const client = connect(addr, token);

  const { agents } = await client.listAgents({}, { timeoutMs });
  for (const a of agents) {
    log(`agent ${a.name} (${a.model}): ${a.tools.map((t) => t.spec?.name).join(", ")}`);
  }

  const outbox = /** @type {Outbox<import("@bufbuild/protobuf").MessageInitShape<typeof RunRequestSchema>>} */ (new Outbox());
  let clientSeq = 0;
  /** @param {import("@bufbuild/protobuf").MessageInitShape<typeof RunRequestSchema>["kind"]} kind */
  const send = (kind) => {
    const seq = BigInt(++clientSeq);
    outbox.push({ clientSeq: seq, kind });
    return seq;
  };

  const seen = {
    /** @type {string[]} */ kinds: [],
    /** @type {{ clientSeq: bigint, accepted: boolean, error?: string }[]} */ acks: [],
    /** @type {string | undefined} */ approvedArguments: undefined,
    /** @type {unknown[]} */ toolResults: [],
    /** @type {{ clientSeq: bigint, dropped: boolean } | undefined} */ steerApplied: undefined,
    text: "",
    /** @type {import("../../gen/ts/agentd/v1/events_pb.js").RunFinished | undefined} */ finished: undefined,
  };
  /** @type {string | undefined} */ let approvalId;
  /** @type {bigint | undefined} */ let steerSeq;
  /** @type {bigint | undefined} */ let decisionSeq;

  send({ case: "start", value: { input: INPUT } });
  const abort = AbortSignal.timeout(timeoutMs);
  try {
    for await (const { event } of client.run(outbox, { signal: abort })) {
      if (!event) continue;
      const { case: kind, value } = event.kind;
      if (kind === undefined) continue; // an event kind newer than these stubs
      seen.kinds.push(kind);
      switch (kind) {
        case "runStarted":
          log(`run ${value.runId} started: agent ${value.agent}, model ${value.model}`);
          break;
        case "approvalRequested":
          // 2. Steer while the approval is pending; decide once the steer is acked.
          log(`approval requested for ${value.toolName} ${value.argumentsJson}`);
          approvalId = value.approvalId;
          steerSeq = send({ case: "steer", value: { text: STEER, mode: SteerMode.NEXT_STEP } });
          log(`steer #${steerSeq} sent: ${JSON.stringify(STEER)}`);
          break;
        case "inputAck": {
          const error = value.error ? `${value.error.reason}: ${value.error.message}` : undefined;
          seen.acks.push({ clientSeq: value.clientSeq, accepted: value.accepted, error });
          log(`ack #${value.clientSeq}: ${value.accepted ? "accepted" : `refused (${error})`}`);
          if (value.clientSeq === steerSeq && approvalId !== undefined) {
            // 3. Approve, with edited arguments.
            decisionSeq = send({
              case: "approvalDecision",
              value: {
                approvalId,
                outcome: ApprovalOutcome.APPROVED,
                editedArguments: fromJson(ValueSchema, EDITED_ARGUMENTS),
              },
            });
            log(`decision #${decisionSeq} sent: approve with ${JSON.stringify(EDITED_ARGUMENTS)}`);
          }
          break;
        }
        case "approvalResolved":
          seen.approvedArguments = value.argumentsJson;
          log(`approval resolved: ${ApprovalOutcome[value.outcome]} with ${value.argumentsJson}`);
          break;
        case "toolCallResult": {
          const out = value.output.case === "json" ? toJson(ValueSchema, value.output.value) : value.output.value;
          seen.toolResults.push({ name: value.name, output: out, isError: value.isError });
          log(`${value.name} -> ${JSON.stringify(out)}`);
          break;
        }
        case "steerApplied":
          if (value.clientSeq !== 0n) seen.steerApplied = { clientSeq: value.clientSeq, dropped: value.dropped };
          // client_seq 0 is RunSpec.input, which enters the transcript the same way.
          log(value.clientSeq === 0n ? "input entered the transcript"
            : value.dropped ? `steer #${value.clientSeq} dropped: ${value.dropReason}`
            : `steer #${value.clientSeq} applied`);
          break;
        case "textDelta":
          // Append, never count: a client behind gets several of the model's
          // deltas merged into one, so delta boundaries carry no meaning.
          seen.text += value.delta;
          break;
        case "runFinished":
          seen.finished = value;
          log(`run finished: ${RunEndReason[value.reason]}`);
          outbox.end(); // 5. Nothing more to say: half-close.
          break;
      }
    }
  } finally {
    outbox.end();
  }
  if (!seen.finished) throw new Error("the stream ended without run_finished");
  return { agents, ...seen, finalText: seen.finished.finalText };
}

// Run as a program: print the conversation and the final answer.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const addr = process.env.AGENTD_ADDR || "localhost:50051";
  try {
    const result = await converse({ addr, token: process.env.AGENTD_TOKEN, log: (line) => console.log(line) });
    console.log(`\nfinal text: ${result.finalText}`);
    if (result.finished?.reason !== RunEndReason.COMPLETED) process.exitCode = 1;
  } catch (err) {
    console.error(`agentd at ${addr}: ${err instanceof Error ? err.message : err}`);
    process.exitCode = 1;
  }
}
