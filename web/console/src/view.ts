// The transcript: user messages, the assistant's text and reasoning as they stream, tool
// calls as cards (arguments as they are written, approval, result), and notices. It knows
// nothing of RPCs: run.ts tells it what happened, main.ts what to do when a person acts.

import type { JsonValue } from "@bufbuild/protobuf";
import { button, h, prettyJSON } from "./dom.js";

/** Decision is what a person decided on an approval. */
export interface Decision {
  approve: boolean;
  /** Why; with a denial it is told to the model. */
  reason: string;
  /** With approve, the arguments to run the call with instead of the model's. */
  editedArguments?: JsonValue;
}

/** Decide sends a decision; it rejects with a message to show when it could not. */
export type Decide = (d: Decision) => Promise<void>;

/**
 * Transcript is the conversation as the page shows it. While the person is at its end
 * (following), whatever is added or grows there (text as it streams, a tool card's
 * arguments, an approval's buttons) is kept in view. Scrolling up stops that, so what
 * they read stays where it is; scrolling back to the end, or sending, starts it again.
 * It scrolls in its own box on a wide window and with the page on a narrow one
 * (console.css): whichever of the two overflows.
 */
export class Transcript {
  private readonly users = new Map<string, HTMLElement>();
  private readonly blocks = new Map<string, { root: HTMLElement; text: Text }>();
  private readonly tools = new Map<string, ToolCard>();
  private following = true;
  /** Where keepUp last scrolled to, until the scroll event that reports it. */
  private kept = NaN;

  constructor(private readonly root: HTMLElement) {
    const moved = () => {
      // The event of keepUp's own scroll says nothing of the person, and may come after
      // they turned the wheel.
      const ours = Math.abs(this.scroller().scrollTop - this.kept) < 1;
      this.kept = NaN;
      if (!ours) this.following = this.atEnd();
    };
    root.addEventListener("scroll", moved, { passive: true });
    addEventListener("scroll", moved, { passive: true });
    // A wheel turned up, or a finger dragging, stops following at once: read at the next
    // scroll event, after a delta has pulled the view back down, it would not. A finger
    // lifted at the end starts it again.
    const scrolling = (ev: Event, up: boolean) => {
      const s = this.scroller();
      if (up && s.scrollTop > 0 && ev.target instanceof Node && s.contains(ev.target)) this.following = false;
    };
    addEventListener("wheel", (ev) => scrolling(ev, ev.deltaY < 0), { passive: true });
    addEventListener("touchmove", (ev) => scrolling(ev, true), { passive: true });
    addEventListener("touchend", moved, { passive: true });
    addEventListener("touchcancel", moved, { passive: true });
    // Content that grows in place, and a box that shrinks under a taller message box.
    new MutationObserver(() => this.keepUp()).observe(root, { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ["hidden"] });
    new ResizeObserver(() => this.keepUp()).observe(root);
  }

  /** clear empties the transcript, showing intro instead when given. */
  clear(intro?: Node): void {
    this.users.clear();
    this.blocks.clear();
    this.tools.clear();
    this.root.replaceChildren();
    if (intro !== undefined) this.root.append(h("div", { class: "intro" }, intro));
    this.follow();
  }

  /** notice adds a line about the run (kind "run"), or an error. */
  notice(text: string, kind: "run" | "info" | "error" = "info"): HTMLElement {
    return this.add(h("div", { class: "notice notice-" + kind, text, attrs: kind === "error" ? { role: "alert" } : {} }));
  }

  /** result shows a run's typed result (RunFinished.output), pretty-printed. */
  result(json: string): void {
    this.add(h("div", { class: "msg msg-result" }, h("div", { class: "result-label", text: "result" }), h("pre", { class: "result-json", text: prettyJSON(json) })));
  }

  /**
   * user shows the user message of id, or fills in its text. A message whose text is not
   * known yet (a steer seen in a journal, whose text comes with its step's messages)
   * shows an ellipsis until it is.
   */
  user(id: string, text: string | undefined): void {
    let b = this.users.get(id);
    if (b === undefined) {
      b = h("div", { class: "msg msg-user", attrs: { "data-message-id": id } });
      this.users.set(id, b);
      this.add(b);
    }
    if (text !== undefined) b.textContent = text;
    else if (b.textContent === "") b.textContent = "…";
  }

  /** fillUser sets the text of the user message of id, if it is shown. */
  fillUser(id: string, text: string): void {
    const b = this.users.get(id);
    if (b !== undefined) b.textContent = text;
  }

