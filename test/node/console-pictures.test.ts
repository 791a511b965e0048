import { randomBytes } from "node:crypto";
import type { BrowserContext, Page } from "playwright-core";
import { describe, expect, inject, it, vi } from "vitest";
import { subagentBindings, useConsole } from "./console-rig";
import { shot as takeShot } from "./screenshot";
import { readBody, workerCalls } from "./worker-api";

/**
 * The console's pictures in Chromium (test/node/chromium.ts says which one): a session's sub-agent tree
 * (console/tree.tsx) and an agent-to-agent exchange (console/exchange.tsx), drawn as SVG from what the API
 * serves, against the Worker under `wrangler dev`. The agents here are webhook runtimes answered by this
 * test (a scripted conversation, with token usage so the priced model shows a cost), plus the offline echo
 * model and one runtime that keeps its run going until the test completes it.
 */

const CHROMIUM = inject("chromium");
const OPERATOR = randomBytes(32).toString("base64url");
const ROOT = "agent:main:orchestrator";
const PLANNER = "agent:planner:main";
const RESEARCHER = "agent:researcher:main";

/** What the scripted runtimes answer, by the words of the message they were given. */
const SCRIPT: [string, string][] = [
  ["Find the three biggest Rust web frameworks", "axum, actix-web and rocket."],
  ["axum, actix-web and rocket.", "Which of them is fastest?"],
  ["Which of them is fastest?", "actix-web, in most public benchmarks."],
  ["actix-web, in most public benchmarks.", "REPLY_SKIP"],
  ["benchmark the frameworks", "3 benchmarks run: actix-web leads."],
];

let base = "";
let context: BrowserContext;
let page: Page;
let clockFrozenAt = 0;
/** The runs the "slow" runtime accepted and has not completed: its completion path and run token. */
const slowRuns: { completePath: string; runToken: string }[] = [];

const { api, invoke } = workerCalls(() => base, OPERATOR);

const shot = (name: string) => takeShot({ page, context, clockFrozenAt, token: OPERATOR }, name);

useConsole({
  token: OPERATOR,
  signIn: "context",
  serve: async (req, res) => {
    const run = JSON.parse(await readBody(req));
    if (req.url === "/slow") {
      slowRuns.push({ completePath: run.completePath, runToken: run.runToken });
      return void res.writeHead(202).end();
    }
    const message: string = run.message;
    const scripted = SCRIPT.find(([heard]) => message.includes(heard))?.[1];
    // Announce steps (agent-to-agent and sub-agent) stay silent; anything else is acknowledged.
    const reply = scripted ?? (/announce step/i.test(message) ? "ANNOUNCE_SKIP" : "noted");
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ reply, model: "m1", usage: { input: 1200, output: 300 } }));
  },
  bindings: (hookBase) =>
    subagentBindings(
      [
        { id: "main", name: "Main", default: true },
        { id: "planner", name: "Planner", runtime: { type: "webhook", url: `${hookBase}/runtime` } },
        {
          id: "researcher",
          name: "Researcher",
          model: "priced/m1",
          runtime: { type: "webhook", url: `${hookBase}/runtime` },
        },
        { id: "slow", name: "Slow", runtime: { type: "webhook", url: `${hookBase}/slow` } },
      ],
      {
        // The researcher's model has prices, so its sessions show a cost (the runtime reports the tokens).
        models: {
          providers: {
            priced: {
              baseUrl: `${hookBase}/unused`,
              apiKey: "k",
              models: [{ id: "m1", cost: { input: 3, output: 15 } }],
            },
          },
        },
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: ["planner", "researcher"] } },
      },
    ),
  started: (rig) => {
    ({ base, context, page, clockFrozenAt } = rig);
  },
});

