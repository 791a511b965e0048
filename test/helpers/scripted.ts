import { expect, vi } from "vitest";
import type { DeliveryStatus } from "../../src/channels/outbox-rows";
import { setConfigOverride } from "../../src/config/load";
import { callExtension } from "../../src/session/extensions";
import { completion } from "./fake-provider";
import { sessionStub } from "./http";

/**
 * A scripted model and a fake channel receiver on one `fetch` spy (the Worker, its objects and the
 * tests share an isolate). The model's reply is chosen per session and step from the request the
 * runner sends: the system prompt names the session and carries the agent-to-agent step context.
 */
export const MODEL_BASE = "https://llm.test/v1";
export const HOOK_BASE = "https://hooks.test";

export type StepKind = "primary" | "turn" | "announce" | "plain";

export interface ModelRequest {
  session: string;
  kind: StepKind;
  turn?: number;
  lastUser: string;
  system: string;
}

/** A reply text, an Error (the provider answers 400: the run fails), or a promise of either (hold a run open). */
export type Script = (req: ModelRequest) => string | Error | Promise<string | Error>;

export interface HookCall {
  url: string;
  headers: Record<string, string>;
  rawBody: string;
  body: any;
}

export function baseConfig(extra: Record<string, any> = {}): Record<string, any> {
  const { session, tools, channels, agents, ...rest } = extra;
  // Agents as OpenClaw 2026 keys them; a test's `agents.list` is written as entries here (no legacy-form warning).
  const { list, ...agentsRest } = agents ?? {};
  const roster: { id: string }[] = list ?? [{ id: "main", default: true }, { id: "research" }];
  return {
    session: { agentToAgent: { maxPingPongTurns: 2 }, ...(session ?? {}) },
    tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true }, ...(tools ?? {}) },
    agents: {
      defaults: { model: "fake/m1" },
      entries: Object.fromEntries(roster.map(({ id, ...a }) => [id, a])),
      ...agentsRest,
    },
    models: { providers: { fake: { baseUrl: MODEL_BASE, apiKey: "k" } } },
    channels: channels ?? { discord: { outbound: { url: `${HOOK_BASE}/discord`, secret: "hook-secret" } } },
    ...rest,
  };
}

/** The base config with one agent, `agentId`, as the default (tests that need a fresh agent of their own). */
export function useOneAgent(agentId: string): void {
  setConfigOverride(baseConfig({ agents: { list: [{ id: agentId, default: true }] } }));
}

export function classify(system: string): { kind: StepKind; turn?: number } {
  if (system.includes("Agent-to-agent announce step:")) return { kind: "announce" };
  const turn = /Agent-to-agent reply step:[\s\S]*Turn (\d+) of/.exec(system);
  if (turn) return { kind: "turn", turn: Number(turn[1]) };
  if (system.includes("Agent-to-agent message context:")) return { kind: "primary" };
  return { kind: "plain" };
}

const reply = (text: string, request: any) =>
  completion({ content: text }, "stop", { prompt: 5, completion: 2 }, request);

export interface Fakes {
  model: ModelRequest[];
  /** Compaction summary calls (src/compaction/), answered with a fixed summary and kept out of `model`. */
  summaries: string[];
  hooks: HookCall[];
  /** Status the fake receiver answers with (default 200). */
  hookStatus: (call: HookCall) => number;
}

export function installFakes(script: Script): Fakes {
  const fakes: Fakes = { model: [], summaries: [], hooks: [], hookStatus: () => 200 };
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: any, init?: any) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.toString() : input.url;
    const rawBody = typeof init?.body === "string" ? init.body : input instanceof Request ? await input.text() : "";
    if (url.startsWith(HOOK_BASE)) {
      const headers: Record<string, string> = {};
      new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined)).forEach((v, k) => {
        headers[k] = v;
      });
      const call: HookCall = { url, headers, rawBody, body: JSON.parse(rawBody) };
      fakes.hooks.push(call);
      return new Response("", { status: fakes.hookStatus(call) });
    }
    if (url.startsWith(MODEL_BASE)) {
      const body = JSON.parse(rawBody);
      const system = String(body.messages.find((m: any) => m.role === "system")?.content ?? "");
      const users = body.messages.filter((m: any) => m.role === "user");
      const lastRaw = users.length ? users[users.length - 1].content : "";
      const lastUser = (typeof lastRaw === "string" ? lastRaw : lastRaw.map((p: any) => p.text ?? "").join("")).replace(
        /^\[Inter-session message\][^\n]*\n/,
        "",
      );
      if (system.startsWith("Compaction summary step:")) {
        fakes.summaries.push(lastUser);
        return reply(`summary ${fakes.summaries.length}`, body);
      }
      const session = /Your session: ([^\n]+)\./.exec(system)?.[1] ?? "";
      const req: ModelRequest = { session, ...classify(system), lastUser, system };
      fakes.model.push(req);
      const out = await script(req);
      if (out instanceof Error) {
        return new Response(JSON.stringify({ error: { message: out.message, type: "invalid_request_error" } }), {
          status: 400,
          headers: { "content-type": "application/json" },
        });
      }
      return reply(out, body);
    }
    throw new Error(`unexpected fetch ${url}`);
  });
  return fakes;
}

export async function flowsOf(key: string): Promise<any[]> {
  return callExtension(sessionStub(key), "a2a-flow", "list");
}

/** Until the session's first agent-to-agent flow is done; that flow. */
export async function doneFlow(target: string): Promise<any> {
  return until(async () => {
    const flows = await flowsOf(target);
    expect(flows.length).toBeGreaterThan(0);
    expect(flows[0].step).toBe("done");
    return flows[0];
  });
}

/** Let every flow of a session finish, so no step outlives its test (and its fake model). */
export async function settleFlows(target: string): Promise<void> {
  await until(async () => {
    const f = await flowsOf(target);
    expect(f.length).toBeGreaterThan(0);
    expect(f.every((x) => x.step === "done")).toBe(true);
  });
}

export async function deliveriesOf(key: string, status?: string): Promise<any[]> {
  return (
    await callExtension(sessionStub(key), "outbox", "list", {
      status: status as DeliveryStatus | undefined,
      limit: 100,
    })
  ).deliveries;
}

/** Wait until the (asynchronously advancing) work satisfies `check`. */
export async function until<T>(check: () => Promise<T>, timeout = 15_000): Promise<T> {
  return vi.waitFor(check, { timeout, interval: 10 });
}

/** A promise you resolve later: hold a model call open to interleave restarts and timeouts. */
export function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