  /** block starts a block of assistant text or reasoning. */
  block(id: string, kind: "text" | "reasoning"): void {
    if (this.blocks.has(id)) return;
    const text = document.createTextNode("");
    let root: HTMLElement;
    if (kind === "reasoning") {
      const body = h("div", { class: "reasoning-text" }, text);
      root = h("details", { class: "reasoning streaming", attrs: { open: "" } }, h("summary", { text: "Reasoning" }), body);
    } else {
      root = h("div", { class: "msg msg-assistant streaming" }, text);
    }
    root.dataset["blockId"] = id;
    this.blocks.set(id, { root, text });
    this.add(root);
  }

  /** append adds a delta to a block. */
  append(id: string, delta: string): void {
    this.blocks.get(id)?.text.appendData(delta);
  }

  /** finish ends a block's streaming; a reasoning block folds away. */
  finish(id: string, partial: boolean): void {
    const b = this.blocks.get(id);
    if (b === undefined) return;
    b.root.classList.remove("streaming");
    if (partial) b.root.classList.add("partial");
    if (b.root instanceof HTMLDetailsElement) b.root.open = false;
  }

  /** hasBlock reports whether the block of id is shown. */
  hasBlock(id: string): boolean {
    return this.blocks.has(id);
  }

  /** text shows a finished block of text or reasoning at once (history). */
  text(id: string, kind: "text" | "reasoning", text: string): void {
    if (this.blocks.has(id) && id !== "") return;
    const key = id !== "" ? id : "block-" + (this.blocks.size + 1);
    this.block(key, kind);
    this.append(key, text);
    this.finish(key, false);
  }

  /**
   * startTool returns the card of a call the model began: a new one at the end of the
   * transcript, unless the call has one that has not ended.
   */
  startTool(id: string, name: string): ToolCard {
    const c = this.tools.get(id);
    if (c !== undefined && !c.ended) {
      c.setName(name);
      return c;
    }
    return this.newTool(id, name);
  }

  /** tool returns the card of a call, made at the end of the transcript if it has none. */
  tool(id: string, name: string): ToolCard {
    const c = this.tools.get(id);
    if (c === undefined) return this.newTool(id, name);
    c.setName(name);
    return c;
  }

  private newTool(id: string, name: string): ToolCard {
    const c = new ToolCard(id, name);
    this.tools.set(id, c);
    this.add(c.root);
    return c;
  }

  /** existingTool returns the card of a call, if it has one. */
  existingTool(id: string): ToolCard | undefined {
    return this.tools.get(id);
  }

  /** openApprovals returns the cards whose approval waits for a decision. */
  openApprovals(): ToolCard[] {
    return [...this.tools.values()].filter((c) => c.approvalOpen);
  }

  /** showApproval brings the first approval that waits for a decision into view. */
  showApproval(): void {
    const c = this.openApprovals()[0];
    if (c === undefined) return;
    c.approval.scrollIntoView({ block: "nearest" });
    this.following = this.atEnd();
  }

  /** follow shows the end of the transcript, and keeps it in view from then on. */
  follow(): void {
    this.following = true;
    this.keepUp();
  }

  private add(e: HTMLElement): HTMLElement {
    this.root.querySelector(":scope > .intro")?.remove();
    this.root.append(e);
    return e;
  }

  private keepUp(): void {
    // The intro of an empty conversation is read from its top.
    if (!this.following || this.root.querySelector(":scope > .intro") !== null) return;
    const s = this.scroller();
    const top = s.scrollTop;
    if (s === this.root) {
      s.scrollTop = s.scrollHeight;
    } else {
      // The page scrolls: bring the transcript's end down to the message box, no
      // further, so that a short conversation leaves what is above it in view.
      const below = this.endBelow();
      if (below > 0) s.scrollTop += below;
    }
    if (Math.abs(s.scrollTop - top) >= 1) this.kept = s.scrollTop;
  }

  private atEnd(): boolean {
    const s = this.scroller();
    if (s === this.root) return s.scrollHeight - s.scrollTop - s.clientHeight < 16;
    return this.endBelow() < 16;
  }

