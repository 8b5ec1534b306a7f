// Browser tests of agentd's web console: Chromium, driven by playwright-core, against a
// real agentd serving the demo agent (web/console/run-browser-tests.sh starts it and sets
// AGENTD_HTTP_URL, and AGENTD_TOKEN when agentd wants a bearer token). Every test asserts
// on what the page shows, and saves a screenshot of each state it goes through in
// AGENTD_SCREENSHOTS (default: agentd-console-screenshots in the temporary folder).
//
//   AGENTD_HTTP_URL=http://127.0.0.1:8089 node --test web/console/test/

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const base = process.env.AGENTD_HTTP_URL;
if (!base) throw new Error("set AGENTD_HTTP_URL to the address of agentd's HTTP listener (agentd --http-listen)");
/** The bearer token agentd wants, if it runs with --auth-tokens-file. */
const bearer = process.env.AGENTD_TOKEN ?? "";
const shots = process.env.AGENTD_SCREENSHOTS || join(tmpdir(), "agentd-console-screenshots");
mkdirSync(shots, { recursive: true });

/** How long the page may take to show what a step waits for. */
const wait = 15_000;

let browser;
before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
});
after(async () => {
  await browser?.close();
});

/** The window sizes the page is laid out for: a laptop's, and a phone's held upright. */
const wide = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };

/**
 * open returns a page of a fresh browser context (its own sessionStorage) on the console,
 * in a window of viewport's size, given agentd's token as a person would have pasted it,
 * unless withToken is false.
 */
async function open(t, { withToken = true, viewport = { width: 1280, height: 860 } } = {}) {
  const context = await browser.newContext({ viewport });
  t.after(() => context.close());
  const page = await context.newPage();
  page.setDefaultTimeout(wait);
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy/i.test(m.text())) errors.push(m.text());
  });
  t.after(() => assert.deepEqual(errors, [], "the page threw, or broke its Content-Security-Policy"));
  if (withToken && bearer !== "") {
    await page.addInitScript((tok) => sessionStorage.setItem("agentd-console.token", tok), bearer);
  }
  await page.goto(base + "/");
  if (withToken) await page.locator("#agent:not([disabled])").waitFor();
  return page;
}

async function send(page, text) {
  await page.locator("#input:not([disabled])").fill(text);
  await page.locator("#input").press("Enter");
}

async function shot(page, name) {
  await page.screenshot({ path: join(shots, name + ".png") });
}

/** state returns the run state the status line shows. */
function state(page) {
  return page.locator('#status [data-field="state"]').innerText();
}

async function finished(page, want = "completed") {
  await page.locator(`#status[data-state="${want}"]`).waitFor();
}

/** card returns the tool card of the last call of tool name. */
function card(page, name) {
  return page.locator(".tool").filter({ has: page.locator(".tool-name", { hasText: name }) }).last();
}

/**
 * hidden returns why a person could not see and click the element of locator where it is
 * now, without scrolling, or "" when they can: it must lie inside the viewport, and be
 * what the page shows (document.elementFromPoint) at its centre and just inside the middle
 * of each of its edges, not something laid over it or a scrolling box that clips it.
 */
function hidden(locator) {
  return locator.evaluate((e) => {
    const r = e.getBoundingClientRect();
    const where = `${Math.round(r.left)},${Math.round(r.top)} to ${Math.round(r.right)},${Math.round(r.bottom)}`;
    if (r.width === 0 || r.height === 0) return "it has no size";
    if (r.left < 0 || r.top < 0 || r.right > innerWidth || r.bottom > innerHeight) {
      return `it lies at ${where}, outside the ${innerWidth}×${innerHeight} viewport`;
    }
    const x = (r.left + r.right) / 2;
    const y = (r.top + r.bottom) / 2;
    for (const [px, py] of [[x, y], [x, r.top + 3], [x, r.bottom - 3], [r.left + 3, y], [r.right - 3, y]]) {
      const at = document.elementFromPoint(px, py);
      if (at !== null && (at === e || e.contains(at))) continue;
      const name = at === null ? "nothing" : at.tagName.toLowerCase() + (at.id !== "" ? "#" + at.id : "") + [...at.classList].map((c) => "." + c).join("");
      return `it lies at ${where}, and at ${Math.round(px)},${Math.round(py)} the page shows ${name} instead`;
    }
    return "";
  });
}

