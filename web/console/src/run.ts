// A conversation: its runs, and how each of their events changes the transcript. Events
// are applied once: each run remembers the last seq it applied and skips the others, so a
// stream that attaches again from a cursor, or replays a journal, shows nothing twice.

import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Duration, type Value } from "@bufbuild/protobuf/wkt";
import { ApprovalOutcome } from "../../../gen/ts/agentd/v1/run_pb.js";
import {
  DecidedBy,
  MessageKind,
  RunEndReason,
  RunState,
  type ApprovalRequested,
  type RunEvent,
  type RunFinished,
  type RunStarted,
} from "../../../gen/ts/agentd/v1/events_pb.js";
import { Role, type Message, type Usage } from "../../../gen/ts/agentd/v1/transcript_pb.js";
import { count } from "./dom.js";
import type { Mode, Saved } from "./session.js";
import type { Decision, Transcript } from "./view.js";

/** RunInfo is what the conversation knows of one of its runs. */
export interface RunInfo {
  id: string;
  /** The last seq applied; events at or below it are not applied again. */
  lastSeq: bigint;
  started?: RunStarted;
  finished?: RunFinished;
  /** state is the attached event's, until the run finishes. */
  state: RunState;
  usage?: Usage;
  agent: string;
  model: string;
  /** The user's input this page started the run with, shown at its steer_applied. */
  input?: string;
  inputShown: boolean;
  /** Decisions taken while the run was parked, sent when it resumes. */
  decisions: Map<string, Decision>;
  /** Approvals requested, by id. */
  approvals: Map<string, ApprovalRequested>;
  /** The person left the parked run's approvals pending, to write something else. */
  dismissed: boolean;
}

/** Handlers are what the conversation asks of the page. */
export interface Handlers {
  /** decide answers an approval of a run. */
  decide(run: RunInfo, approvalId: string, d: Decision): Promise<void>;
  /** changed says the conversation's state changed (status line, composer). */
  changed(): void;
}

/** Conversation is a conversation as the page shows it: its runs, oldest first. */
export class Conversation {
  mode: Mode;
  agent: string;
  threadId: string;
  historyCount: number;
  /** The history the page keeps and sends with each run (mode "client"). */
  readonly history: Message[] = [];
  private readonly runs = new Map<string, RunInfo>();
  private readonly order: string[] = [];
  /** Text of the steers sent, oldest first, until their steer_applied shows them. */
  readonly steers: string[] = [];
  /** The input of the run being started, until its run_started. */
  nextInput: string | undefined;
  private readonly waiters = new Map<string, ((f: RunFinished) => void)[]>();

  constructor(
    saved: Saved,
    private readonly view: Transcript,
    private readonly on: Handlers,
  ) {
    this.mode = saved.mode;
    this.agent = saved.agent;
    this.threadId = saved.threadId;
    this.historyCount = saved.historyCount;
    for (const id of saved.runs) this.run(id);
  }

  /** saved returns what the tab keeps of the conversation. */
  saved(): Saved {
    return {
      mode: this.mode,
      agent: this.agent,
      threadId: this.threadId,
      historyCount: this.historyCount,
      runs: [...this.order],
      seq: Number(this.current?.lastSeq ?? 0n),
    };
  }

  /** runIds returns the conversation's runs, oldest first. */
  runIds(): string[] {
    return [...this.order];
  }

  /** current is the conversation's last run. */
  get current(): RunInfo | undefined {
    const id = this.order.at(-1);
    return id === undefined ? undefined : this.runs.get(id);
  }

  /** live reports whether the last run is going (started, not finished). */
  get live(): boolean {
    const r = this.current;
    return r !== undefined && r.finished === undefined && (r.started !== undefined || r.state !== RunState.UNSPECIFIED);
  }

  /** awaiting returns the approvals the last run, parked, waits for. */
  get awaiting(): ApprovalRequested[] {
    const f = this.current?.finished;
    if (f === undefined || this.current?.dismissed === true || f.reason !== RunEndReason.AWAITING_INPUT || f.continuation.length === 0) return [];
    return f.pendingApprovals;
  }

