// The console's wiring: what each control does, and how a run's stream is followed.
//
// A browser cannot hold the bidirectional Run stream, so a run is started with StartRun,
// followed on that stream (or on AttachRun after a reload or a broken connection, from
// the last seq seen), and given steers and a cancel with SendRunInput. StartRun cannot
// answer approvals on its stream: a call that needs one parks the run (it ends
// AWAITING_INPUT with a continuation), and the decision resumes it as a new run with
// StartRun {continuation, decisions}. A run that waits live (one started on a Run stream
// by another client, and attached to here) is answered with SendRunInput instead.
//
// A reload rebuilds the view from the journals: the tab keeps its conversation's run ids,
// attaches to each from seq 0 (the last one follows live), and shows a thread's older
// messages from GetThread.

import { fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ApprovalOutcome, History, type ApprovalDecisionSchema } from "../../../gen/ts/agentd/v1/run_pb.js";
import { RunEndReason, RunState, type RunEvent } from "../../../gen/ts/agentd/v1/events_pb.js";
import type { Message } from "../../../gen/ts/agentd/v1/transcript_pb.js";
import type { Thread } from "../../../gen/ts/agentd/v1/agent_service_pb.js";
import { client, Code, describe, errorText, isCode, newKey, setToken, token } from "./api.js";
import { button, byId, count, h } from "./dom.js";
import { Conversation, reasonText, usageText, type RunInfo } from "./run.js";
import * as session from "./session.js";
import type { Saved } from "./session.js";
import * as sidebar from "./sidebar.js";
import { Transcript, type Decision } from "./view.js";

const view = new Transcript(byId("transcript"));
const statusEl = byId("status");
const input = byId<HTMLTextAreaElement>("input");
const sendButton = byId<HTMLButtonElement>("send");
const cancelButton = byId<HTMLButtonElement>("cancel");
const hint = byId("composer-hint");
const queued = byId("queued");
const showApproval = button("Show the approval", () => view.showApproval(), { class: "btn btn-plain btn-small", attrs: { id: "show-approval" } });

let conv: Conversation;
/** Aborts the streams of the conversation shown; a new conversation gets a new one. */
let streams = new AbortController();
/** A start or a resume is on its way. */
let starting = false;

/** show makes saved the conversation shown, with an empty transcript. */
function show(saved: Saved): Conversation {
  streams.abort();
  streams = new AbortController();
  conv = new Conversation(saved, view, { decide, changed });
  view.clear(saved.runs.length === 0 && saved.historyCount === 0 ? intro(saved) : undefined);
  changed();
  return conv;
}

function intro(s: Saved): Node {
  const a = sidebar.agent(s.agent !== "" ? s.agent : sidebar.agentName());
  return h(
    "div",
    {},
    h("h2", { text: s.mode === "thread" ? "New thread" : "New run" }),
    h("p", {
      text:
        s.mode === "thread"
          ? "agentd keeps this conversation as a thread: each turn sends only its new message, and the thread is listed under Threads."
          : "This page keeps the conversation and sends it with each run; agentd keeps only the runs' journals.",
    }),
    a !== undefined ? h("p", {}, "Agent ", h("strong", { text: a.name }), a.description !== "" ? ": " + a.description : "") : "",
    a !== undefined && a.tools.length > 0 ? h("div", {}, h("p", { class: "intro-head", text: "Its tools:" }), sidebar.toolsOf(a)) : "",
  );
}