/** assertShown fails unless a person can see and click each of locators where it is now. */
async function assertShown(what, ...locators) {
  for (const l of locators) {
    const why = await hidden(l);
    assert.equal(why, "", `${what}: ${await l.innerText()} is not in view: ${why}`);
  }
}

/**
 * overflow returns how much taller the transcript is than the room the window has for it:
 * its own box, or the window above the message box when the page scrolls instead.
 */
function overflow(page) {
  return page.evaluate(() => {
    const t = document.getElementById("transcript");
    return t.scrollHeight - Math.min(t.clientHeight, innerHeight - document.getElementById("composer").offsetHeight);
  });
}

/**
 * talk sends each of messages in turn, the next once the run of the one before has
 * completed, giving the conversation a history.
 */
async function talk(page, ...messages) {
  const completed = page.locator(".notice-run", { hasText: /^✓ completed/ });
  for (const m of messages) {
    const n = await completed.count();
    await send(page, m);
    await completed.nth(n).waitFor();
  }
}

/** userMessages returns the user messages of the transcript, in order. */
function userMessages(page) {
  return page.locator(".msg-user").allInnerTexts();
}

test("a call approved in the page runs, and the agent answers from its result", async (t) => {
  const page = await open(t);
  await send(page, "save a note: buy milk");
  const c = card(page, "save_note");
  await page.locator(".tool[data-status='waiting'] [data-action='approve']").waitFor();
  assert.match(await c.locator(".tool-args").innerText(), /"title": "Buy milk"/);
  assert.equal(await state(page), "waiting for your decision");
  assert.match(page.url(), /#thread=thread_[a-z0-9]+&run=run_[a-z0-9]+&seq=\d+/);
  await shot(page, "approval-pending");

  await c.locator("[data-action='approve']").click();
  await page.getByText('Saved your note "Buy milk"').waitFor();
  await finished(page);
  assert.equal(await c.getAttribute("data-status"), "done");
  assert.match(await c.locator(".approval-outcome").innerText(), /^Approved by you$/);
  assert.match(await c.locator(".tool-output").innerText(), /"saved": true/);
  assert.deepEqual(await userMessages(page), ["save a note: buy milk"]);
  // The thread is listed, marked as the one open.
  await page.locator(".thread-active .thread-meta", { hasText: "4 messages" }).waitFor();
  await shot(page, "approved-result");
});

test("arguments edited in the approval are the ones the call runs with", async (t) => {
  const page = await open(t);
  await send(page, "save a note: buy bread");
  const c = card(page, "save_note");
  await c.locator("[data-action='edit']").click();
  const args = c.locator("textarea.edit-args");
  const asked = JSON.parse(await args.inputValue());
  assert.deepEqual(asked, { title: "Buy bread", text: "buy bread" });
  await args.fill(JSON.stringify({ title: "Buy sourdough bread", text: "buy bread, sourdough" }, null, 2));
  await shot(page, "approval-editing");

  await c.locator("[data-action='approve-edited']").click();
  await page.getByText('Saved your note "Buy sourdough bread"').waitFor();
  await finished(page);
  assert.equal(await c.locator(".approval-outcome").innerText(), "Approved by you with edited arguments");
  assert.match(await c.locator(".tool-args").innerText(), /"title": "Buy sourdough bread"/);
  assert.match(await c.locator(".tool-output").innerText(), /"title": "Buy sourdough bread"/);
  await shot(page, "edited-result");
});

test("a steer sent while the run streams is applied, and the run finishes", async (t) => {
  const page = await open(t);
  await send(page, "hello");
  await page.locator(".msg-assistant.streaming").waitFor();
  assert.equal(await page.locator("#send").innerText(), "Steer");
  await send(page, "what is 2+3?");
  await page.locator(".queued-steer", { hasText: "what is 2+3?" }).waitFor();
  assert.equal(await state(page), "running");
  await shot(page, "steer-queued");

  await page.getByText("2+3 = 5").waitFor();
  await finished(page);
  assert.deepEqual(await userMessages(page), ["hello", "what is 2+3?"]);
  assert.equal(await page.locator(".queued-steer").count(), 0);
  // The steer comes after the answer it interrupted no part of, before the call it caused.
  const order = await page.locator(".msg-user, .msg-assistant, .tool").evaluateAll((es) =>
    es.map((e) => (e.classList.contains("tool") ? "tool" : e.classList.contains("msg-user") ? "user" : "assistant")),
  );
  assert.deepEqual(order, ["user", "assistant", "user", "tool", "assistant"]);
  assert.equal(await card(page, "calculate").getAttribute("data-status"), "done");
  await shot(page, "steer-applied");
});

test("a reload mid-run attaches to the run again and shows each event once", async (t) => {
  const page = await open(t);

  // Reload while the answer streams.
  await send(page, "hello");
  await page.locator(".msg-assistant.streaming").waitFor();
  const url = page.url();
  const run = new URL(url).hash.match(/run=(run_[a-z0-9]+)/)?.[1];
  assert.ok(run, `no run in the URL ${url}`);
  assert.equal(await state(page), "running");
  await shot(page, "reload-mid-stream");
  await page.reload();
  await page.locator(`#status [data-field="run"]`, { hasText: run }).waitFor();
  await finished(page);
  assert.deepEqual(await userMessages(page), ["hello"]);
  assert.equal(await page.locator(".msg-assistant").count(), 1);
  const answer = await page.locator(".msg-assistant").innerText();
  assert.match(answer, /^Hello! I am agentd's built-in demo model/);
  assert.equal(answer.split("Hello! I am").length, 2, "the answer shows twice over");
  assert.match(answer, /pass --model openai:<model name>\.$/);
  assert.equal(await page.locator(".notice-run", { hasText: `Run ${run}` }).count(), 1);
  await shot(page, "reload-reattached");

  // The next turn of the thread; reload while its call waits for approval.
  await send(page, "save a note: after the reload");
  await page.locator(".tool[data-status='waiting'] [data-action='approve']").waitFor();
  await page.reload();
  const c = card(page, "save_note");
  await c.locator("[data-action='approve']").waitFor();
  assert.deepEqual(await userMessages(page), ["hello", "save a note: after the reload"]);
  assert.equal(await page.locator(".tool").count(), 1);
  await shot(page, "reload-approval-pending");
  await c.locator("[data-action='approve']").click();
  await page.getByText('Saved your note "After the reload"').waitFor();
  await finished(page);
  assert.equal(await page.locator(".msg-assistant").count(), 2);
  assert.equal(await page.getByText('Saved your note "After the reload"').count(), 1);
  assert.equal(await c.getAttribute("data-status"), "done");
  await shot(page, "reload-finished");
});

test("a denied call does not run, and the agent says so", async (t) => {
  const page = await open(t);
  await send(page, "save a note: shred the documents");
  const c = card(page, "save_note");
  await c.locator("[data-action='deny']").click();
  await c.locator("input.deny-reason").fill("not without a second look");
  await shot(page, "deny-reason");
  await c.locator("[data-action='deny-confirm']").click();

  await page.getByText("Nothing was saved.").waitFor();
  await finished(page);
  assert.equal(await c.getAttribute("data-status"), "denied");
  assert.equal(await c.locator(".approval-outcome").innerText(), "Denied by you: not without a second look");
  assert.equal(await c.locator(".tool-result .tool-label").textContent(), "The model was told");
  assert.match(await page.locator(".msg-assistant").last().innerText(), /denied: not without a second look/);
  await shot(page, "denied");
});

test("in a thread whose history fills a laptop's window, the approval's buttons come into view above the message box", async (t) => {
  const page = await open(t, { viewport: wide });
  await talk(page, "hello", "what is 12*7?", "what time is it in Tokyo?");
  await send(page, "save a note: buy milk");
  const c = card(page, "save_note");
  await finished(page, "waiting for your decision");
  assert.ok((await overflow(page)) > 200, `the history fits in the window (it overflows by ${await overflow(page)}px): the test needs more of it`);
  await shot(page, "approval-wide");
  await assertShown(
    "a call awaiting approval",
    c.locator("[data-action='approve']"),
    c.locator("[data-action='deny']"),
    c.locator("[data-action='edit']"),
    page.locator("#cancel"),
  );
  // The form a denial opens grows the card: it comes into view as well.
  await c.locator("[data-action='deny']").click();
  const back = c.locator(".approval-form:not([hidden]) [data-action='back']");
  await assertShown("the denial's form", c.locator("input.deny-reason"), c.locator("[data-action='deny-confirm']"), back);
  await back.click();
  await c.locator("[data-action='approve']").click();
  await page.getByText('Saved your note "Buy milk"').waitFor();
  await finished(page);

  // A person who scrolled up to read is left where they are, and offered the way down.
  await send(page, "save a note: call the plumber");
  await page.locator(".msg-user", { hasText: "call the plumber" }).waitFor();
  await page.locator("#transcript").hover();
  await page.mouse.wheel(0, -100_000);
  await page.waitForFunction(() => document.getElementById("transcript").scrollTop === 0);
  await finished(page, "waiting for your decision");
  const next = card(page, "save_note");
  assert.equal(await page.locator("#transcript").evaluate((e) => e.scrollTop), 0, "the approval scrolled the transcript away from what the person read");
  assert.notEqual(await hidden(next.locator("[data-action='approve']")), "");
  await shot(page, "approval-wide-scrolled-up");
  await page.locator("#show-approval").click();
  await assertShown("the approval, once asked for", next.locator("[data-action='approve']"), next.locator("[data-action='deny']"));
  await next.locator("[data-action='approve']").click();
  await page.getByText('Saved your note "Call the plumber"').waitFor();
  await finished(page);
});

test("on a phone, the approval's buttons fit the width and come into view, and one left pending is asked again after a reload", async (t) => {
  const page = await open(t, { viewport: phone });
  await talk(page, "hello", "what is 12*7?");
  await send(page, "save a note: buy milk");
  const c = card(page, "save_note");
  await finished(page, "waiting for your decision");
  assert.ok((await overflow(page)) > 200, `the history fits in the window (it overflows by ${await overflow(page)}px): the test needs more of it`);
  await shot(page, "approval-phone");
  const buttons = [c.locator("[data-action='approve']"), c.locator("[data-action='deny']"), c.locator("[data-action='edit']"), page.locator("#cancel")];
  await assertShown("a call awaiting approval", ...buttons);
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth), phone.width, "the page is wider than the phone");

  // Leaving it pending frees the message box; the run stays parked, so a reload asks again.
  const leave = page.locator("#cancel");
  assert.equal(await leave.innerText(), "Leave pending");
  assert.match(await leave.getAttribute("title"), /neither runs nor is denied/);
  await leave.click();
  assert.match(await c.locator(".approval-outcome").innerText(), /^Left pending/);
  await shot(page, "approval-phone-left-pending");
  assert.equal(await c.getAttribute("data-status"), "waiting");
  await page.locator("#input:not([disabled])").waitFor();
  await page.reload();
  await finished(page, "waiting for your decision");
  await shot(page, "approval-phone-reloaded");
  await assertShown("a call left pending, after a reload", ...buttons);
  await c.locator("[data-action='approve']").click();
  await page.getByText('Saved your note "Buy milk"').waitFor();
  await finished(page);
  assert.deepEqual(await userMessages(page), ["hello", "what is 12*7?", "save a note: buy milk"]);
});