  /**
   * endBelow returns how far the transcript's end lies below what the page shows of it:
   * the viewport less its scroll-padding-bottom, which console.css makes the height of
   * the message box docked at its foot.
   */
  private endBelow(): number {
    const last = this.root.lastElementChild;
    if (last === null) return 0;
    const end = last.getBoundingClientRect().bottom + parseFloat(getComputedStyle(this.root).paddingBottom);
    const hidden = parseFloat(getComputedStyle(document.documentElement).scrollPaddingBottom) || 0;
    return end - (document.documentElement.clientHeight - hidden);
  }

  /** scroller returns the box that scrolls the transcript: its own, or the page's. */
  private scroller(): Element {
    const o = getComputedStyle(this.root).overflowY;
    return o === "auto" || o === "scroll" ? this.root : (document.scrollingElement ?? document.documentElement);
  }
}

/** Status is a tool call's state as its card's badge shows it. */
export type Status = "writing" | "waiting" | "approved" | "running" | "done" | "error" | "denied" | "cancelled" | "called";

const statusText: Record<Status, string> = {
  writing: "writing arguments…",
  waiting: "awaiting approval",
  approved: "approved",
  running: "running…",
  done: "done",
  error: "error",
  denied: "denied",
  cancelled: "cancelled",
  called: "called",
};

/** ToolCard shows one tool call. */
export class ToolCard {
  readonly root: HTMLElement;
  name = "";
  /** ended is true once the call has a result or will not run. */
  ended = false;
  /** approvalOpen is true while the call's approval waits for a decision. */
  approvalOpen = false;
  approvalId = "";
  private argsRaw = "";
  private readonly nameEl = h("span", { class: "tool-name" });
  private readonly badge = h("span", { class: "badge" });
  private readonly args = h("pre", { class: "tool-args" });
  /** approval is the part of the card that asks for a decision and takes it. */
  readonly approval = h("div", { class: "approval", attrs: { hidden: "" } });
  private readonly result = h("div", { class: "tool-result", attrs: { hidden: "" } });

  constructor(readonly id: string, name: string) {
    this.root = h(
      "section",
      { class: "tool", attrs: { "data-call-id": id } },
      h("header", { class: "tool-head" }, h("span", { class: "tool-icon", text: "⚙", attrs: { "aria-hidden": "true" } }), this.nameEl, this.badge),
      h("div", { class: "tool-label", text: "Arguments" }),
      this.args,
      this.approval,
      this.result,
    );
    this.setName(name);
    this.setStatus("writing");
  }

  setName(name: string): void {
    if (name === "" || name === this.name) return;
    this.name = name;
    this.nameEl.textContent = name;
  }

  setStatus(s: Status, detail = ""): void {
    this.badge.className = "badge badge-" + s;
    this.badge.textContent = statusText[s] + (detail !== "" ? " · " + detail : "");
    this.root.dataset["status"] = s;
  }

  /** appendArgs adds a fragment of the arguments as the model writes them. */
  appendArgs(delta: string): void {
    this.argsRaw += delta;
    this.args.textContent = this.argsRaw;
  }

  /** setArgs shows the call's complete arguments, pretty-printed. */
  setArgs(json: string): void {
    this.argsRaw = json;
    this.args.textContent = prettyJSON(json);
    if (this.root.dataset["status"] === "writing") this.setStatus("called");
  }