/** changed brings the status line and the composer up to date. */
function changed(): void {
  const c = conv;
  const r = c.current;
  const awaiting = c.awaiting.length > 0 && r?.dismissed !== true;
  const items: (Node | string)[] = [
    h("span", {
      class: "status-mode",
      text: c.mode === "thread" ? (c.threadId !== "" ? "Thread " + c.threadId : "New thread") : "Run · history kept by this page",
    }),
  ];
  let state = "";
  if (r !== undefined) {
    if (starting && !c.live) state = "starting";
    else if (awaiting) state = "waiting for your decision";
    else if (r.finished !== undefined) state = reasonText(r.finished.reason);
    else if (r.state === RunState.WAITING || r.state === RunState.PARKED) state = "waiting for a decision";
    else if (c.live) state = "running";
    items.push(
      field("run", r.id, "run id"),
      field("agent", r.agent, "agent"),
      r.model !== "" ? field("model", r.model, "model") : "",
      field("state", state, "state"),
      r.usage !== undefined ? field("usage", usageText(r.usage), "usage") : "",
    );
    const f = r.finished;
    if (f?.error !== undefined && f.reason !== RunEndReason.COMPLETED && f.reason !== RunEndReason.CANCELLED) {
      items.push(field("error", `${f.error.reason}: ${f.error.message}`, "error"));
    }
  } else if (starting) {
    items.push(field("state", "starting", "state"));
  }
  statusEl.replaceChildren(...items);
  statusEl.dataset["state"] = state;

  const live = c.live;
  input.disabled = awaiting || (starting && !live);
  sendButton.disabled = input.disabled;
  sendButton.textContent = live ? "Steer" : "Send";
  cancelButton.hidden = !live && !awaiting;
  cancelButton.textContent = live ? "Cancel run" : "Leave pending";
  cancelButton.title = live
    ? "End the run now"
    : "Go on without deciding: the call neither runs nor is denied, and the model is not told. " +
      "The run stays parked with the approval pending, so reloading this page asks again; your next message starts a new run without it.";
  input.placeholder = live
    ? "Steer the run: your message reaches the model before its next step"
    : awaiting
      ? "Decide the approval above to go on, or leave it pending"
      : c.mode === "thread" && c.threadId !== ""
        ? "Continue the thread…"
        : `Message ${sidebar.agentName() || "the agent"}…`;
  hint.replaceChildren(
    live
      ? "The run is going: what you send now is a steer. Enter sends, Shift+Enter starts a new line."
      : awaiting
        ? "A tool call waits for your decision."
        : "Enter sends, Shift+Enter starts a new line.",
    view.openApprovals().length > 0 ? showApproval : "",
  );
  queued.hidden = c.steers.length === 0;
  queued.replaceChildren(...c.steers.map((s) => h("div", { class: "queued-steer" }, h("span", { class: "queued-label", text: "Steer queued" }), s)));
  session.save(c.saved(), true);
}

function field(name: string, value: string, label: string): HTMLElement {
  return h("span", { class: "status-field", title: label, attrs: { "data-field": name } }, value);
}

/** Follow is a run's stream being read: started settles at its first event. */
interface Follow {
  started: Promise<RunInfo>;
  done: Promise<void>;
}

/**
 * follow reads a run's events into c until the run finishes, attaching again from the
 * last seq seen when the stream breaks. Its started promise rejects with the error of a
 * stream that failed before its first event (nothing was started or attached).
 */