test("a new run keeps its own history, and a thread's history opens from the list", async (t) => {
  const page = await open(t);
  // A run whose history the page keeps: its second turn needs the first.
  await page.getByRole("button", { name: "New run" }).click();
  await send(page, "what is 12*7?");
  await page.getByText("12*7 = 84").waitFor();
  await finished(page);
  assert.doesNotMatch(page.url(), /thread=/);
  await send(page, "and 2+3?");
  await page.getByText("2+3 = 5").waitFor();
  await finished(page);
  assert.deepEqual(await userMessages(page), ["what is 12*7?", "and 2+3?"]);
  // An approval in it resumes the run with the history the page keeps.
  await send(page, "save a note: kept by the page");
  await card(page, "save_note").locator("[data-action='approve']").click();
  await page.getByText('Saved your note "Kept by the page"').waitFor();
  await finished(page);
  assert.deepEqual(await userMessages(page), ["what is 12*7?", "and 2+3?", "save a note: kept by the page"]);

  // A thread started in another tab shows its history here.
  const other = await open(t);
  await send(other, "what is 6*7?");
  await other.getByText("6*7 = 42").waitFor();
  await finished(other);
  const thread = new URL(other.url()).hash.match(/thread=(thread_[a-z0-9]+)/)?.[1];
  assert.ok(thread);
  await page.getByRole("button", { name: "Refresh" }).click();
  await page.locator(`.thread[data-thread-id="${thread}"] .thread-open`).click();
  await page.getByText("6*7 = 42").waitFor();
  assert.deepEqual(await userMessages(page), ["what is 6*7?"]);
  assert.equal(await card(page, "calculate").getAttribute("data-status"), "done");
  assert.match(page.url(), new RegExp(`#thread=${thread}`));
  await shot(page, "thread-history");
  await send(page, "and 6*8?");
  await page.getByText("6*8 = 48").waitFor();
  await finished(page);
  assert.deepEqual(await userMessages(page), ["what is 6*7?", "and 6*8?"]);
});

