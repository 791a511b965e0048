import { randomBytes } from "node:crypto";
import type { BrowserContext, Page } from "playwright-core";
import { describe, expect, inject, it, vi } from "vitest";
import { useConsole } from "./console-rig";
import { fakeChatModel } from "./fake-chat-model";
import { TOKEN_KEY, shot as takeShot } from "./screenshot";
import { callWorker, readBody } from "./worker-api";

/**
 * The operator console (/console) in a real browser: Chromium (test/node/chromium.ts says which one) driven
 * by playwright-core, against the Worker under `wrangler dev` (static assets routed as in production). The
 * screenshots are written to test-results/screenshots/ (ignored by git); `npm run screenshots` copies them
 * to docs/screenshots/, so the README's pictures are of the console as it is. They are byte-stable from run
 * to run (see `shot`), so a committed picture changes only when the console's look does. How the console
 * follows its event streams through drops, resumes and deletions: test/node/console-streams.test.ts.
 */

const CHROMIUM = inject("chromium");
const OPERATOR = randomBytes(32).toString("base64url");
const HOOK_SECRET = `whsec_${Buffer.from("browser-test-webhook-secret-0001").toString("base64")}`;
const SEEDED = 60; // with 25 rows a page: three pages
const seededKey = (i: number) => `agent:main:seed-${String(i).padStart(2, "0")}`;

let base = "";
let context: BrowserContext;
let page: Page;
// The console's clock stands still at the start of the run (set before anything is seeded): everything the
// console shows happened after it, so each relative time reads "just now" however slow the run is (a time
// ahead of the page's clock reads "just now", console/format.ts).
let clockFrozenAt = 0;

// A channel webhook under the test's control: it first answers 302 (a redirect is a dead letter at once,
// src/channels/webhook.ts), then 200 once the test fixes it, so a retried delivery can succeed.
let hookAnswer = 302;
const hookBodies: any[] = [];

// The "fake/m1" model (test/node/fake-chat-model.ts): configured here, so the agents page shows its provider.
const model = fakeChatModel();

const api = (method: string, path: string, body?: unknown) => callWorker(base, OPERATOR, method, path, body);

/** A byte-stable screenshot of the current view (test/node/screenshot.ts). */
const shot = (name: string, opts?: { signedIn: boolean }) =>
  takeShot({ page, context, clockFrozenAt, token: OPERATOR }, name, opts);

useConsole({
  token: OPERATOR,
  // The test signs in through the form.
  signIn: "none",
  serve: async (req, res) => {
    const body = JSON.parse(await readBody(req));
    // The "slow" agent's webhook runtime: accepts each run and never completes it, so it stays running.
    if (req.url === "/runtime") return void res.writeHead(202).end();
    if (req.url === "/openai/chat/completions") return model.answer(body, res);
    hookBodies.push(body);
    res.writeHead(hookAnswer, hookAnswer === 302 ? { Location: "http://127.0.0.1:1/" } : {}).end("ok");
  },
  bindings: (hookBase) => ({
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
        channels: { hook: { outbound: { url: `${hookBase}/deliver`, secret: HOOK_SECRET } } },
        // A session set to "fake/m1" is answered by `answerChatCompletion` (above).
        models: {
          providers: { fake: { api: "openai-completions", baseUrl: `${hookBase}/openai`, apiKey: "fake-key" } },
        },
        // Not supported here: shows up as a configuration warning on the agents page.
        session: { maintenance: { mode: "enforce" } },
      },
    },
  }),
  seed: async (workerBase) => {
    base = workerBase;
    // Sessions to page through: PATCH creates a session with its label, no run needed.
    // One after another, so the listing's order (newest first) and the screenshots are the same every run.
    for (let i = 0; i < SEEDED; i++)
      await api("PATCH", `/v1/sessions/${encodeURIComponent(seededKey(i))}`, { label: `Seed ${i}` });
    // The index is written behind each session's change; wait until it lists them all.
    await vi.waitFor(
      async () =>
        expect((await api("GET", "/v1/sessions?agentId=main&limit=1000")).count).toBeGreaterThanOrEqual(SEEDED),
      { timeout: 30_000, interval: 200 },
    );
  },
  started: (rig) => {
    ({ base, context, page, clockFrozenAt } = rig);
    // The console must load nothing from another origin (no CDN).
    page.on("request", (req) => {
      if (!req.url().startsWith(base) && !req.url().startsWith("data:")) foreign.push(req.url());
    });
  },
});

const foreign: string[] = [];

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
