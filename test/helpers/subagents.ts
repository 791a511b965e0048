import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { vi } from "vitest";
import type { SessionObject } from "../../src/session/session-object";
import { completion } from "./fake-provider";
import { sessionStub } from "./http";
import { quiesce } from "./quiesce";

/**
 * Sub-agent test kit: a fake model provider and channel receiver on one `fetch` spy (the Worker, its
 * objects and the tests share an isolate), and drivers that move a child through its lifecycle with
 * server-side waits and forced alarms — never sleeps.
 */
export const MODEL_BASE = "https://llm.test/v1";
export const HOOK_URL = "https://hooks.test/webchat";

export type ModelStep = "task" | "announce" | "other";
/** What the fake model answers: text, an error (HTTP 400 → the run fails), a tool call (or several in one response), or "hang" (until aborted). */
export type ModelAnswer =
  | string
  | { error: string }
  | { toolCall: { name: string; args: unknown } }
  | { toolCalls: { name: string; args: unknown }[] }
  | "hang";

export interface ModelCall {
  step: ModelStep;
  lastUser: string;
  system: string;
  hasToolResult: boolean;
  /** Tool results the request carries (the steps of this run so far). */
  toolResults: number;
}

export interface Fakes {
  model: ModelCall[];
  hooks: { body: any; headers: Record<string, string> }[];
  hookStatus: () => number;
}

export function subagentConfig(
  extra: {
    defaults?: Record<string, any>;
    subagents?: Record<string, any>;
    list?: any[];
    tools?: Record<string, any>;
    channels?: Record<string, any>;
    [k: string]: any;
  } = {},
) {
  const { defaults, subagents, list, tools, channels, ...rest } = extra;
  return {
    agents: {
      // A wide sub-agent lane unless a test sets one: tests of other things must not queue behind children
      // that earlier tests in the file left running (the lane is gateway-wide; test/lane/subagent-lane.test.ts).
      defaults: { model: "fake/m1", ...(defaults ?? {}), subagents: { maxConcurrent: 1_000, ...(subagents ?? {}) } },
      list: list ?? [{ id: "main", default: true }, { id: "research" }],
    },
    models: {
      providers: { fake: { baseUrl: MODEL_BASE, apiKey: "k", models: [{ id: "m1", cost: { input: 3, output: 15 } }] } },
    },
    channels: channels ?? { webchat: { outbound: { url: HOOK_URL } } },
    tools: tools ?? {},
    ...rest,
  };
}

/** A fake model answer with the usage figures the announce stats tests rely on. */
function reply(
  request: Parameters<typeof completion>[3],
  text: string,
  toolCall?: { name: string; args: unknown } | { name: string; args: unknown }[],
): Response {
  const calls = toolCall === undefined ? [] : Array.isArray(toolCall) ? toolCall : [toolCall];
  const message =
    calls.length > 0
      ? {
          content: null,
          tool_calls: calls.map((c, i) => ({
            id: `call_${i + 1}`,
            function: { name: c.name, arguments: JSON.stringify(c.args) },
          })),
        }
      : { content: text };
  return completion(message, calls.length > 0 ? "tool_calls" : "stop", { prompt: 1200, completion: 34 }, request);
}

function textOfContent(c: unknown): string {
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p: any) => (typeof p?.text === "string" ? p.text : "")).join("");
  return "";
}

/** Rejecters of requests held open by "hang": an evicted object never aborts them, so tests release them. */
const HANGING = new Set<(err: Error) => void>();

/** Fail every request still held open (call in afterEach): nothing is left pending when a test file ends. */
export function releaseHangingRequests(): void {
  for (const reject of HANGING) reject(new Error("test ended"));
  HANGING.clear();
}