test("the page asks for a bearer token when agentd wants one", { skip: bearer === "" && "agentd runs without --auth-tokens-file" }, async (t) => {
  const page = await open(t, { withToken: false });
  const dialog = page.locator("#token-dialog[open]");
  await dialog.waitFor();
  assert.match(await dialog.locator("#token-why").innerText(), /asks for a bearer token/);
  await dialog.locator("#token-input").fill("not-the-token");
  await dialog.locator("#token-save").click();
  await dialog.locator("#token-why", { hasText: "refused the token" }).waitFor();
  await shot(page, "token-refused");
  await dialog.locator("#token-input").fill(bearer);
  await dialog.locator("#token-save").click();
  await page.locator("#agent:not([disabled])").waitFor();
  assert.equal(await dialog.count(), 0);
  assert.match(await page.locator("#agent").inputValue(), /^demo$/);
  await send(page, "what is 12*7?");
  await page.getByText("12*7 = 84").waitFor();
  await finished(page);
});

test("a typed agent's result is shown pretty-printed under its answer", async (t) => {
  const page = await open(t);
  await page.locator("#agent").selectOption("triage");
  await send(page, "what is 12*7?");
  await finished(page);
  const result = page.locator(".msg-result .result-json");
  await result.waitFor();
  const text = await result.innerText();
  // Pretty-printed: one property a line. The wire's Struct keeps no key order.
  assert.deepEqual(JSON.parse(text), { severity: "low", summary: "12*7 = 84" });
  assert.equal(text.split("\n").length, 4, text);
  await shot(page, "typed-result");
});
