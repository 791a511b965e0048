import { randomBytes } from "node:crypto";
import type { BrowserContext, Page } from "playwright-core";
import { describe, expect, inject, it, vi } from "vitest";
import { subagentBindings, useConsole } from "./console-rig";
import { TOKEN_KEY, shot as takeShot } from "./screenshot";
import { readBody, workerCalls } from "./worker-api";

/**
 * A session's children and ledger tasks in the console (console/tree.tsx, console/tasks.tsx), in Chromium
 * against the Worker under `wrangler dev`: the tree with each child's run status, the tasks table, both kept
 * current by the session's event stream (`task` events, docs/events.md) — never by polling the ledger — and
 * a Cancel button that is the page's token's own request: a run token's refusal is shown, the operator's
 * cancel is seen live. The children run on the offline echo model, and on a runtime this test holds until it
 * is cancelled.
 */

const CHROMIUM = inject("chromium");
const OPERATOR = randomBytes(32).toString("base64url");
const ROOT = "agent:main:ledger-watch";
const BOUND = "agent:main:ledger-bound";

let base = "";
let context: BrowserContext;
let page: Page;
let clockFrozenAt = 0;
/** The runs the "slow" runtime accepted: its run token (a run token of that child's session). */
const slowRuns: { runToken: string; sessionKey: string }[] = [];

const { api, invoke } = workerCalls(() => base, OPERATOR);
const spawn = async (requester: string, args: Record<string, unknown>) => {
  const r = await invoke("sessions_spawn", args, requester);
  expect(r.status, JSON.stringify(r)).toBe("accepted");
  return r as { childSessionKey: string; runId: string };
};
const tasksOf = async (key: string) =>
  (await api("GET", `/v1/sessions/${encodeURIComponent(key)}/tasks?recentMinutes=10080`)).tasks as any[];
const subagentsTab = (key: string) => new URL(`/console/#/session/${encodeURIComponent(key)}/subagents`, base).href;

const shot = (name: string) => takeShot({ page, context, clockFrozenAt, token: OPERATOR }, name);

useConsole({
  token: OPERATOR,
  signIn: "context",
  serve: async (req, res) => {
    const run = JSON.parse(await readBody(req));
    slowRuns.push({ runToken: run.runToken, sessionKey: run.sessionKey });
    res.writeHead(202).end();
  },
  bindings: (hookBase) =>
    subagentBindings([
      { id: "main", name: "Main", default: true },
      { id: "slow", name: "Slow", runtime: { type: "webhook", url: `${hookBase}/slow` } },
    ]),
  started: (rig) => {
    ({ base, context, page, clockFrozenAt } = rig);
  },
});