  /**
   * ask shows the approval request with its actions, which call decide. A request the
   * card shows already (a run that resumes it reports it again) is left as it is.
   */
  ask(req: { approvalId: string; reason: string; editable: boolean; argumentsJson: string; toolName: string }, decide: Decide): void {
    if (this.approvalId === req.approvalId) return;
    this.approvalId = req.approvalId;
    this.approvalOpen = true;
    this.ended = false;
    if (this.argsRaw === "") this.setArgs(req.argumentsJson);
    this.setStatus("waiting");
    this.approval.dataset["state"] = "open";

    const why = h("p", { class: "approval-why" }, h("strong", { text: "Needs your approval" }), req.reason !== "" ? " — " + req.reason : "");
    const error = h("p", { class: "approval-error", attrs: { role: "alert", hidden: "" } });
    const state = h("p", { class: "approval-state", attrs: { hidden: "" } });
    const reason = h("input", { class: "deny-reason", attrs: { type: "text", placeholder: "Reason (optional; the model is told)", "aria-label": "Reason for denying" } });
    const edited = h("textarea", { class: "edit-args", attrs: { rows: "6", spellcheck: "false", "aria-label": "Arguments to approve" } });
    const actions = h("div", { class: "approval-actions" });
    const denyForm = h("div", { class: "approval-form", attrs: { hidden: "" } });
    const editForm = h("div", { class: "approval-form", attrs: { hidden: "" } });
    const show = (which: HTMLElement) => {
      for (const e of [actions, denyForm, editForm]) e.hidden = e !== which;
      error.hidden = true;
    };
    const all: HTMLButtonElement[] = [];
    const send = async (d: Decision) => {
      for (const b of all) b.disabled = true;
      error.hidden = true;
      state.hidden = false;
      state.textContent = d.approve ? "Sending your approval…" : "Sending your denial…";
      this.approval.dataset["state"] = "sending";
      try {
        await decide(d);
      } catch (e) {
        for (const b of all) b.disabled = false;
        state.hidden = true;
        error.hidden = false;
        error.textContent = e instanceof Error ? e.message : String(e);
        if (this.approvalOpen) this.approval.dataset["state"] = "open";
      }
    };
    const b = (text: string, action: string, cls: string, onClick: () => void) => {
      const x = button(text, onClick, { class: cls, attrs: { "data-action": action } });
      all.push(x);
      return x;
    };
    const actionButtons = [
      b("Approve", "approve", "btn btn-approve", () => void send({ approve: true, reason: "" })),
      b("Deny…", "deny", "btn btn-deny", () => {
        show(denyForm);
        reason.focus();
      }),
      req.editable
        ? b("Edit arguments…", "edit", "btn btn-edit", () => {
            edited.value = prettyJSON(this.argsRaw !== "" ? this.argsRaw : req.argumentsJson);
            show(editForm);
            edited.focus();
          })
        : null,
    ];
    actions.append(...actionButtons.filter((x) => x !== null));
    denyForm.append(
      reason,
      h(
        "div",
        { class: "approval-actions" },
        b("Deny", "deny-confirm", "btn btn-deny", () => void send({ approve: false, reason: reason.value.trim() })),
        b("Back", "back", "btn btn-plain", () => show(actions)),
      ),
    );
    editForm.append(
      edited,
      h(
        "div",
        { class: "approval-actions" },
        b("Approve with these arguments", "approve-edited", "btn btn-approve", () => {
          let v: JsonValue;
          try {
            v = JSON.parse(edited.value) as JsonValue;
          } catch (e) {
            error.hidden = false;
            error.textContent = "The arguments are not JSON: " + (e instanceof Error ? e.message : String(e));
            return;
          }
          void send({ approve: true, reason: "", editedArguments: v });
        }),
        b("Back", "back", "btn btn-plain", () => show(actions)),
      ),
    );
    this.approval.replaceChildren(why, actions, denyForm, editForm, state, error);
    this.approval.hidden = false;
  }

  /** resolve ends the approval: approved or not, and by whom. */
  resolve(approved: boolean, text: string, argumentsJson: string): void {
    this.approvalOpen = false;
    this.approval.dataset["state"] = approved ? "approved" : "denied";
    this.approval.hidden = false;
    this.approval.replaceChildren(h("p", { class: "approval-outcome " + (approved ? "ok" : "no"), text }));
    if (argumentsJson !== "" && argumentsJson !== this.argsRaw) this.setArgs(argumentsJson);
    this.setStatus(approved ? "approved" : "denied");
    if (!approved) this.ended = true;
  }

  /** closeApproval ends an approval that will take no decision here, saying why. */
  closeApproval(text: string): void {
    if (!this.approvalOpen) return;
    this.approvalOpen = false;
    this.approval.dataset["state"] = "closed";
    this.approval.replaceChildren(h("p", { class: "approval-outcome", text }));
  }

  /**
   * setResult shows the call's result: JSON pretty-printed, errors in red. A denied
   * call's result is what the model was told of the denial.
   */
  setResult(output: string, isError: boolean, duration: string): void {
    this.ended = true;
    const denied = this.root.dataset["status"] === "denied";
    this.result.hidden = false;
    this.result.replaceChildren(
      h("div", { class: "tool-label", text: denied ? "The model was told" : isError ? "Error" : "Result" }),
      h("pre", { class: isError ? "tool-output is-error" : "tool-output", text: prettyJSON(output) }),
    );
    if (!denied) this.setStatus(isError ? "error" : "done", duration);
  }

  /** cancel says the call will not run. */
  cancel(reason: string): void {
    this.ended = true;
    this.closeApproval("Not decided: " + reason);
    this.setStatus("cancelled", reason);
  }
}
