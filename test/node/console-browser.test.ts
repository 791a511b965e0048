import { randomBytes } from "node:crypto";
import { createServer, request as httpRequest, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { unstable_startWorker } from "wrangler";
import { openBrowser, TOKEN_KEY, shot as takeShot } from "./screenshot";
import { callWorker, readBody } from "./worker-api";

/**
 * The operator console (/console) in a real browser: Chromium (test/node/chromium.ts says which one) driven
 * by playwright-core, against the Worker under `wrangler dev` (static assets routed as in production). The
 * screenshots are written to test-results/screenshots/ (ignored by git); `npm run screenshots` copies them
 * to docs/screenshots/, so the README's pictures are of the console as it is. They are byte-stable from run
 * to run (see `shot`), so a committed picture changes only when the console's look does.
 */

const CHROMIUM = inject("chromium");
const OPERATOR = randomBytes(32).toString("base64url");
const HOOK_SECRET = `whsec_${Buffer.from("browser-test-webhook-secret-0001").toString("base64")}`;
const SEEDED = 60; // with 25 rows a page: three pages
const seededKey = (i: number) => `agent:main:seed-${String(i).padStart(2, "0")}`;

let worker: Awaited<ReturnType<typeof unstable_startWorker>>;
let base = "";
let context: BrowserContext;
let page: Page;
let closeBrowser = async () => {};
// The console's clock stands still at the start of the run (set before anything is seeded): everything the
// console shows happened after it, so each relative time reads "just now" however slow the run is (a time
// ahead of the page's clock reads "just now", console/format.ts).
let clockFrozenAt = 0;

// A channel webhook under the test's control: it first answers 302 (a redirect is a dead letter at once,
// src/channels/webhook.ts), then 200 once the test fixes it, so a retried delivery can succeed.
let hookAnswer = 302;
const hookBodies: any[] = [];
let hook: Server;

/**
 * The "fake/m1" model: an OpenAI-compatible chat endpoint on the hook server whose streamed answer the
 * test writes piece by piece (`write`), then ends (`finish`), so a run stays mid-reply as long as the test
 * needs. `nextReply()` resolves when the Worker's next model request arrives.
 */
interface FakeReply {
  streamed: boolean;
  write(text: string): void;
  finish(): void;
}
const fakeReplies: ((r: FakeReply) => void)[] = [];
const nextReply = () => new Promise<FakeReply>((resolve) => fakeReplies.push(resolve));

function answerChatCompletion(body: any, res: ServerResponse): void {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model: "m1", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const waiting = fakeReplies.shift();
  if (!body.stream) {
    // Asked in one piece (docs/events.md says which runs stream): the test sees `streamed: false`.
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id: "chatcmpl-fake",
        object: "chat.completion",
        created: 1,
        model: "m1",
        choices: [{ index: 0, message: { role: "assistant", content: "not streamed" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
    waiting?.({ streamed: false, write() {}, finish() {} });
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.write(chunk({ role: "assistant", content: "" }));
  const reply: FakeReply = {
    streamed: true,
    write: (text) => void res.write(chunk({ content: text })),
    finish: () => {
      res.write(chunk({}, "stop"));
      const usage = { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 };
      res.write(
        `data: ${JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1, model: "m1", choices: [], usage })}\n\n`,
      );
      res.end("data: [DONE]\n\n");
    },
  };
  if (waiting) waiting(reply);
  else reply.finish();
}

const api = (method: string, path: string, body?: unknown) => callWorker(base, OPERATOR, method, path, body);

/** A byte-stable screenshot of the current view (test/node/screenshot.ts). */
const shot = (name: string, opts?: { signedIn: boolean }) =>
  takeShot({ page, context, clockFrozenAt, token: OPERATOR }, name, opts);

const SESSION_STREAMS = /^\/v1\/sessions\/[^/]+\/events(\?|$)/;
const RUN_STREAMS = /^\/v1\/runs\/[^/]+\/events(\?|$)/;

/**
 * A proxy in front of the Worker that can drop event streams (those whose path matches `streams`), as a
 * flaky network or a proxy closing a long connection would: `cut()` breaks the open ones (and says how
 * many); while `down`, every new one's connection is broken at once, so the page keeps trying to
 * reconnect. Other requests (the other kind of stream included) pass.
 */
async function streamCutter(target: string, streams: RegExp = SESSION_STREAMS) {
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    const isStream = streams.test(req.url ?? "");
    if (isStream && cutter.down) return void req.socket.destroy();
    const upstream = httpRequest(
      new URL(req.url ?? "/", target).href,
      { method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        res.flushHeaders(); // an event stream's headers go out before its first event, which may be long
        up.pipe(res);
        if (isStream) {
          open.add(res);
          res.on("close", () => open.delete(res));
        }
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const cutter = {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    down: false,
    cut(): number {
      const n = open.size;
      for (const res of open) res.socket?.destroy();
      return n;
    },
    close: () => {
      cutter.cut();
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
  return cutter;
}

/** The first `delta` of a fresh watcher of the run (no resume point): the text so far, as the Worker holds it. */
async function runTextSoFar(runId: string): Promise<string> {
  const abort = new AbortController();
  const res = await fetch(new URL(`/v1/runs/${runId}/events`, base), {
    headers: { Authorization: `Bearer ${OPERATOR}` },
    signal: abort.signal,
  });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "";
      buffer += value;
      for (const block of buffer.split("\n\n").slice(0, -1))
        if (block.includes("event: delta\n")) return JSON.parse(block.slice(block.indexOf("data: ") + 6)).text;
    }
  } finally {
    abort.abort();
  }
}

/**
 * A run of the "fake/m1" model watched by a tab through a proxy that cuts run streams: "First, " arrives
 * live, then the run's stream is cut and kept down while the model writes `whileAway`; after the page
 * reconnects its draft must read every piece once, and the finished reply and status follow.
 */
async function cutRunMidReply(key: string, whileAway: string[]): Promise<void> {
  await api("PATCH", `/v1/sessions/${encodeURIComponent(key)}`, { model: "fake/m1" });
  const cutter = await streamCutter(base, RUN_STREAMS);
  const tab = await context.newPage();
  try {
    await tab.addInitScript(([k, token]) => sessionStorage.setItem(k, token), [TOKEN_KEY, OPERATOR]);
    await tab.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/transcript`, cutter.base).href);
    await expect.poll(() => tab.getByTestId("stream-state").textContent(), { timeout: 20_000 }).toBe("live");
    const resumes: (string | undefined)[] = []; // Last-Event-ID of each run stream the page opens
    tab.on("request", (r) => {
      if (RUN_STREAMS.test(new URL(r.url()).pathname)) resumes.push(r.headers()["last-event-id"]);
    });

    // A run on a remote model streams (docs/events.md); the model answers when told.
    const model = nextReply();
    const sent = await api("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, { message: "in pieces" });
    const reply = await model;
    expect(reply.streamed).toBe(true);
    const draft = tab.locator('li[data-role="draft"]');
    const draftText = () => draft.locator("p").textContent();
    const runState = draft.getByTestId("run-stream-state");
    reply.write("First, ");
    await expect.poll(draftText, { timeout: 20_000 }).toBe("First, ");
    expect(await runState.textContent()).toBe("live");
    expect([await runState.getAttribute("role"), await runState.getAttribute("aria-live")]).toEqual([
      "status",
      "polite",
    ]);

    // The run's stream drops and stays down; the model goes on meanwhile, until the Worker has it all.
    cutter.down = true;
    expect(cutter.cut()).toBe(1);
    await expect.poll(() => runState.textContent(), { timeout: 10_000 }).toBe("reconnecting…");
    for (const piece of whileAway) reply.write(piece);
    const sofar = `First, ${whileAway.join("")}`;
    await expect.poll(() => runTextSoFar(sent.runId), { timeout: 20_000 }).toBe(sofar);
    await expect.poll(() => resumes.length, { timeout: 10_000 }).toBeGreaterThan(1);
    expect(await draftText()).toBe("First, ");
    cutter.down = false;

    // Back: the text written while away follows what the page had, not after a second copy of it.
    await expect.poll(() => runState.textContent(), { timeout: 30_000 }).toBe("live");
    await expect.poll(draftText, { timeout: 10_000 }).toBe(sofar);
    reply.write("the end.");
    await expect.poll(draftText, { timeout: 10_000 }).toBe(`${sofar}the end.`);
    reply.finish();

    const texts = (role: string) => tab.locator(`li[data-role="${role}"] p`).allTextContents();
    const run = await api("GET", `/v1/runs/${sent.runId}/wait?timeoutMs=20000`);
    expect([run.status, run.reply]).toEqual(["ok", `${sofar}the end.`]);
    // The transcript shows the reply once, as the history shows it (a long text is cut there, with a marker).
    const history = await api("GET", `/v1/sessions/${encodeURIComponent(key)}/history?includeTools=true`);
    const shown = history.messages.filter((m: any) => m.role === "assistant").map((m: any) => m.content[0].text);
    expect(shown).toHaveLength(1);
    expect(`${sofar}the end.`.startsWith(shown[0].replace(/\n…\(truncated\)…$/, ""))).toBe(true);
    await expect.poll(() => texts("assistant"), { timeout: 20_000 }).toEqual(shown);
    expect(await texts("user")).toEqual(["in pieces"]);
    await expect.poll(() => draft.count()).toBe(0);
    await tab.getByRole("link", { name: "Runs" }).click();
    await expect.poll(() => tab.locator("table.runs .status").allTextContents()).toEqual(["ok"]);
    // The first stream started from nothing; every reconnect resumed after the one event seen before the drop.
    expect(resumes[0]).toBeUndefined();
    expect(resumes.length).toBeGreaterThanOrEqual(3);
    expect(resumes[1]).toMatch(/^[\w-]+:1$/);
    expect(new Set(resumes.slice(1))).toEqual(new Set([resumes[1]]));
  } finally {
    await tab.close();
    await cutter.close();
  }
}

beforeAll(async () => {
  if (!CHROMIUM) return; // skipped: test/node/browser-setup.ts said why
  hook = createServer(async (req, res) => {
    const body = JSON.parse(await readBody(req));
    // The "slow" agent's webhook runtime: accepts each run and never completes it, so it stays running.
    if (req.url === "/runtime") return void res.writeHead(202).end();
    if (req.url === "/openai/chat/completions") return answerChatCompletion(body, res);
    hookBodies.push(body);
    res.writeHead(hookAnswer, hookAnswer === 302 ? { Location: "http://127.0.0.1:1/" } : {}).end("ok");
  });
  await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
  const hookBase = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
  const hookUrl = `${hookBase}/deliver`;

  // No fetch of the Request.cf sample from Cloudflare (scripts/dev.mjs): the test needs no network.
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  worker = await unstable_startWorker({
    config: "wrangler.jsonc",
    bindings: {
      GATEWAY_TOKEN: { type: "plain_text", value: OPERATOR },
      SIGNING_SECRET: { type: "plain_text", value: randomBytes(32).toString("base64url") },
      CONFIG: {
        type: "json",
        value: {
          agents: {
            defaults: { model: "builtin/echo" },
            entries: {
              main: { name: "Main", default: true },
              research: { name: "Research" },
              slow: { name: "Slow", runtime: { type: "webhook", url: `${hookBase}/runtime` } },
            },
          },
          channels: { hook: { outbound: { url: hookUrl, secret: HOOK_SECRET } } },
          // A session set to "fake/m1" is answered by `answerChatCompletion` (above).
          models: {
            providers: { fake: { api: "openai-completions", baseUrl: `${hookBase}/openai`, apiKey: "fake-key" } },
          },
          // Not supported here: shows up as a configuration warning on the agents page.
          session: { maintenance: { mode: "enforce" } },
        },
      },
    },
    dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, persist: false, logLevel: "error" },
  });
  await worker.ready;
  base = String(await worker.url);

  clockFrozenAt = Date.now();
  // Sessions to page through: PATCH creates a session with its label, no run needed.
  // One after another, so the listing's order (newest first) and the screenshots are the same every run.
  for (let i = 0; i < SEEDED; i++)
    await api("PATCH", `/v1/sessions/${encodeURIComponent(seededKey(i))}`, { label: `Seed ${i}` });
  // The index is written behind each session's change; wait until it lists them all.
  await vi.waitFor(
    async () => expect((await api("GET", "/v1/sessions?agentId=main&limit=1000")).count).toBeGreaterThanOrEqual(SEEDED),
    { timeout: 30_000, interval: 200 },
  );

  ({ context, page, close: closeBrowser } = await openBrowser(CHROMIUM, clockFrozenAt));
  // The console must load nothing from another origin (no CDN).
  page.on("request", (req) => {
    if (!req.url().startsWith(base) && !req.url().startsWith("data:")) foreign.push(req.url());
  });
}, 120_000);

const foreign: string[] = [];

afterAll(async () => {
  await closeBrowser();
  await worker?.dispose();
  hook?.closeAllConnections(); // a fake model reply a failed test left open
  await new Promise((r) => hook?.close(r));
});

describe.skipIf(!CHROMIUM)("operator console in Chromium", () => {
  it("signs in with a pasted token, kept in session storage and never in the URL", async () => {
    await page.goto(new URL("/console", base).href);
    await expect.poll(() => page.getByRole("heading", { name: "Switchboard console" }).isVisible()).toBe(true);
    await shot("sign-in", { signedIn: false });
    // Keyboard: Tab reaches the token field first, and the focused control shows a visible outline.
    await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement.id")).toBe("token");
    expect(await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")).toBe("solid");
    expect(await page.evaluate("getComputedStyle(document.activeElement).outlineWidth")).toBe("3px");
    const input = page.getByLabel("Token");
    await input.fill("not-the-token");
    await input.press("Enter");
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toMatch(/^401 unauthorized: /);

    await input.fill(OPERATOR);
    await input.press("Enter"); // keyboard only
    await page.getByRole("heading", { name: "Sessions" }).waitFor();
    expect(await page.evaluate((key) => sessionStorage.getItem(key), TOKEN_KEY)).toBe(OPERATOR);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(page.url()).not.toContain(OPERATOR);
  });

  it("pages through a seeded listing: next and previous across three pages, filters reach the API", async () => {
    const rows = () => page.locator("table.sessions tbody tr td:first-child a").allTextContents();
    const next = page.getByRole("button", { name: "Next →" });
    const previous = page.getByRole("button", { name: "← Previous" });
    await page.locator("table.sessions tbody tr").first().waitFor();
    const page1 = await rows();
    expect(page1).toHaveLength(25);
    expect(await previous.isDisabled()).toBe(true);
    await shot("sessions");

    await next.focus();
    await page.keyboard.press("Enter"); // buttons work from the keyboard
    await expect.poll(() => page.getByTestId("page-number").textContent()).toBe("Page 2");
    await expect.poll(rows).not.toEqual(page1);
    const page2 = await rows();
    expect(page2).toHaveLength(25);
    await next.click();
    await expect.poll(() => page.getByTestId("page-number").textContent()).toBe("Page 3");
    await expect.poll(rows).not.toEqual(page2);
    const page3 = await rows();
    // Newest first, no row twice, every seeded session on one of the pages.
    const all = [...page1, ...page2, ...page3];
    expect(new Set(all).size).toBe(all.length);
    for (let i = 0; i < SEEDED; i++) expect(all).toContain(seededKey(i));
    expect(all.slice(0, SEEDED).every((k) => k.startsWith("agent:main:seed-"))).toBe(true);
    expect(all.indexOf(seededKey(SEEDED - 1))).toBeLessThan(all.indexOf(seededKey(0)));

    await previous.click();
    await expect.poll(() => page.getByTestId("page-number").textContent()).toBe("Page 2");
    await expect.poll(rows).toEqual(page2);
    await previous.click();
    await expect.poll(rows).toEqual(page1);

    // A kind no seeded session has: the API filters, the page says so.
    await page.getByLabel("cron").check();
    await page.getByText("No sessions match.").waitFor();
    await page.getByLabel("cron").uncheck();
    await expect.poll(rows).toEqual(page1);
  });

  it("opens a session and edits its label and send policy", async () => {
    const key = seededKey(SEEDED - 1);
    await page.getByRole("link", { name: key, exact: true }).click();
    await page.getByRole("heading", { name: `Seed ${SEEDED - 1} — ${key}` }).waitFor();
    await page.getByRole("link", { name: "Label & policy" }).click();
    await page.getByLabel("Label").fill("Renamed in the console");
    await page.getByRole("button", { name: "Save label" }).click();
    await page.getByRole("heading", { name: `Renamed in the console — ${key}` }).waitFor();
    await page.getByLabel("Send policy").selectOption("deny");
    await page.getByRole("button", { name: "Save send policy" }).click();
    await page.getByText("Send policy saved.").waitFor();
    const row = await api("GET", `/v1/sessions/${encodeURIComponent(key)}`);
    expect([row.label, row.sendPolicy]).toEqual(["Renamed in the console", "deny"]);
  });

  it("sends a message and shows the run's reply as it arrives, with the run's status", async () => {
    const key = seededKey(SEEDED - 2);
    await page.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/transcript`, base).href);
    await expect.poll(() => page.getByTestId("stream-state").textContent()).toBe("live");
    await page.getByLabel("Message").fill("hello from the browser");
    await page.getByRole("button", { name: "Send" }).click();
    // builtin/echo answers with the user's message.
    const reply = page.locator('li[data-role="assistant"]', { hasText: "hello from the browser" });
    await reply.waitFor({ timeout: 20_000 });
    expect(await page.locator('li[data-role="user"]').allTextContents()).toEqual([
      expect.stringContaining("hello from the browser"),
    ]);
    await expect.poll(() => page.locator(".meta").textContent()).toMatch(/ · [1-9]\d* tokens/);
    await shot("session");
    await page.getByRole("link", { name: "Runs" }).click();
    await expect.poll(() => page.locator("table.runs .status").allTextContents()).toEqual(["ok"]);
  });

  it("shows the session's status card (session_status), read again when a run ends", async () => {
    const key = seededKey(SEEDED - 5);
    await page.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/status`, base).href);
    await expect.poll(() => page.getByTestId("stream-state").textContent()).toBe("live");
    const card = page.getByTestId("status-card");
    await card.waitFor();
    const version = async () => Number(/🔖 State version: (\d+)/.exec((await card.textContent()) ?? "")?.[1]);
    expect(await card.textContent()).toMatch(/^🧠 Model: \S+/);
    expect(await card.textContent()).toContain(`🧵 Session: ${key}`);
    const before = await version();
    const sent = await api("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, { message: "status please" });
    await vi.waitFor(async () => expect((await api("GET", `/v1/runs/${sent.runId}`)).status).toBe("ok"), {
      timeout: 20_000,
      interval: 100,
    });
    // The run's queued and ended events are state changes: the card's version moves past them.
    await expect.poll(() => version(), { timeout: 20_000 }).toBeGreaterThanOrEqual(before + 2);
    expect(await card.textContent()).toContain("🏃 Running: idle");
  });

  it("watches a run started elsewhere: its reply appears live, without a reload or a re-read", async () => {
    const key = seededKey(SEEDED - 3);
    await page.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/transcript`, base).href);
    await expect.poll(() => page.getByTestId("stream-state").textContent()).toBe("live");
    await page.getByText("No messages yet.").waitFor();
    // Anything the page fetches from now on, other than the event streams, would be a re-read.
    const reads: string[] = [];
    const onRequest = (r: { url(): string }) => {
      if (!/\/events(\?|$)/.test(new URL(r.url()).pathname + new URL(r.url()).search)) reads.push(r.url());
    };
    page.on("request", onRequest);
    await page.evaluate("window.__notReloaded = true");

    // The message is sent by someone else (the API), not by this page: only the session stream can show it.
    const sent = await api("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, { message: "sent elsewhere" });
    await page.locator('li[data-role="user"]', { hasText: "sent elsewhere" }).waitFor({ timeout: 20_000 });
    await page.locator('li[data-role="assistant"]', { hasText: "sent elsewhere" }).waitFor({ timeout: 20_000 });
    expect((await api("GET", `/v1/runs/${sent.runId}`)).status).toBe("ok");
    // Messages came only over the stream; the one read is the row, for the token counts of the finished run
    // (read when the run's end reaches the page, which may be just after its reply did).
    await expect
      .poll(() => reads.map((u) => new URL(u).pathname), { timeout: 10_000 })
      .toEqual([`/v1/sessions/${encodeURIComponent(key)}`]);
    page.off("request", onRequest);
    expect(await page.evaluate("window.__notReloaded")).toBe(true);
    await expect.poll(() => page.locator(".meta").textContent()).toMatch(/ · [1-9]\d* tokens/);
    await page.getByRole("link", { name: "Runs" }).click();
    await expect.poll(() => page.locator("table.runs .status").allTextContents()).toEqual(["ok"]);
  });

  it("reconnects after the event stream drops and resumes by Last-Event-ID: the drop is shown, every message appears once", async () => {
    const key = seededKey(SEEDED - 4);
    const messages = `/v1/sessions/${encodeURIComponent(key)}/messages`;
    const cutter = await streamCutter(base);
    // Its own tab, through the proxy (another origin, so the token is put into that tab's session storage).
    const tab = await context.newPage();
    try {
      await tab.addInitScript(([k, token]) => sessionStorage.setItem(k, token), [TOKEN_KEY, OPERATOR]);
      await tab.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/transcript`, cutter.base).href);
      const state = tab.getByTestId("stream-state");
      await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe("live");
      // A message while connected: its events (with their ids) arrive over the stream.
      await api("POST", messages, { message: "before the drop" });
      await tab.locator('li[data-role="assistant"]', { hasText: "before the drop" }).waitFor({ timeout: 20_000 });
      // The indicator is announced to screen readers as it changes.
      expect([await state.getAttribute("role"), await state.getAttribute("aria-live")]).toEqual(["status", "polite"]);

      const resumes: (string | undefined)[] = []; // Last-Event-ID of each session stream opened from now on
      const reads: string[] = [];
      tab.on("request", (r) => {
        const path = new URL(r.url()).pathname;
        if (path.endsWith(`/${encodeURIComponent(key)}/events`)) resumes.push(r.headers()["last-event-id"]);
        else if (path.endsWith("/history")) reads.push(path);
      });

      // The connection drops, and stays down: every attempt to reconnect fails until it is back.
      cutter.down = true;
      expect(cutter.cut()).toBe(1);
      await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe("reconnecting…");
      // Meanwhile the session changes, through the API (not this page).
      for (const text of ["while away 1", "while away 2"]) {
        const sent = await api("POST", messages, { message: text });
        expect((await api("GET", `/v1/runs/${sent.runId}/wait?timeoutMs=20000`)).status).toBe("ok");
      }
      // The page tried to reconnect while down, and still shows only what it had.
      await expect.poll(() => resumes.length, { timeout: 10_000 }).toBeGreaterThan(0);
      expect(await state.textContent()).toBe("reconnecting…");
      expect(await tab.locator("li[data-role]").count()).toBe(2);
      cutter.down = false;

      await expect.poll(() => state.textContent(), { timeout: 30_000 }).toBe("live");
      await tab.locator('li[data-role="assistant"]', { hasText: "while away 2" }).waitFor({ timeout: 20_000 });
      const texts = (role: string) => tab.locator(`li[data-role="${role}"] p`).allTextContents();
      const expected = ["before the drop", "while away 1", "while away 2"];
      await expect.poll(() => texts("assistant")).toEqual(expected);
      expect(await texts("user")).toEqual(expected);
      // Every attempt resumed after the last event the page had seen (the same id: nothing arrived while
      // down), and the missed messages came from that replay: the history was not read again.
      expect(resumes.length).toBeGreaterThanOrEqual(2);
      expect(resumes[0]).toMatch(/\S/);
      expect(new Set(resumes)).toEqual(new Set([resumes[0]]));
      expect(reads).toEqual([]);
    } finally {
      await tab.close();
      await cutter.close();
    }
  });

  it("a run's stream drops mid-reply: the page shows the drop, reconnects with Last-Event-ID and shows the whole reply once, then its status", async () => {
    await cutRunMidReply("agent:main:cut-run", ["second, "]);
  });

  it("a run's stream is away longer than the server keeps its events: the reconnect is told reset and shows the text so far once", async () => {
    // 1,100 events of 300 characters: past both bounds of a running run's kept stream (docs/events.md).
    const pieces = Array.from({ length: 1100 }, (_, i) => `${String(i).padStart(4, "0")} `.padEnd(300, "."));
    await cutRunMidReply("agent:main:cut-run-long", pieces);
  });

  it("a run's stream ends with the session deleted mid-reply: the page stops following it, with no reconnect", async () => {
    const key = "agent:main:delete-mid-run";
    await api("PATCH", `/v1/sessions/${encodeURIComponent(key)}`, { model: "fake/m1" });
    const tab = await context.newPage();
    try {
      await tab.addInitScript(([k, token]) => sessionStorage.setItem(k, token), [TOKEN_KEY, OPERATOR]);
      await tab.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/transcript`, base).href);
      await expect.poll(() => tab.getByTestId("stream-state").textContent(), { timeout: 20_000 }).toBe("live");
      const runStreams: string[] = [];
      tab.on("request", (r) => {
        if (RUN_STREAMS.test(new URL(r.url()).pathname)) runStreams.push(r.url());
      });
      const model = nextReply();
      await api("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, { message: "never finished" });
      (await model).write("Half a ");
      const draft = tab.locator('li[data-role="draft"]');
      await expect.poll(() => draft.locator("p").textContent(), { timeout: 20_000 }).toBe("Half a ");

      await api("DELETE", `/v1/sessions/${encodeURIComponent(key)}`);
      // The run stream's `end` is its last word: the draft goes, and the stream is not opened again
      // (a reconnect would be tried before the draft could go: it goes when following stops).
      await expect.poll(() => draft.count(), { timeout: 20_000 }).toBe(0);
      await expect.poll(() => tab.getByTestId("stream-state").textContent()).toBe("session deleted");
      expect(runStreams).toHaveLength(1);
    } finally {
      await tab.close();
    }
  });

  it("a session deleted while watched: the page says so and stops reconnecting; a message sent from it starts the session afresh", async () => {
    const key = "agent:main:delete-me";
    const sent = await api("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, { message: "first life" });
    await api("GET", `/v1/runs/${sent.runId}/wait?timeoutMs=20000`);
    await page.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/transcript`, base).href);
    const state = page.getByTestId("stream-state");
    await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe("live");
    await page.locator('li[data-role="assistant"]', { hasText: "first life" }).waitFor();
    const streams: string[] = [];
    const onRequest = (r: { url(): string }) => {
      if (new URL(r.url()).pathname.endsWith(`/${encodeURIComponent(key)}/events`)) streams.push(r.url());
    };
    page.on("request", onRequest);

    await api("DELETE", `/v1/sessions/${encodeURIComponent(key)}`);
    // The stream's final event ends it: the indicator says why, and no reconnect is tried (the loop stops
    // in the same step that shows the state, so none can follow).
    await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe("session deleted");
    expect(streams).toEqual([]);
    expect(await page.getByRole("alert").allTextContents()).toEqual([]);

    // Sending from the page creates the session again; its stream starts over (`reset`): only the new
    // session's messages are shown.
    await page.getByLabel("Message").fill("second life");
    await page.getByRole("button", { name: "Send" }).click();
    await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe("live");
    await page.locator('li[data-role="assistant"]', { hasText: "second life" }).waitFor({ timeout: 20_000 });
    const texts = (role: string) => page.locator(`li[data-role="${role}"] p`).allTextContents();
    await expect.poll(() => texts("user")).toEqual(["second life"]);
    expect(await texts("assistant")).toEqual(["second life"]);
    expect(streams).toHaveLength(1);
    page.off("request", onRequest);
  });

  it("aborts a running run from its session's runs", async () => {
    const key = "agent:slow:abort-me";
    const sent = await api("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, { message: "take your time" });
    await vi.waitFor(async () => expect((await api("GET", `/v1/runs/${sent.runId}`)).status).toBe("running"), {
      timeout: 20_000,
      interval: 100,
    });
    await page.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/runs`, base).href);
    const row = page.locator("table.runs tbody tr", { hasText: sent.runId });
    await row.locator(".status", { hasText: "running" }).waitFor();
    await row.getByRole("button", { name: `Abort run ${sent.runId}` }).click();
    await row.locator(".status", { hasText: "aborted" }).waitFor();
    expect(await row.getByRole("button").count()).toBe(0);
    expect((await api("GET", `/v1/runs/${sent.runId}`)).status).toBe("aborted");
  });

  it("retries a dead delivery until it is delivered", async () => {
    const key = "agent:main:hook-chat";
    const sent = await api("POST", `/v1/sessions/${encodeURIComponent(key)}/messages`, {
      message: "deliver me",
      channel: "hook",
      to: "chat-1",
      deliver: true,
    });
    await api("GET", `/v1/runs/${sent.runId}/wait?timeoutMs=20000`);
    await expect
      .poll(
        async () => (await api("GET", `/v1/sessions/${encodeURIComponent(key)}/deliveries`)).deliveries[0]?.status,
        {
          timeout: 20_000,
        },
      )
      .toBe("dead");

    await page.goto(new URL(`/console/#/session/${encodeURIComponent(key)}/deliveries`, base).href);
    const row = page.locator("tr[data-delivery]");
    await row.locator(".status", { hasText: "dead" }).waitFor();
    expect(await row.locator('td[data-label="Attempts"]').textContent()).toBe("1");
    await shot("deliveries");

    hookAnswer = 200;
    await row.getByRole("button", { name: /^Retry delivery / }).click();
    await page.getByText("Delivery re-queued.").waitFor();
    await expect
      .poll(
        async () => {
          await page.getByRole("button", { name: "Refresh" }).click();
          return row.locator(".status").textContent();
        },
        { timeout: 20_000 },
      )
      .toBe("delivered");
    expect(hookBodies.map((b) => [b.message, b.to])).toEqual([
      ["deliver me", "chat-1"],
      ["deliver me", "chat-1"],
    ]);
  });

  it("shows the agents and the effective configuration with its warnings, secrets redacted", async () => {
    await page.getByRole("link", { name: "Agents & config" }).click();
    await page.getByTestId("effective-config").waitFor();
    await expect
      .poll(() => page.locator("table.rows tbody tr td:first-child").allTextContents())
      .toEqual(["Main (main) · default", "Research (research)", "Slow (slow)"]);
    const config = await page.getByTestId("effective-config").textContent();
    expect(config).toContain('"secret": "[redacted]"');
    expect(config).not.toContain(HOOK_SECRET);
    expect(await page.getByTestId("config-warnings").textContent()).toContain("maintenance");
    await shot("agents");
  });

  it("fits a phone-sized screen", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(new URL(`/console/#/session/${encodeURIComponent(seededKey(SEEDED - 2))}/transcript`, base).href);
    await page.locator('li[data-role="assistant"]').first().waitFor();
    // Nothing wider than the screen: no sideways scrolling.
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
    await shot("phone-session");
    await page.goto(new URL("/console/#/sessions", base).href);
    await page.locator("table.sessions tbody tr").first().waitFor();
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
    expect(foreign).toEqual([]);
  });
});