export function installFakes(answer: (call: ModelCall) => ModelAnswer | Promise<ModelAnswer>): Fakes {
  const fakes: Fakes = { model: [], hooks: [], hookStatus: () => 200 };
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: any, init?: any) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.toString() : input.url;
    const raw = typeof init?.body === "string" ? init.body : input instanceof Request ? await input.clone().text() : "";
    if (url.startsWith("https://hooks.test")) {
      const headers: Record<string, string> = {};
      new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined)).forEach((v, k) => {
        headers[k] = v;
      });
      fakes.hooks.push({ body: JSON.parse(raw), headers });
      return new Response("", { status: fakes.hookStatus() });
    }
    if (!url.startsWith(MODEL_BASE)) throw new Error(`unexpected fetch ${url}`);
    const body = JSON.parse(raw);
    const messages: any[] = body.messages ?? [];
    const system = messages
      .filter((m) => m.role === "system")
      .map((m) => textOfContent(m.content))
      .join("\n");
    const users = messages.filter((m) => m.role === "user");
    const lastUser = textOfContent(users[users.length - 1]?.content);
    const step: ModelStep = system.includes("Sub-agent announce step:")
      ? "announce"
      : lastUser.includes("[Subagent Task]:")
        ? "task"
        : "other";
    const toolResults = messages.filter((m) => m.role === "tool").length;
    const call: ModelCall = { step, lastUser, system, hasToolResult: toolResults > 0, toolResults };
    fakes.model.push(call);
    // An answer may wait (a test holds a model call open until something else happened first).
    const a = await answer(call);
    if (a === "hang") {
      const signal: AbortSignal | undefined = init?.signal ?? (input instanceof Request ? input.signal : undefined);
      return new Promise<Response>((_, reject) => {
        HANGING.add(reject);
        signal?.addEventListener("abort", () => reject(signal.reason ?? new Error("aborted")));
      });
    }
    if (typeof a === "string") return reply(body, a);
    if ("toolCall" in a) return reply(body, "", a.toolCall);
    if ("toolCalls" in a) return reply(body, "", a.toolCalls);
    return new Response(JSON.stringify({ error: { message: a.error } }), {
      status: 400,
      headers: { "content-type": "application/json" },
    });
  });
  return fakes;
}

export interface ChildState {
  exists: boolean;
  meta: any;
  pendingRuns: string[];
  runs: { id: string; kind: string; status: string }[];
  flows: { id: string; state: string }[];
  timers: { kind: string; ref: string; due_at: number }[];
  attachments: string[];
}

export async function childState(key: string): Promise<ChildState> {
  return runInDurableObject(sessionStub(key), async (obj: SessionObject, state) => {
    const sql = state.storage.sql;
    const hasSchema =
      sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'flows'").toArray().length > 0;
    if (!hasSchema)
      return { exists: false, meta: null, pendingRuns: [], runs: [], flows: [], timers: [], attachments: [] };
    const runs = sql
      .exec<{ id: string; kind: string; status: string }>("SELECT id, kind, status FROM runs ORDER BY qseq")
      .toArray();
    return {
      exists: Boolean(obj.meta),
      meta: obj.meta,
      pendingRuns: runs.filter((r) => r.status === "queued" || r.status === "running").map((r) => r.id),
      runs,
      flows: sql.exec<{ id: string; state: string }>("SELECT id, state FROM flows ORDER BY created_at").toArray(),
      timers: sql.exec<{ kind: string; ref: string; due_at: number }>("SELECT kind, ref, due_at FROM timers").toArray(),
      attachments: sql
        .exec<{ name: string }>("SELECT name FROM attachments ORDER BY name")
        .toArray()
        .map((r) => r.name),
    };
  });
}

/** A session's own announce flow (`announce:<taskRunId>`), as opposed to one received from a child (`announce:v1:<child>:<run>`). */
export function isOwnAnnounceFlow(id: string): boolean {
  return id.startsWith("announce:") && !id.startsWith("announce:v1:");
}

const DRIVEN = new Set(["subagent-announce", "subagent-handoff", "subagent-delete", "task-report"]);

/**
 * Drive a child until its announce is handed off (and, for cleanup "delete", it is gone): wait for
 * its runs server-side, then force its alarm for the due lifecycle timers. A hung run is not waited
 * for forever: `waitMs` bounds each wait (callers end such runs with `advance`).
 */
