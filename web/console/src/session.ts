// Where the tab's conversation is kept across a reload: in sessionStorage, the whole of
// it (its runs, in order), and in the URL, the run being followed and the last seq seen
// of it (#run=run_…&seq=…, with &thread=thread_… for a thread the server keeps), so that
// a link or another tab can attach to the same run.

/** Mode says who keeps a conversation's history. */
export type Mode =
  /** The page keeps it and sends it with each run (HISTORY_CLIENT). */
  | "client"
  /** agentd keeps it as a thread (HISTORY_THREAD). */
  | "thread";

/** Saved is a conversation as the tab keeps it. */
export interface Saved {
  mode: Mode;
  agent: string;
  threadId: string;
  /**
   * How many of the thread's messages came before runs, when the thread was opened from
   * its history: they are shown from GetThread, the runs from their journals. -1 shows
   * every message of the thread (a #thread= link with no run).
   */
  historyCount: number;
  /** The conversation's runs, oldest first: a resumed run follows the one it resumes. */
  runs: string[];
  /** The last seq seen of the last run. */
  seq: number;
}

const key = "agentd-console.conversation";

/**
 * restore returns the conversation to show after a load: the tab's own if the URL names
 * its last run (or names nothing), else the one the URL names.
 */
export function restore(): Saved | undefined {
  const h = new URLSearchParams(location.hash.slice(1));
  const run = h.get("run") ?? "";
  const thread = h.get("thread") ?? "";
  let saved: Saved | undefined;
  try {
    saved = JSON.parse(sessionStorage.getItem(key) ?? "null") ?? undefined;
  } catch {
    saved = undefined;
  }
  if (saved !== undefined && run === (saved.runs.at(-1) ?? "") && thread === saved.threadId) {
    return saved;
  }
  if (run === "" && thread === "") return undefined;
  return {
    mode: thread !== "" ? "thread" : "client",
    agent: "",
    threadId: thread,
    historyCount: run === "" ? -1 : 0,
    runs: run === "" ? [] : [run],
    seq: Number(h.get("seq") ?? 0) || 0,
  };
}

let pending: Saved | undefined;
let timer: ReturnType<typeof setTimeout> | undefined;

/**
 * save keeps s. A save with soon set is coalesced with others for a moment: events come
 * faster than a browser lets a page rewrite its URL.
 */
export function save(s: Saved, soon = false): void {
  pending = { ...s, runs: [...s.runs] };
  if (soon) {
    timer ??= setTimeout(flush, 250);
    return;
  }
  flush();
}

/** flush writes what save has pending. */
export function flush(): void {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  const s = pending;
  pending = undefined;
  if (s === undefined) return;
  sessionStorage.setItem(key, JSON.stringify(s));
  const h = new URLSearchParams();
  if (s.mode === "thread" && s.threadId !== "") h.set("thread", s.threadId);
  const run = s.runs.at(-1);
  if (run !== undefined) {
    h.set("run", run);
    h.set("seq", String(s.seq));
  }
  const hash = h.size > 0 ? "#" + h.toString() : "";
  if (hash !== location.hash) history.replaceState(null, "", location.pathname + location.search + hash);
}

/** clear forgets the tab's conversation. */
export function clear(): void {
  pending = undefined;
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  sessionStorage.removeItem(key);
  history.replaceState(null, "", location.pathname + location.search);
}