  /** run returns the run of id, adding it to the conversation if it is new. */
  run(id: string): RunInfo {
    let r = this.runs.get(id);
    if (r === undefined) {
      r = {
        id,
        lastSeq: 0n,
        state: RunState.UNSPECIFIED,
        agent: this.agent,
        model: "",
        inputShown: false,
        decisions: new Map(),
        approvals: new Map(),
        dismissed: false,
      };
      this.runs.set(id, r);
      this.order.push(id);
    }
    return r;
  }

  /** whenFinished resolves with the run's run_finished, at once if it has it. */
  whenFinished(r: RunInfo): Promise<RunFinished> {
    if (r.finished !== undefined) return Promise.resolve(r.finished);
    return new Promise((resolve) => {
      const ws = this.waiters.get(r.id) ?? [];
      ws.push(resolve);
      this.waiters.set(r.id, ws);
    });
  }

  /**
   * apply shows one event of a stream. It returns false for an event applied already
   * (its seq at or below the run's cursor).
   */
  apply(ev: RunEvent): boolean {
    if (ev.runId === "") return false;
    const r = this.run(ev.runId);
    if (ev.seq > 0n) {
      if (ev.seq <= r.lastSeq) return false;
      r.lastSeq = ev.seq;
    }
    const v = this.view;
    const k = ev.kind;
    switch (k.case) {
      case "attached":
        if (r.finished === undefined) r.state = k.value.state;
        r.agent ||= k.value.agent;
        if (this.mode === "thread" && this.threadId === "") this.threadId = k.value.threadId;
        if (k.value.usage !== undefined) r.usage = k.value.usage;
        break;
      case "runStarted": {
        const s = k.value;
        r.started = s;
        r.state = RunState.RUNNING;
        r.agent = s.agent;
        r.model = s.model;
        this.agent = s.agent;
        if (this.mode === "thread") this.threadId = s.threadId;
        if (s.resumed) {
          v.notice(`Resumed as run ${r.id}`, "run");
        } else {
          // A new turn: what earlier runs left undecided stays so.
          for (const c of v.openApprovals()) c.closeApproval("Not decided: a new run started.");
          v.notice(`Run ${r.id} · agent ${s.agent} · ${s.model}`, "run");
          if (this.nextInput !== undefined) {
            r.input = this.nextInput;
            this.nextInput = undefined;
          }
        }
        break;
      }
      case "steerApplied": {
        const s = k.value;
        let text: string | undefined;
        if (s.clientSeq === 0n && r.input !== undefined && !r.inputShown) {
          text = r.input;
          r.inputShown = true;
        } else {
          text = this.steers.shift();
        }
        if (s.dropped) {
          v.notice(`Your message was not used${text !== undefined ? ` (“${text}”)` : ""}: ${s.dropReason}`, "error");
        } else {
          v.user(s.messageId, text);
        }
        break;
      }
      case "messageStarted":
        v.block(k.value.messageId, k.value.kind === MessageKind.REASONING ? "reasoning" : "text");
        break;
      case "textDelta":
      case "reasoningDelta":
        v.append(k.value.messageId, k.value.delta);
        break;
      case "messageFinished":
        v.finish(k.value.messageId, k.value.partial || k.value.abandoned);
        break;
      case "toolCallStarted":
        v.startTool(k.value.toolCallId, k.value.name);
        break;
      case "toolCallArgsDelta":
        v.tool(k.value.toolCallId, "").appendArgs(k.value.delta);
        break;
      case "toolCallArgsDone":
        v.tool(k.value.toolCallId, "").setArgs(k.value.argumentsJson);
        break;
      case "approvalRequested": {
        const a = k.value;
        r.approvals.set(a.approvalId, a);
        r.state = RunState.WAITING;
        v.tool(a.toolCallId, a.toolName).ask(a, (d) => this.on.decide(this.owner(a.approvalId) ?? r, a.approvalId, d));
        break;
      }
      case "approvalResolved": {
        const a = k.value;
        const c = v.tool(a.toolCallId, "");
        const approved = a.outcome === ApprovalOutcome.APPROVED;
        const asked = this.requested(a.approvalId)?.argumentsJson ?? "";
        c.resolve(approved, resolvedText(a.outcome, a.decidedBy, a.reason, asked !== "" && a.argumentsJson !== "" && asked !== a.argumentsJson), a.argumentsJson);
        if (r.finished === undefined) r.state = RunState.RUNNING;
        break;
      }
      case "toolExecutionStarted":
        v.tool(k.value.toolCallId, k.value.name).setStatus("running");
        break;
      case "toolCallResult": {
        const t = k.value;
        const out = t.output.case === "json" ? JSON.stringify(valueJSON(t.output.value)) : t.output.case === "text" ? t.output.value : "";
        v.tool(t.toolCallId, t.name).setResult(out, t.isError, duration(t.duration));
        break;
      }
      case "toolCallsCancelled":
        for (const id of k.value.toolCallIds) v.existingTool(id)?.cancel(k.value.reason);
        break;
      case "stepFinished":
        if (k.value.usage !== undefined) r.usage = k.value.usage;
        this.fillUsers(k.value.newMessages);
        break;
      case "inputAck":
        if (!k.value.accepted) {
          const e = k.value.error;
          v.notice(`agentd refused an input: ${e?.reason ?? "refused"}: ${e?.message ?? ""}`, "error");
        }
        break;
      case "goAway":
        v.notice("agentd is shutting down: the run ends soon, or is resumed elsewhere.", "info");
        break;
      case "hookEvent":
        v.notice(`${k.value.name}: ${JSON.stringify(k.value.value !== undefined ? valueJSON(k.value.value) : null)}`, "info");
        break;
      case "runFinished":
        this.finished(r, k.value);
        break;
      default:
        // checkpoint and heartbeat change nothing shown; unknown kinds are ignored.
        break;
    }
    this.on.changed();
    return true;
  }

