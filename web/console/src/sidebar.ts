// The sidebar: the agent picker and the list of the caller's threads.

import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Agent, Thread } from "../../../gen/ts/agentd/v1/agent_service_pb.js";
import { button, byId, count, h } from "./dom.js";

const picker = byId<HTMLSelectElement>("agent");
const info = byId("agent-info");
const list = byId<HTMLUListElement>("threads");

let agents: Agent[] = [];

/** showAgents fills the picker, choosing want if it is offered, else the default agent. */
export function showAgents(as: Agent[], want: string): void {
  agents = as;
  picker.replaceChildren(...as.map((a) => h("option", { text: a.name + (a.isDefault ? " (default)" : ""), attrs: { value: a.name } })));
  picker.disabled = as.length === 0;
  const pick = as.find((a) => a.name === want) ?? as.find((a) => a.isDefault) ?? as[0];
  if (pick !== undefined) picker.value = pick.name;
  showInfo();
}

/** agentName returns the agent picked, or "" before the agents are listed. */
export function agentName(): string {
  return agents.length > 0 ? picker.value : "";
}

/** agent returns the agent of name, if the server offers it. */
export function agent(name: string): Agent | undefined {
  return agents.find((a) => a.name === name);
}

/** pickAgent picks the agent of name, if the server offers it. */
export function pickAgent(name: string): void {
  if (agents.some((a) => a.name === name) && picker.value !== name) {
    picker.value = name;
    showInfo();
  }
}

/** onAgentPicked calls f when the person picks another agent. */
export function onAgentPicked(f: (name: string) => void): void {
  picker.addEventListener("change", () => {
    showInfo();
    f(picker.value);
  });
}

function showInfo(): void {
  const a = agent(picker.value);
  if (a === undefined) {
    info.replaceChildren();
    return;
  }
  info.replaceChildren(a.description !== "" ? h("span", { class: "agent-desc", text: a.description }) : "", h("span", { class: "agent-model", text: a.model }));
}

/** toolsOf lists an agent's tools for the intro: name, and whether calls need approval. */
export function toolsOf(a: Agent): HTMLElement {
  return h(
    "ul",
    { class: "intro-tools" },
    ...a.tools.map((t) =>
      h(
        "li",
        {},
        h("code", { text: t.spec?.name ?? "" }),
        t.requiresApproval ? h("span", { class: "badge badge-waiting", text: "asks for approval" }) : "",
        !t.enabled ? h("span", { class: "badge badge-cancelled", text: "disabled" }) : "",
        h("span", { class: "intro-tool-desc", text: firstSentence(t.spec?.description ?? "") }),
      ),
    ),
  );
}

function firstSentence(s: string): string {
  const i = s.search(/\.\s/);
  return i < 0 ? s : s.slice(0, i + 1);
}

/** ThreadActions are what a person may do with a listed thread. */
export interface ThreadActions {
  open(id: string): void;
  remove(id: string): Promise<void>;
}

/** showThreads lists threads, most recent first, marking the open one. */
export function showThreads(ts: Thread[], open: string, act: ThreadActions): void {
  if (ts.length === 0) {
    list.replaceChildren(h("li", { class: "threads-empty", text: "No threads yet. A run in a new thread starts one." }));
    return;
  }
  list.replaceChildren(
    ...ts.map((t) => {
      const when = t.updatedAt !== undefined ? timestampDate(t.updatedAt) : undefined;
      const openIt = button("", () => act.open(t.threadId), { class: "thread-open", title: "Open " + t.threadId });
      openIt.append(
        h("span", { class: "thread-id", text: t.threadId }),
        h("span", {
          class: "thread-meta",
          text: [t.agent, count(t.messageCount, "message"), when !== undefined ? when.toLocaleString() : ""].filter((x) => x !== "").join(" · "),
        }),
        t.activeRunId !== "" ? h("span", { class: "badge badge-running", text: "running" }) : "",
      );
      const del = button("Delete", () => {
        if (del.dataset["armed"] !== "yes") {
          del.dataset["armed"] = "yes";
          del.textContent = "Delete?";
          setTimeout(() => {
            del.dataset["armed"] = "";
            del.textContent = "Delete";
          }, 3000);
          return;
        }
        del.disabled = true;
        void act.remove(t.threadId).finally(() => (del.disabled = false));
      }, { class: "btn btn-plain btn-small thread-delete", title: "Delete " + t.threadId + " (click twice)" });
      return h("li", { class: "thread" + (t.threadId === open ? " thread-active" : ""), attrs: { "data-thread-id": t.threadId } }, openIt, del);
    }),
  );
}

/** threadsError shows why the threads could not be listed. */
export function threadsError(text: string): void {
  list.replaceChildren(h("li", { class: "threads-error", text }));
}