export async function settle(childKey: string, opts: { rounds?: number; waitMs?: number } = {}): Promise<ChildState> {
  const stub = sessionStub(childKey);
  for (let i = 0; i < (opts.rounds ?? 30); i++) {
    const s = await childState(childKey);
    if (!s.exists) return s;
    // Its own announce flows ("announce:<run>"), not the announces its children handed to it ("announce:v1:…").
    const own = s.flows.filter((f) => isOwnAnnounceFlow(f.id));
    const announced = own.length > 0 && own.every((f) => f.state === "done");
    if (announced && !s.timers.some((t) => DRIVEN.has(t.kind)) && s.pendingRuns.length === 0) return s;
    for (const id of s.pendingRuns) await stub.waitRun(id, opts.waitMs ?? 10_000);
    await runDurableObjectAlarm(stub);
  }
  throw new Error(`child ${childKey} did not settle: ${JSON.stringify(await childState(childKey))}`);
}

/** User messages recorded in a session's transcript with internal_system provenance from sessions_spawn. */
export async function announcesIn(key: string, fromChild?: string): Promise<{ text: string; provenance: any }[]> {
  return runInDurableObject(sessionStub(key), async (_obj: SessionObject, state) => {
    const hasSchema =
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'messages'").toArray()
        .length > 0;
    if (!hasSchema) return [];
    return state.storage.sql
      .exec<{ json: string }>("SELECT json FROM messages WHERE role = 'user' ORDER BY seq")
      .toArray()
      .map((r) => JSON.parse(r.json))
      .filter(
        (m) =>
          m.provenance?.kind === "internal_system" &&
          m.provenance?.sourceTool === "sessions_spawn" &&
          (!fromChild || m.provenance.sourceSessionKey === fromChild),
      )
      .map((m) => ({ text: textOfContent(m.content), provenance: m.provenance }));
  });
}

/** Outbox rows of a session. */
export async function outboxOf(
  key: string,
): Promise<{ kind: string; status: string; attempts: number; idempotency_key: string; last_error: string | null }[]> {
  return runInDurableObject(sessionStub(key), async (_obj: SessionObject, state) => {
    const has =
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'outbox'").toArray()
        .length > 0;
    if (!has) return [];
    return state.storage.sql
      .exec<any>("SELECT kind, status, attempts, idempotency_key, last_error FROM outbox ORDER BY created_at")
      .toArray();
  });
}

/**
 * Wait until the session `key` (default: the operator's `main`, the requester of every spawn without a
 * sessionKey) has no child holding a slot. Call in afterEach before resetting the config and fakes: a child
 * left running finishes on them, where after the reset its announce would fail on a model that no longer
 * exists and keep its slot — which the next tests of the file would count against `maxChildrenPerAgent`.
 */
export async function settleChildren(key = "agent:main:main", timeoutMs = 10_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const active = await runInDurableObject(sessionStub(key), (_obj: SessionObject, state) => {
        const sql = state.storage.sql;
        if (sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'flows'").toArray().length === 0)
          return 0;
        return sql
          .exec<{ n: number }>("SELECT COUNT(*) AS n FROM flows WHERE kind = 'subagent_child' AND state = 'running'")
          .one().n;
      });
      if (active > 0) throw new Error(`${key} still has ${active} running children`);
    },
    { timeout: timeoutMs, interval: 20 },
  );
}

/**
 * For a file whose tests leave children behind, in its afterEach (it runs before test/setup.ts resets the
 * config and fakes): fail the calls the fakes still hold, then wait until the operator's main has no child
 * holding a slot.
 */
export async function releaseAndSettleChildren(): Promise<void> {
  releaseHangingRequests();
  await settleChildren();
}

/**
 * For a file whose tests end with background work in flight (slot release, index write), in its afterEach:
 * fail the calls the fakes still hold, then wait until no object has work left before the next test or
 * vitest's teardown (test/helpers/quiesce.ts).
 */
export async function releaseAndQuiesce(): Promise<void> {
  releaseHangingRequests();
  await quiesce();
}

/** A fresh requester key per test (storage is shared within a file). */
export function requesterKey(tag: string): string {
  return `agent:main:webchat:direct:${tag}-${crypto.randomUUID().slice(0, 8)}`;
}