  private finished(r: RunInfo, f: RunFinished): void {
    r.finished = f;
    r.state = RunState.FINISHED;
    if (f.usage !== undefined) r.usage = f.usage;
    this.fillUsers(f.newMessages);
    if (this.mode === "client") this.history.push(...f.newMessages);
    const v = this.view;
    if (f.reason !== RunEndReason.AWAITING_INPUT) {
      for (const c of v.openApprovals()) c.closeApproval("Not decided: the run ended.");
    }
    if (f.output !== undefined) v.result(JSON.stringify(valueJSON(f.output)));
    const what = summary(f);
    v.notice(what.text, what.kind);
    const ws = this.waiters.get(r.id) ?? [];
    this.waiters.delete(r.id);
    for (const w of ws) w(f);
  }

  /** history shows messages the server keeps (a thread's), oldest first. */
  showHistory(messages: Message[]): void {
    const v = this.view;
    for (const m of messages) {
      switch (m.role) {
        case Role.USER:
          v.user(m.id, messageText(m));
          break;
        case Role.ASSISTANT:
          for (const p of m.parts) {
            const k = p.kind;
            if (k.case === "text") v.text(p.id, "text", k.value);
            else if (k.case === "reasoning") v.text(p.id, "reasoning", k.value.text);
            else if (k.case === "toolCall") v.tool(k.value.id, k.value.name).setArgs(k.value.argumentsJson);
          }
          break;
        case Role.TOOL:
          for (const p of m.parts) {
            if (p.kind.case !== "toolResult") continue;
            const t = p.kind.value;
            const out = t.output.case === "json" ? JSON.stringify(valueJSON(t.output.value)) : t.output.case === "text" ? t.output.value : "";
            v.tool(t.toolCallId, t.name).setResult(out, t.isError, "");
          }
          break;
        default:
          v.notice(`${Role[m.role].toLowerCase()}: ${messageText(m)}`, "info");
      }
    }
  }