function follow(c: Conversation, first: AsyncIterable<{ event?: RunEvent }>, signal: AbortSignal): Follow {
  let resolveStarted!: (r: RunInfo) => void;
  let rejectStarted!: (e: unknown) => void;
  const started = new Promise<RunInfo>((res, rej) => {
    resolveStarted = res;
    rejectStarted = rej;
  });
  const done = (async () => {
    let stream = first;
    let runId = "";
    let failures = 0;
    let replay = false; // the run had finished when the stream attached
    for (;;) {
      let err: unknown;
      try {
        for await (const res of stream) {
          const ev = res.event;
          if (ev === undefined || conv !== c) continue;
          const isNew = runId === "";
          runId ||= ev.runId;
          if (isNew && ev.kind.case === "attached") replay = ev.kind.value.state === RunState.FINISHED;
          const before = c.runIds().length;
          if (c.apply(ev) && ev.seq > 0n) failures = 0;
          const k = ev.kind.case;
          session.save(c.saved(), !(c.runIds().length !== before || k === "runStarted" || k === "runFinished"));
          if (isNew) resolveStarted(c.run(runId));
        }
      } catch (e) {
        err = e;
      }
      if (signal.aborted || conv !== c) return;
      if (runId === "") {
        rejectStarted(err ?? new Error("the stream ended before its first event"));
        return;
      }
      const r = c.run(runId);
      if (r.finished !== undefined) {
        session.save(c.saved());
        if (c.mode === "thread" && !replay) void refreshThreads();
        return;
      }
      if (err !== undefined && isCode(err, Code.Unauthenticated) && !(await askToken())) {
        view.notice("Stopped following the run: agentd wants a bearer token.", "error");
        return;
      }
      const why = err !== undefined ? errorText(describe(err)) : "the stream ended before the run did";
      if (++failures > 6) {
        view.notice(`Lost the run's stream (${why}). Reload the page to attach again.`, "error");
        return;
      }
      view.notice(`The stream broke (${why}); attaching again after seq ${r.lastSeq}…`, "info");
      await sleep(Math.min(4000, 200 * 2 ** failures), signal);
      if (signal.aborted || conv !== c) return;
      stream = client.attachRun({ runId, afterSeq: r.lastSeq }, { signal });
    }
  })();
  return { started, done };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** start opens a stream with open and waits for its first event, asking for a token when agentd wants one. */
async function start(c: Conversation, open: (signal: AbortSignal) => AsyncIterable<{ event?: RunEvent }>): Promise<RunInfo> {
  const signal = streams.signal;
  starting = true;
  changed();
  try {
    for (;;) {
      try {
        return await follow(c, open(signal), signal).started;
      } catch (e) {
        if (isCode(e, Code.Unauthenticated) && (await askToken())) continue;
        throw e;
      }
    }
  } finally {
    starting = false;
    changed();
  }
}

/** send starts the next run of the conversation with text, or steers the run going. */
async function send(text: string): Promise<void> {
  const c = conv;
  if (c.live) return steer(text);
  if (starting || c.awaiting.length > 0) return;
  if (c.runIds().length === 0) c.agent = sidebar.agentName();
  c.nextInput = text;
  input.value = "";
  const newThread = c.mode === "thread" && c.threadId === "";
  try {
    await start(c, (signal) =>
      client.startRun(
        {
          start: {
            agent: c.agent,
            input: text,
            history: c.mode === "thread" ? History.THREAD : History.CLIENT,
            threadId: c.mode === "thread" ? c.threadId : "",
            messages: c.mode === "client" ? c.history : [],
          },
        },
        { signal },
      ),
    );
    if (newThread) void refreshThreads();
  } catch (e) {
    c.nextInput = undefined;
    if (conv !== c) return;
    view.notice(`Could not start the run: ${errorText(describe(e))}`, "error");
    if (input.value === "") input.value = text;
  }
}

/** steer gives the run going a message from the person, before its next step. */
async function steer(text: string): Promise<void> {
  const c = conv;
  const r = c.current;
  if (r === undefined) return;
  input.value = "";
  c.steers.push(text);
  changed();
  const unqueue = () => {
    const i = c.steers.lastIndexOf(text);
    if (i >= 0) c.steers.splice(i, 1);
    changed();
  };
  try {
    const res = await withToken(() => client.sendRunInput({ runId: r.id, clientKey: newKey(), input: { case: "steer", value: { text } } }));
    if (res.ack?.accepted !== true) {
      unqueue();
      view.notice(`agentd refused the steer: ${res.ack?.error?.reason ?? ""}: ${res.ack?.error?.message ?? ""}`, "error");
    }
  } catch (e) {
    unqueue();
    view.notice(`Could not send the steer: ${errorText(describe(e))}`, "error");
  }
}

/**
 * cancel ends the run going, or leaves the parked run's approvals pending: the run stays
 * parked (a reload rebuilds it from its journal and asks again), and the composer is the
 * person's for a new message, whose run goes on without the calls.
 */
async function cancel(): Promise<void> {
  const c = conv;
  const r = c.current;
  if (r === undefined) return;
  if (!c.live) {
    r.dismissed = true;
    for (const card of view.openApprovals()) card.closeApproval("Left pending by you: the call has not run, and the model has not been told.");
    changed();
    return;
  }
  cancelButton.disabled = true;
  try {
    const res = await withToken(() =>
      client.sendRunInput({ runId: r.id, clientKey: newKey(), input: { case: "cancel", value: { reason: "cancelled in the console" } } }),
    );
    if (res.ack?.accepted !== true) view.notice(`agentd refused the cancel: ${res.ack?.error?.message ?? ""}`, "error");
  } catch (e) {
    view.notice(`Could not cancel the run: ${errorText(describe(e))}`, "error");
  } finally {
    cancelButton.disabled = false;
  }
}

function decisionOf(approvalId: string, d: Decision): MessageInitShape<typeof ApprovalDecisionSchema> {
  return {
    approvalId,
    outcome: d.approve ? ApprovalOutcome.APPROVED : ApprovalOutcome.DENIED,
    reason: d.reason,
    editedArguments: d.editedArguments !== undefined ? fromJson(ValueSchema, d.editedArguments) : undefined,
  };
}

/**
 * decide answers an approval of run r. A run that waits live takes it by SendRunInput; a
 * parked one (AWAITING_INPUT) is resumed with it, once every approval it waits for has a
 * decision. It rejects with what to show on the approval's card.
 */
async function decide(r: RunInfo, approvalId: string, d: Decision): Promise<void> {
  const c = conv;
  if (r.finished === undefined) {
    let res: Awaited<ReturnType<typeof client.sendRunInput>> | undefined;
    try {
      res = await withToken(() => client.sendRunInput({ runId: r.id, clientKey: newKey(), input: { case: "approvalDecision", value: decisionOf(approvalId, d) } }));
    } catch (e) {
      if (describe(e).reason !== "RUN_FINISHED") throw new Error(errorText(describe(e)));
    }
    if (res?.ack?.accepted === true) return;
    if (res !== undefined && res.ack?.error?.reason !== "APPROVAL_CLOSED") {
      throw new Error(`agentd refused the decision: ${res.ack?.error?.reason ?? ""}: ${res.ack?.error?.message ?? ""}`);
    }
    // The run parked meanwhile, ending AWAITING_INPUT: resume it with the decision.
    await c.whenFinished(r);
  }
  const f = r.finished;
  if (f === undefined || f.reason !== RunEndReason.AWAITING_INPUT || f.continuation.length === 0) {
    throw new Error("The run has ended: it takes no decision any more.");
  }
  if (c.current !== r || conv !== c) throw new Error("A later run went on from here: this approval can no longer be decided.");
  r.decisions.set(approvalId, d);
  if (f.pendingApprovals.some((p) => !r.decisions.has(p.approvalId))) return; // sent with the others
  try {
    await start(c, (signal) =>
      client.startRun(
        {
          start: {
            continuation: f.continuation,
            decisions: [...r.decisions].map(([id, x]) => decisionOf(id, x)),
            history: c.mode === "thread" ? History.THREAD : History.CLIENT,
            threadId: c.mode === "thread" ? c.threadId : "",
            messages: c.mode === "client" ? c.history : [],
          },
        },
        { signal },
      ),
    );
  } catch (e) {
    r.decisions.delete(approvalId);
    throw new Error(`Could not resume the run: ${errorText(describe(e))}`);
  }
}

/**
 * withToken makes a unary call, asking for a token and calling again for as long as
 * agentd wants one and the person gives one.
 */
async function withToken<T>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (!isCode(e, Code.Unauthenticated) || !(await askToken())) throw e;
    }
  }
}