describe.skipIf(!CHROMIUM)("a session's children and tasks in the console", () => {
  it("shows the children and tasks, follows them live from the event stream, and cancels with the token's own rights", async () => {
    await api("PATCH", `/v1/sessions/${encodeURIComponent(ROOT)}`, { label: "Ledger watch" });
    const notes = await spawn(ROOT, { task: "write the notes", label: "notes" });
    await api("GET", `/v1/runs/${notes.runId}/wait?timeoutMs=20000`);
    const detail = await spawn(notes.childSessionKey, { task: "check the detail", label: "detail" });
    await api("GET", `/v1/runs/${detail.runId}/wait?timeoutMs=20000`);
    const survey = await spawn(ROOT, {
      task: "a long survey of every framework",
      label: "long survey",
      agentId: "slow",
    });
    await vi.waitFor(() => expect(slowRuns).toHaveLength(1), { timeout: 20_000 });
    // The survey hands a part on to a grandchild that also runs until cancelled.
    const dig = await spawn(survey.childSessionKey, { task: "dig deeper", label: "deep dig", agentId: "slow" });
    await vi.waitFor(() => expect(slowRuns).toHaveLength(2), { timeout: 20_000 });
    // The ledger and the index settle behind each change: the picture is taken once both stand still.
    await vi.waitFor(
      async () => {
        const tasks = await tasksOf(ROOT);
        expect(tasks.map((t) => [t.label, t.status, t.deliveryStatus === "pending"]).sort()).toEqual([
          ["long survey", "running", true],
          ["notes", "succeeded", false],
        ]);
        const tree = await api("GET", `/v1/sessions/${encodeURIComponent(ROOT)}/tree`);
        expect(tree.nodes).toHaveLength(5);
        expect(tree.nodes.find((n: any) => n.label === "deep dig")?.status).toBe("running");
      },
      { timeout: 30_000, interval: 200 },
    );

    const ledgerReads: string[] = [];
    page.on("request", (r) => {
      if (/\/v1\/sessions\/[^/]+\/tasks\?/.test(r.url())) ledgerReads.push(r.url());
    });
    await page.goto(subagentsTab(ROOT));
    await expect.poll(() => page.getByTestId("stream-state").textContent(), { timeout: 20_000 }).toBe("live");
    const rows = page.getByTestId("tasks").locator("tbody tr");
    await expect.poll(() => rows.count(), { timeout: 20_000 }).toBe(2);
    const row = (label: string) => rows.filter({ hasText: label });
    const cells = (label: string) => row(label).locator("td").allInnerTexts();
    expect((await cells("long survey")).slice(0, 3)).toEqual([
      "subagent",
      `long survey\na long survey of every framework\n${survey.childSessionKey}`,
      "running",
    ]);
    expect((await cells("notes")).slice(0, 3)).toEqual([
      "subagent",
      `notes\nwrite the notes\n${notes.childSessionKey}`,
      "succeeded",
    ]);
    expect(await row("long survey").getByRole("button", { name: "Cancel task long survey" }).count()).toBe(1);
    expect(await row("notes").getByRole("button").count()).toBe(0);
    // The tree: the children and the grandchild, each with its run status.
    const svg = page.getByTestId("subagent-tree");
    const node = (key: string) => svg.locator(`g[data-node="${key}"]`);
    await expect.poll(() => svg.locator("g[data-node]").count(), { timeout: 20_000 }).toBe(5);
    expect(await svg.getAttribute("aria-label")).toBe(`Sub-agent tree of ${ROOT}: 4 sub-agents`);
    expect(await node(notes.childSessionKey).getAttribute("data-status")).toBe("done");
    expect(await node(detail.childSessionKey).getAttribute("data-status")).toBe("done");
    expect(await node(survey.childSessionKey).getAttribute("data-status")).toBe("running");
    expect(await node(dig.childSessionKey).getAttribute("data-status")).toBe("running");
    // Tall enough for the tree and the table in one picture (the fresh render compared with it gets the same size).
    await page.setViewportSize({ width: 1280, height: 1100 });
    await shot("subagent-tasks");
    await page.setViewportSize({ width: 1280, height: 800 });

    // Live: a child spawned while the page is open appears and finishes, with no re-read of the ledger.
    await page.evaluate("window.__notReloaded = true");
    // What the page read of the ledger while opening (it reads once more when its stream opens, as for history).
    const readsOnOpen = ledgerReads.length;
    expect(readsOnOpen).toBeGreaterThan(0);
    const summary = await spawn(ROOT, { task: "summarise the notes", label: "summary" });
    await expect.poll(() => row("summary").getAttribute("data-status"), { timeout: 30_000 }).toBe("succeeded");
    await expect
      .poll(() => node(summary.childSessionKey).getAttribute("data-status"), { timeout: 30_000 })
      .toBe("done");

    // A run token (the survey's own, as its runtime got it) may read its session's ledger but not cancel:
    // the refusal is the server's, shown as such, and the task runs on.
    const asRun = await context.newPage();
    const runToken = slowRuns[0].runToken;
    await asRun.addInitScript(([key, token]) => sessionStorage.setItem(key, token), [TOKEN_KEY, runToken]);
    await asRun.goto(subagentsTab(survey.childSessionKey));
    const digRow = asRun.getByTestId("tasks").locator("tbody tr").filter({ hasText: "deep dig" });
    await expect.poll(() => digRow.getAttribute("data-status"), { timeout: 20_000 }).toBe("running");
    await digRow.getByRole("button", { name: "Cancel task deep dig" }).click();
    await expect.poll(() => asRun.getByText("This token may not cancel tasks").count(), { timeout: 20_000 }).toBe(1);
    expect(await asRun.getByRole("button", { name: /^Cancel task/ }).count()).toBe(0);
    expect((await tasksOf(survey.childSessionKey))[0].status).toBe("running");
    await asRun.close();

    // The operator's cancel, from the page: the survey and the grandchild below it end, seen live.
    await row("long survey").getByRole("button", { name: "Cancel task long survey" }).click();
    await expect.poll(() => row("long survey").getAttribute("data-status"), { timeout: 30_000 }).toBe("cancelled");
    expect((await cells("long survey"))[6]).toBe("Cancelled by operator.");
    expect(await row("long survey").getByRole("button").count()).toBe(0);
    await expect
      .poll(() => node(survey.childSessionKey).getAttribute("data-status"), { timeout: 30_000 })
      .toBe("killed");
    await vi.waitFor(async () => expect((await tasksOf(survey.childSessionKey))[0].status).toBe("cancelled"), {
      timeout: 30_000,
    });
    // Everything after the page opened came over the event stream: the ledger was not read again (no polling,
    // no re-read after the cancel), and the page never reloaded.
    expect(ledgerReads).toHaveLength(readsOnOpen);
    expect(await page.evaluate("window.__notReloaded")).toBe(true);
  });

  it("shows at most 50 tasks and says when the ledger holds more; any kind alike, every text as text", async () => {
    await api("PATCH", `/v1/sessions/${encodeURIComponent(BOUND)}`, { label: "Busy ledger" });
    const now = Date.now();
    // The ledger's answer for a busy session (51 rows: the page asks for one more than it shows), with the
    // kinds a ledger may hold and one the console has never heard of.
    const kinds = ["subagent", "yield", "send", "custom-runtime"];
    const tasks = Array.from({ length: 51 }, (_, i) => ({
      taskId: `t-${String(i).padStart(2, "0")}`,
      runtime: kinds[i % kinds.length],
      requesterSessionKey: BOUND,
      ownerKey: BOUND,
      scopeKind: "session",
      task: i === 0 ? '<img src=x onerror="window.__injected=1"> fetch' : `task number ${i}`,
      label: i === 0 ? "<b>bold?</b>" : undefined,
      status: i % 3 === 0 ? "running" : "succeeded",
      deliveryStatus: "not_applicable",
      notifyPolicy: "silent",
      createdAt: now - i * 1000,
    }));
    await page.route(/\/v1\/sessions\/[^/]+\/tasks\?/, (route) =>
      route.fulfill({ json: { sessionKey: BOUND, tasks }, headers: { "content-type": "application/json" } }),
    );
    await page.goto(subagentsTab(BOUND));
    const rows = page.getByTestId("tasks").locator("tbody tr");
    await expect.poll(() => rows.count(), { timeout: 20_000 }).toBe(50);
    expect(await page.getByTestId("tasks-more").textContent()).toContain("Only the newest 50 tasks are shown");
    // Newest first; the oldest one is the one left out.
    expect(await rows.first().getAttribute("data-task")).toBe("t-00");
    expect(await page.locator('tr[data-task="t-50"]').count()).toBe(0);
    expect(await rows.locator("td:first-child").allInnerTexts()).toEqual(
      Array.from({ length: 50 }, (_, i) => kinds[i % kinds.length]),
    );
    // Text stays text: no element was made of it, no script ran.
    const first = rows.first().locator("td").nth(1);
    expect(await first.textContent()).toBe('<b>bold?</b><img src=x onerror="window.__injected=1"> fetch');
    expect(await first.locator("img, b").count()).toBe(0);
    expect(await page.evaluate("window.__injected")).toBeUndefined();
    await page.unroute(/\/v1\/sessions\/[^/]+\/tasks\?/);
  });
});