  // fillUsers gives user messages shown before their text was known (a steer seen in a
  // journal) their text.
  private fillUsers(messages: Message[]): void {
    for (const m of messages) {
      if (m.role === Role.USER) this.view.fillUser(m.id, messageText(m));
    }
  }

  private owner(approvalId: string): RunInfo | undefined {
    let owner: RunInfo | undefined;
    for (const id of this.order) {
      const r = this.runs.get(id);
      if (r?.approvals.has(approvalId)) owner = r;
    }
    return owner;
  }

  private requested(approvalId: string): ApprovalRequested | undefined {
    for (const id of this.order) {
      const a = this.runs.get(id)?.approvals.get(approvalId);
      if (a !== undefined) return a;
    }
    return undefined;
  }
}

/** messageText joins a message's text parts. */
export function messageText(m: Message): string {
  return m.parts.map((p) => (p.kind.case === "text" ? p.kind.value : "")).join("");
}

function valueJSON(v: Value): JsonValue {
  return toJson(ValueSchema, v);
}

function duration(d: Duration | undefined): string {
  if (d === undefined) return "";
  const ms = Number(d.seconds) * 1000 + d.nanos / 1e6;
  return ms < 1000 ? `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

function resolvedText(o: ApprovalOutcome, by: DecidedBy, reason: string, edited: boolean): string {
  const who: Record<number, string> = {
    [DecidedBy.CLIENT]: "by you",
    [DecidedBy.POLICY]: "by the run's approval policy",
    [DecidedBy.HOOK]: "by a hook",
    [DecidedBy.TIMEOUT]: "by the approval timeout",
    [DecidedBy.RUN_END]: "as the run ended",
    [DecidedBy.GRANT]: "by an earlier grant",
  };
  const by_ = who[by] ?? "";
  const why = reason !== "" ? `: ${reason}` : "";
  switch (o) {
    case ApprovalOutcome.APPROVED:
      return `Approved ${by_}${edited ? " with edited arguments" : ""}`.trim();
    case ApprovalOutcome.DENIED:
      return `Denied ${by_}${why}`;
    case ApprovalOutcome.EXPIRED:
      return `Expired${why}`;
    default:
      return `Cancelled${why}`;
  }
}

/** usageText writes usage as agentctl does: "2 model calls · 1 tool call · 1,294 tokens in, 11 out". */
export function usageText(u: Usage | undefined): string {
  if (u === undefined) return "";
  const parts = [count(u.modelCalls, "model call")];
  if (u.toolCalls > 0n) parts.push(count(u.toolCalls, "tool call"));
  parts.push(`${u.inputTokens.toLocaleString("en")} tokens in, ${u.outputTokens.toLocaleString("en")} out`);
  return parts.join(" · ");
}

/** reasonText names a run's end reason in lower case: "completed", "awaiting input". */
export function reasonText(r: RunEndReason): string {
  return (RunEndReason[r] ?? "unknown").toLowerCase().replace(/_/g, " ");
}

function summary(f: RunFinished): { text: string; kind: "run" | "error" } {
  const u = usageText(f.usage);
  switch (f.reason) {
    case RunEndReason.COMPLETED:
      return { text: `✓ completed${u !== "" ? " · " + u : ""}`, kind: "run" };
    case RunEndReason.AWAITING_INPUT:
      return { text: `‖ paused: waiting for ${f.pendingApprovals.length > 0 ? "your decision" : "input"}`, kind: "run" };
    case RunEndReason.CANCELLED:
      return { text: `✗ cancelled${u !== "" ? " · " + u : ""}`, kind: "run" };
  }
  const e = f.error;
  return { text: `✗ ${reasonText(f.reason)}${e !== undefined ? `: ${e.reason} — ${e.message}` : ""}`, kind: "error" };
}