// The token dialog: one at a time, whoever asks.
const dialog = byId<HTMLDialogElement>("token-dialog");
const tokenInput = byId<HTMLInputElement>("token-input");
let asking: Promise<boolean> | undefined;

/**
 * askToken asks the person for a bearer token, because agentd refused the call without
 * one or with the one the tab has (or, with chosen, because the person asked to change
 * it); it resolves true when one was given.
 */
function askToken(chosen = false): Promise<boolean> {
  asking ??= new Promise<boolean>((resolve) => {
    tokenInput.value = token();
    byId("token-why").textContent = chosen
      ? "The bearer token this tab sends to agentd (needed when it runs with --auth-tokens-file), kept in this tab only (sessionStorage)."
      : token() !== ""
        ? "agentd refused the token this tab has. Paste another; it is kept in this tab only (sessionStorage)."
        : "agentd asks for a bearer token (it runs with --auth-tokens-file). Paste one; it is kept in this tab only (sessionStorage).";
    const form = byId<HTMLFormElement>("token-form");
    const done = (ok: boolean) => {
      form.removeEventListener("submit", onSubmit);
      dialog.removeEventListener("cancel", onCancel);
      dialog.close();
      asking = undefined;
      showTokenState();
      resolve(ok);
    };
    const onSubmit = (ev: SubmitEvent) => {
      ev.preventDefault();
      const which = (ev.submitter as HTMLButtonElement | null)?.value ?? "save";
      if (which === "save") setToken(tokenInput.value);
      if (which === "forget") setToken("");
      done(which === "save" && token() !== "");
    };
    const onCancel = () => done(false);
    form.addEventListener("submit", onSubmit);
    dialog.addEventListener("cancel", onCancel);
    dialog.showModal();
    tokenInput.focus();
  });
  return asking;
}

