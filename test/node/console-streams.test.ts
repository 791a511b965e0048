import { randomBytes } from "node:crypto";
import type { BrowserContext, Page } from "playwright-core";
import { describe, expect, inject, it } from "vitest";
import { useConsole } from "./console-rig";
import { fakeChatModel } from "./fake-chat-model";
import { TOKEN_KEY } from "./screenshot";
import { RUN_STREAMS, runTextSoFar, streamCutter } from "./stream-proxy";
import { callWorker, readBody } from "./worker-api";

/**
 * The console's event streams in Chromium (test/node/chromium.ts says which one), against the Worker under
 * `wrangler dev`: a session stream and a run's stream dropped by a proxy (test/node/stream-proxy.ts) and
 * resumed by Last-Event-ID, a run's stream away longer than the server keeps its events, and streams ended
 * by a deleted session. Replies come from the "fake/m1" model the test writes piece by piece
 * (test/node/fake-chat-model.ts).
 */

const CHROMIUM = inject("chromium");
const OPERATOR = randomBytes(32).toString("base64url");
const model = fakeChatModel();
const nextReply = model.nextReply;

let base = "";
let context: BrowserContext;
let page: Page;

const api = (method: string, path: string, body?: unknown) => callWorker(base, OPERATOR, method, path, body);

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
    await expect.poll(() => runTextSoFar(base, OPERATOR, sent.runId), { timeout: 20_000 }).toBe(sofar);
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

useConsole({
  token: OPERATOR,
  // The first page is signed in, as after the sign-in form (test/node/console-browser.test.ts); the tabs
  // through a proxy are another origin and sign in themselves.
  signIn: "page",
  serve: async (req, res) => {
    if (req.url === "/openai/chat/completions") return model.answer(JSON.parse(await readBody(req)), res);
    res.writeHead(404).end();
  },
  bindings: (modelBase) => ({
    CONFIG: {
      type: "json",
      value: {
        agents: {
          defaults: { model: "builtin/echo" },
          // Every agent AGENT_TOKENS names (vitest.config.ts), or each request is a config_error.
          entries: { main: { name: "Main", default: true }, research: { name: "Research" } },
        },
        // A session set to "fake/m1" is answered by the test (test/node/fake-chat-model.ts).
        models: {
          providers: { fake: { api: "openai-completions", baseUrl: `${modelBase}/openai`, apiKey: "fake-key" } },
        },
      },
    },
  }),
  started: (rig) => {
    ({ base, context, page } = rig);
  },
});

describe.skipIf(!CHROMIUM)("the console's event streams in Chromium", () => {
  it("reconnects after the event stream drops and resumes by Last-Event-ID: the drop is shown, every message appears once", async () => {
    const key = "agent:main:reconnect";
    await api("PATCH", `/v1/sessions/${encodeURIComponent(key)}`, { label: "Reconnect" });
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
});