describe.skipIf(!CHROMIUM)("the console's pictures in Chromium", () => {
  it("draws a session's sub-agent tree — children, status, run time, tokens and cost — and follows it live", async () => {
    await api("PATCH", `/v1/sessions/${encodeURIComponent(ROOT)}`, { label: "Orchestrator" });
    const spawn = async (requester: string, args: Record<string, unknown>) => {
      const r = await invoke("sessions_spawn", args, requester);
      expect(r.status, JSON.stringify(r)).toBe("accepted");
      return r as { childSessionKey: string; runId: string };
    };
    const bench = await spawn(ROOT, { task: "benchmark the frameworks", label: "benchmarks", agentId: "researcher" });
    await api("GET", `/v1/runs/${bench.runId}/wait?timeoutMs=20000`);
    const notes = await spawn(ROOT, { task: "write the notes", label: "notes" });
    await api("GET", `/v1/runs/${notes.runId}/wait?timeoutMs=20000`);
    // The benchmarks sub-agent is an orchestrator (depth 1 of 2): it hands a part on.
    const detail = await spawn(bench.childSessionKey, { task: "check the detail", label: "detail" });
    await api("GET", `/v1/runs/${detail.runId}/wait?timeoutMs=20000`);
    const survey = await spawn(ROOT, { task: "a long survey", label: "long survey", agentId: "slow" });
    await vi.waitFor(() => expect(slowRuns).toHaveLength(1), { timeout: 20_000 });
    // The index is written behind each change: wait until the tree has every node and its run's figures.
    await vi.waitFor(
      async () => {
        const tree = await api("GET", `/v1/sessions/${encodeURIComponent(ROOT)}/tree`);
        expect(tree.nodes).toHaveLength(5);
        expect(tree.nodes.find((n: any) => n.label === "benchmarks").costUsd).toBeGreaterThan(0);
        expect(tree.nodes.find((n: any) => n.label === "long survey").status).toBe("running");
      },
      { timeout: 30_000, interval: 200 },
    );

    await page.goto(new URL(`/console/#/session/${encodeURIComponent(ROOT)}/subagents`, base).href);
    const svg = page.getByTestId("subagent-tree");
    await svg.waitFor();
    expect(await svg.getAttribute("aria-label")).toBe(`Sub-agent tree of ${ROOT}: 4 sub-agents`);
    const node = (key: string) => svg.locator(`g[data-node="${key}"]`);
    await expect.poll(() => svg.locator("g[data-node]").count()).toBe(5);
    // The outline: each child right under its parent, one column further right.
    const order = await svg.locator("g[data-node]").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-node")));
    expect(order[0]).toBe(ROOT);
    expect(order.indexOf(detail.childSessionKey)).toBe(order.indexOf(bench.childSessionKey) + 1);
    const facts = (key: string) => node(key).locator("text.facts").textContent();
    expect(await facts(bench.childSessionKey)).toMatch(/^done · \d+ s · [\d.]+k tok · \$\d+\.\d+$/);
    expect(await facts(notes.childSessionKey)).toMatch(/^done · \d+ s · \d+ tok$/); // echo: no prices, no cost
    expect(await node(survey.childSessionKey).getAttribute("data-status")).toBe("running");
    expect(await node(survey.childSessionKey).locator("text.name").textContent()).toBe("long survey");
    await shot("subagent-tree");

    // Live: the long survey finishes while the page is open; its box turns "done" without a reload.
    await page.evaluate("window.__notReloaded = true");
    const { completePath, runToken } = slowRuns[0];
    await api("POST", completePath, { reply: "survey finished" }, runToken);
    await expect.poll(() => node(survey.childSessionKey).getAttribute("data-status"), { timeout: 30_000 }).toBe("done");
    expect(await page.evaluate("window.__notReloaded")).toBe(true);
    // A box leads to that session's own tree.
    await node(bench.childSessionKey).click();
    // The new page reads that session's tree first (vitest's default poll gives up after 1 s: too short on a
    // loaded machine).
    await expect
      .poll(() => page.locator("svg[data-testid=subagent-tree] g[data-node]").count(), { timeout: 20_000 })
      .toBe(2);
  });

  it("draws an agent-to-agent exchange as the sequence of its turns", async () => {
    await api("PATCH", `/v1/sessions/${encodeURIComponent(RESEARCHER)}`, { label: "Research desk" });
    const sent = await invoke(
      "sessions_send",
      { sessionKey: RESEARCHER, message: "Find the three biggest Rust web frameworks", timeoutSeconds: 20 },
      PLANNER,
    );
    expect([sent.status, sent.reply]).toEqual(["ok", "axum, actix-web and rocket."]);
    // The ping-pong goes on after the send's answer: wait for its last turn to reach the planner.
    await vi.waitFor(
      async () => {
        const h = await api("GET", `/v1/sessions/${encodeURIComponent(PLANNER)}/history`);
        expect(JSON.stringify(h.messages)).toContain("actix-web, in most public benchmarks.");
      },
      { timeout: 30_000, interval: 200 },
    );

    await page.goto(new URL(`/console/#/session/${encodeURIComponent(PLANNER)}/exchanges`, base).href);
    const svg = page.getByTestId("exchange");
    await expect.poll(() => svg.locator("g[data-turn]").count(), { timeout: 20_000 }).toBe(4);
    const turns = await svg
      .locator("g[data-turn]")
      .evaluateAll((gs) => gs.map((g) => [g.getAttribute("data-from"), g.querySelector("text")?.textContent]));
    expect(turns).toEqual([
      [PLANNER, "1. Find the three biggest Rust web frameworks"],
      [RESEARCHER, "2. axum, actix-web and rocket."],
      [PLANNER, "3. Which of them is fastest?"],
      [RESEARCHER, "4. actix-web, in most public benchmarks."],
    ]);
    // The planner's closing REPLY_SKIP sent nothing on: it is no turn.
    expect(await svg.getAttribute("aria-label")).toBe(`Exchange between ${PLANNER} and ${RESEARCHER}: 4 turns`);
    await shot("exchange");

    // The same exchange seen from the other side: the same turns, the lifelines swapped.
    await page.goto(new URL(`/console/#/session/${encodeURIComponent(RESEARCHER)}/exchanges`, base).href);
    await expect.poll(() => page.getByTestId("exchange").locator("g[data-turn]").count(), { timeout: 20_000 }).toBe(4);
  });
});