function showTokenState(): void {
  byId("token-state").textContent = token() !== "" ? "token set for this tab" : "";
  byId("token-button").textContent = token() !== "" ? "Change token" : "Set token";
}

async function refreshThreads(): Promise<void> {
  try {
    const res = await withToken(() => client.listThreads({ pageSize: 100 }));
    sidebar.showThreads(res.threads, conv.mode === "thread" ? conv.threadId : "", { open: (id) => void openThread(id), remove: removeThread });
  } catch (e) {
    sidebar.threadsError(`Could not list threads: ${errorText(describe(e))}`);
  }
}

async function loadThread(id: string): Promise<{ thread: Thread | undefined; messages: Message[] }> {
  const messages: Message[] = [];
  let thread: Thread | undefined;
  let pageToken = "";
  for (let page = 0; page < 100; page++) {
    const res = await withToken(() => client.getThread({ threadId: id, pageSize: 1000, pageToken }));
    thread ??= res.thread;
    messages.push(...res.messages);
    pageToken = res.nextPageToken;
    if (pageToken === "") break;
  }
  return { thread, messages };
}

/** openThread shows a thread's history, following its active run if it has one. */
async function openThread(id: string): Promise<void> {
  const c = show({ mode: "thread", agent: "", threadId: id, historyCount: -1, runs: [], seq: 0 });
  session.save(c.saved());
  await rebuild(c, -1, []);
  void refreshThreads();
}

/**
 * rebuild shows c from the server: the first historyCount messages of its thread (-1:
 * all, and its active run), then each of its runs from its journal, in order, the last
 * one followed live.
 */
async function rebuild(c: Conversation, historyCount: number, runs: string[]): Promise<void> {
  starting = true;
  changed();
  try {
    await replay(c, historyCount, runs);
  } finally {
    starting = false;
    changed();
  }
}

