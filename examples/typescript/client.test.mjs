// Tests the example client against a real agentd (node --test client.test.mjs):
//   AGENTD_ADDR=host:port   an agentd already running with the demo agent (--demo-delay 0 is
//                           quickest), as examples/run-tests.sh starts it; or
//   AGENTD_BIN=path         an agentd binary this test starts on a free loopback port and stops.
// With neither it skips, unless CI is set: then it fails. AGENTD_TOKEN, when set, is sent as a
// bearer token.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { after, before, test } from "node:test";

import { RunEndReason } from "../../gen/ts/agentd/v1/events_pb.js";
import { Role } from "../../gen/ts/agentd/v1/transcript_pb.js";
import { EDITED_ARGUMENTS, INPUT, STEER, converse } from "./client.mjs";

/** @type {string | undefined} */ let addr = process.env.AGENTD_ADDR;
/** @type {import("node:child_process").ChildProcess | undefined} */ let agentd;
let agentdLog = "";
const skip = !addr && !process.env.AGENTD_BIN
  ? "set AGENTD_ADDR (a running agentd) or AGENTD_BIN (an agentd binary to start); examples/run-tests.sh does"
  : false;
if (skip && process.env.CI) throw new Error(`${skip}; CI is set, so this fails instead of skipping`);

before(async () => {
  if (addr || skip) return;
  // Start agentd on a port the kernel picks, and read the address from its log.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("AGENTD_")));
  agentd = spawn(/** @type {string} */ (process.env.AGENTD_BIN), ["--listen", "127.0.0.1:0", "--demo-delay", "0"], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  addr = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agentd did not start within 30 s:\n${agentdLog}`)), 30_000);
    agentd?.stderr?.on("data", (chunk) => {
      agentdLog += chunk;
      const m = /"msg":"agentd listening","addr":"([^"]+)"/.exec(agentdLog);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    agentd?.on("exit", (code) => reject(new Error(`agentd exited (${code}) before it served:\n${agentdLog}`)));
  });
});

after(async () => {
  if (!agentd || agentd.exitCode !== null) return;
  const exited = once(agentd, "exit");
  agentd.kill("SIGTERM");
  const [code] = await exited;
  assert.equal(code, 0, `agentd exited ${code} after SIGTERM:\n${agentdLog}`);
});

test("a conversation with an approval and a steer", { skip, timeout: 60_000 }, async () => {
  const lines = [];
  const r = await converse({ addr: /** @type {string} */ (addr), token: process.env.AGENTD_TOKEN, log: (l) => lines.push(l) });
  const context = `\n--- client log:\n${lines.join("\n")}`;

  // ListAgents: the demo agent, whose save_note needs an approval.
  const demo = r.agents.find((a) => a.name === "demo");
  assert.ok(demo, `no demo agent in ${r.agents.map((a) => a.name)}`);
  assert.equal(demo.tools.find((t) => t.spec?.name === "save_note")?.requiresApproval, true);

  // A well-formed stream: run_started first, run_finished last, once each.
  assert.equal(r.kinds[0], "runStarted", context);
  assert.equal(r.kinds.at(-1), "runFinished", context);
  assert.equal(r.kinds.filter((k) => k === "runFinished").length, 1, context);

  // The steer (client_seq 2) and the decision (3) were both accepted, in that order.
  assert.deepEqual(r.acks, [
    { clientSeq: 2n, accepted: true, error: undefined },
    { clientSeq: 3n, accepted: true, error: undefined },
  ], context);

  // save_note ran with the edited arguments.
  assert.deepEqual(JSON.parse(r.approvedArguments ?? "null"), EDITED_ARGUMENTS, context);
  // Note ids count up per agentd process ("note_1", "note_2", …).
  const saved = /** @type {{ name: string, output: { id: string }, isError: boolean }} */ (r.toolResults[0]);
  assert.match(saved.output.id, /^note_\d+$/, context);
  assert.deepEqual(saved, { name: "save_note", output: { id: saved.output.id, saved: true, title: "Buy milk" }, isError: false }, context);

  // The steer entered the transcript after save_note's result, and the model answered it.
  assert.deepEqual(r.steerApplied, { clientSeq: 2n, dropped: false }, context);
  assert.ok(r.kinds.indexOf("toolCallResult") < r.kinds.indexOf("steerApplied", r.kinds.indexOf("approvalResolved")), context);
  assert.deepEqual(r.toolResults[1], { name: "calculate", output: { expression: "6*7", result: 42 }, isError: false }, context);

  // The run completed; the final text is what streamed, and the transcript holds the input,
  // the call, its result, the steer, and the rest in that order.
  const fin = /** @type {NonNullable<typeof r.finished>} */ (r.finished);
  assert.equal(fin.reason, RunEndReason.COMPLETED, context);
  assert.equal(r.finalText, "6*7 = 42", context);
  assert.equal(r.text, r.finalText, context);
  const texts = fin.newMessages.map((m) => `${Role[m.role]}:${m.parts.map((p) => p.kind.case === "text" ? p.kind.value : p.kind.case).join("+")}`);
  assert.deepEqual(texts, [
    `USER:${INPUT}`,
    "ASSISTANT:toolCall",
    "TOOL:toolResult",
    `USER:${STEER}`,
    "ASSISTANT:toolCall",
    "TOOL:toolResult",
    "ASSISTANT:6*7 = 42",
  ], context);
});