async function replay(c: Conversation, historyCount: number, runs: string[]): Promise<void> {
  if (c.mode === "thread" && c.threadId !== "" && historyCount !== 0) {
    try {
      const { thread, messages } = await loadThread(c.threadId);
      if (conv !== c) return;
      const shown = historyCount < 0 ? messages : messages.slice(0, historyCount);
      c.historyCount = shown.length;
      if (thread !== undefined) {
        c.agent ||= thread.agent;
        sidebar.pickAgent(thread.agent);
        view.notice(`Thread ${thread.threadId} · agent ${thread.agent} · ${count(thread.messageCount, "message")}`, "run");
      }
      c.showHistory(shown);
      if (historyCount < 0 && thread !== undefined && thread.activeRunId !== "") runs = [thread.activeRunId];
    } catch (e) {
      view.notice(`Could not load the thread: ${errorText(describe(e))}`, "error");
    }
  }
  const signal = streams.signal;
  for (const [i, id] of runs.entries()) {
    if (conv !== c) return;
    const f = follow(c, client.attachRun({ runId: id, afterSeq: 0n }, { signal }), signal);
    try {
      await f.started;
    } catch (e) {
      if (isCode(e, Code.Unauthenticated) && (await askToken())) return replay(c, 0, runs.slice(i));
      view.notice(`Could not attach to run ${id}: ${errorText(describe(e))}`, "error");
      continue;
    }
    if (i < runs.length - 1) await f.done;
  }
  changed();
}

async function removeThread(id: string): Promise<void> {
  try {
    await withToken(() => client.deleteThread({ threadId: id }));
    if (conv.mode === "thread" && conv.threadId === id) {
      session.clear();
      show({ mode: "thread", agent: sidebar.agentName(), threadId: "", historyCount: 0, runs: [], seq: 0 });
    }
  } catch (e) {
    view.notice(`Could not delete ${id}: ${errorText(describe(e))}`, "error");
  }
  await refreshThreads();
}

function fresh(mode: "thread" | "client"): void {
  session.clear();
  show({ mode, agent: sidebar.agentName(), threadId: "", historyCount: 0, runs: [], seq: 0 });
  void refreshThreads();
  input.focus();
}

async function main(): Promise<void> {
  byId("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (text === "") return;
    view.follow();
    void send(text);
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      byId<HTMLFormElement>("composer").requestSubmit();
    }
  });
  cancelButton.addEventListener("click", () => void cancel());
  // On a narrow window the message box is docked over the page as it scrolls: what is
  // scrolled into view stops above it (console.css).
  const dock = byId("dock");
  new ResizeObserver(() => document.documentElement.style.setProperty("--dock-height", `${dock.offsetHeight}px`)).observe(dock);
  byId("new-thread").addEventListener("click", () => fresh("thread"));
  byId("new-run").addEventListener("click", () => fresh("client"));
  byId("refresh-threads").addEventListener("click", () => void refreshThreads());
  byId("token-button").addEventListener("click", () => {
    void askToken(true).then((ok) => {
      if (ok) void loadAgents().then(refreshThreads);
    });
  });
  sidebar.onAgentPicked((name) => {
    if (conv.runIds().length > 0 || conv.historyCount !== 0) fresh(conv.mode);
    else show({ ...conv.saved(), agent: name });
  });
  addEventListener("pagehide", () => session.flush());
  showTokenState();

  const saved = session.restore() ?? { mode: "thread", agent: "", threadId: "", historyCount: 0, runs: [], seq: 0 };
  const c = show(saved);
  await loadAgents(saved.agent);
  if (saved.runs.length > 0 || saved.historyCount !== 0) await rebuild(c, saved.historyCount, saved.runs);
  await refreshThreads();
}

async function loadAgents(want = conv.agent): Promise<void> {
  try {
    const res = await withToken(() => client.listAgents({}));
    sidebar.showAgents(res.agents, want);
    if (conv.runIds().length === 0 && conv.historyCount === 0) show({ ...conv.saved(), agent: sidebar.agentName() });
  } catch (e) {
    view.notice(`Could not list the agents: ${errorText(describe(e))}`, "error");
  }
}

void main();
