import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentLaneName } from "../../src/lane/subagent-lane";
import { LEASE_MS, RUNTIME_LEASE_MS } from "../../src/session/run-types";
import type { SessionObject } from "../../src/session/session-object";
import { getRequesterSpawnState } from "../../src/spawn/requester-side";
import { HOOKS_URL, installFakeRuntime, runtime } from "../helpers/fake-runtime";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { announcesIn, settle } from "../helpers/subagents";

/**
 * The fault suite (docs/contract.md, "Runs"): model runs, webhook-runtime runs and sub-agents (on a webhook
 * runtime or a model) under evictions, lost executors and SIGNING_SECRET rotations (with and without
 * SIGNING_SECRET_PREVIOUS) at generated points, with runtimes that answer at once, complete later, heartbeat,
 * fail or fall silent. Then time runs on until nothing is left to do, and the suite checks that every run it
 * started ended, every child and lane slot was given back, no session has an open run, and nothing answered 2xx
 * was lost: every accepted message is in its transcript, every child announced exactly once. It prints one line
 * of counts (shown with --silent=false).
 */

const SEED = 21_021;
const ROUNDS = 6;
const ROUND_MS = 3 * 60_000;
const ORIGINAL_SECRET = env.SIGNING_SECRET;

type JobKind = "model" | "webhook" | "subagent-webhook" | "subagent-model";
/** What the fake runtime does with a run: answer at once, complete later, heartbeat then complete, fail, fall silent, or be aborted by the operator. */
type Runtime = "sync" | "complete" | "heartbeat" | "error" | "silent" | "abort";
interface JobPlan {
  kind: JobKind;
  runtime: Runtime;
  completeAt: number;
}
interface RoundPlan {
  evict: number[];
  rotate: "none" | "with-previous" | "without-previous";
  loseExecutor: number | null;
}

const jobArb = fc.record({
  kind: fc.constantFrom<JobKind>("model", "webhook", "subagent-webhook", "subagent-model"),
  runtime: fc.constantFrom<Runtime>("sync", "complete", "heartbeat", "error", "silent", "abort"),
  completeAt: fc.integer({ min: 0, max: ROUNDS - 1 }),
});
const JOBS = 24;
const roundArb = fc.record({
  evict: fc.uniqueArray(fc.integer({ min: 0, max: JOBS - 1 }), { maxLength: 5 }),
  rotate: fc.constantFrom<RoundPlan["rotate"]>("none", "none", "with-previous", "without-previous"),
  loseExecutor: fc.option(fc.integer({ min: 0, max: JOBS - 1 }), { nil: null }),
});
const [plan] = fc.sample(
  fc.record({
    jobs: fc.array(jobArb, { minLength: JOBS, maxLength: JOBS }),
    rounds: fc.array(roundArb, { minLength: ROUNDS, maxLength: ROUNDS }),
  }),
  { seed: SEED, numRuns: 1 },
);

/** What the fake runtime knows of each run: its plan and the newest token it holds. */
const runtimeOf = new Map<string, { runtime: Runtime; token: string }>();
/** The runtime plan of each session key's runs (inbound), or of each spawned task by its job number. */
const planOfSession = new Map<string, Runtime>();
const planOfTask = new Map<number, Runtime>();

interface Job {
  plan: JobPlan;
  /** The session whose run(s) the job watches (the child for a sub-agent). */
  key: string;
  requester?: string;
  runIds: string[];
  /** Messages answered 202: each must be in its session's transcript. */
  accepted: { key: string; text: string }[];
}
const jobs: Job[] = [];

beforeAll(() => {
  installFakeRuntime({
    defaults: {
      timeoutSeconds: 600,
      subagents: {
        maxConcurrent: 1_000,
        maxChildrenPerAgent: 20,
        allowAgents: ["hook", "main"],
        archiveAfterMinutes: 0,
      },
    },
    channels: { webchat: { outbound: { url: `${HOOKS_URL}faults` } } },
  });
  runtime.respond = (req) => {
    // The announce step of a sub-agent on the runtime only adds notes: answered at once.
    if (req.kind === "subagent_announce") return Response.json({ reply: "" });
    // A child's task POST can arrive before sessions_spawn has answered: its plan is found by its task text.
    const task = /fault job (\d+)/.exec(req.message)?.[1];
    const plan = (task !== undefined ? planOfTask.get(Number(task)) : planOfSession.get(req.sessionKey)) ?? "sync";
    runtimeOf.set(req.runId, { runtime: plan, token: req.runToken });
    if (plan === "sync") return Response.json({ reply: `done ${req.runId.slice(0, 8)}` });
    return new Response(null, { status: 202 });
  };
});

afterAll(() => {
  env.SIGNING_SECRET = ORIGINAL_SECRET;
  delete env.SIGNING_SECRET_PREVIOUS;
});

const tag = () => crypto.randomUUID().slice(0, 8);

async function start(p: JobPlan, n: number): Promise<Job> {
  if (p.kind === "model" || p.kind === "webhook") {
    const key = `agent:${p.kind === "model" ? "main" : "hook"}:fault-${tag()}`;
    planOfSession.set(key, p.runtime);
    const job: Job = { plan: p, key, runIds: [], accepted: [] };
    for (let i = 0; i < (p.kind === "model" ? 3 : 1); i++) {
      const text = `message ${i} to ${key}`;
      const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: text });
      expect(r.status).toBe(202);
      job.runIds.push(r.json.runId);
      job.accepted.push({ key, text });
    }
    return job;
  }
  const requester = `agent:main:webchat:direct:fault-${tag()}`;
  await call("POST", `/v1/sessions/${enc(requester)}/messages`, { message: "hello", channel: "webchat", to: "u" });
  const agentId = p.kind === "subagent-webhook" ? "hook" : "main";
  planOfTask.set(n, p.runtime);
  const r = await invoke("sessions_spawn", { task: `fault job ${n}`, agentId }, { sessionKey: requester });
  expect(r.details?.status).toBe("accepted");
  const key = r.details.childSessionKey as string;
  return { plan: p, key, requester, runIds: [r.details.runId], accepted: [] };
}

const statusOf = async (runId: string) => (await call("GET", `/v1/runs/${runId}`)).json.status as string;
const open = (s: string) => s === "queued" || s === "running";

async function evict(key: string): Promise<void> {
  // An object that is not running (nothing to evict) is fine.
  await evictDurableObject(sessionStub(key)).catch(() => undefined);
}

function rotate(how: RoundPlan["rotate"]): void {
  if (how === "none") return;
  const next = `rotated-signing-secret-${crypto.randomUUID()}`;
  if (how === "with-previous") env.SIGNING_SECRET_PREVIOUS = env.SIGNING_SECRET;
  else delete env.SIGNING_SECRET_PREVIOUS;
  env.SIGNING_SECRET = next;
}

/** The state an eviction leaves between a runtime's 202 and its record: running, its executor's lease, nothing holding it. */
async function loseExecutor(job: Job): Promise<void> {
  const runId = job.runIds[0];
  if (!runtimeOf.has(runId) || !open(await statusOf(runId))) return;
  await runInDurableObject(sessionStub(job.key), async (_obj, state) => {
    state.storage.sql.exec("DELETE FROM flows WHERE id = ?", `webhook_run:${runId}`);
    state.storage.sql.exec(
      "UPDATE timers SET due_at = ? WHERE kind = 'lease' AND ref = ?",
      Date.now() + LEASE_MS,
      runId,
    );
  });
  await evict(job.key);
}

/** What each runtime does this round: heartbeat (and take the new token) or complete, with the newest token it holds. */
async function actRuntimes(round: number): Promise<void> {
  for (const job of jobs) {
    for (const runId of job.runIds) {
      const rt = runtimeOf.get(runId);
      if (!rt || rt.runtime === "sync" || rt.runtime === "silent") continue;
      if (rt.runtime === "heartbeat" && round < job.plan.completeAt) {
        const beat = await call("POST", `/v1/runs/${runId}/heartbeat`, undefined, { token: rt.token });
        if (beat.status === 200) rt.token = beat.json.runToken;
        continue;
      }
      if (round < job.plan.completeAt) continue;
      if (rt.runtime === "abort") {
        await call("POST", `/v1/runs/${runId}/abort`);
        runtimeOf.set(runId, { ...rt, runtime: "silent" });
        continue;
      }
      const body =
        rt.runtime === "error" ? { error: "the runtime failed" } : { reply: `completed ${runId.slice(0, 8)}` };
      await call("POST", `/v1/runs/${runId}/complete`, body, { token: rt.token });
      // Whatever the answer (200, or 401 after a rotation without the previous secret), the runtime is done.
      runtimeOf.set(runId, { ...rt, runtime: "silent" });
    }
  }
}

const sessionsOf = (job: Job) => [job.key, ...(job.requester ? [job.requester] : [])];

/** Rows the children still have in their requester agents' lanes (src/lane/subagent-lane.ts). */
async function laneRows(): Promise<number> {
  let n = 0;
  for (const j of jobs.filter((j) => j.requester)) {
    const lane = env.SUBAGENT_LANE.getByName(agentLaneName(j.requester!.split(":")[1]));
    n += await runInDurableObject(
      lane,
      async (_o, state) =>
        state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM lane_slots WHERE child_key = ?", j.key).one()
          .n,
    );
  }
  return n;
}

describe("the fault suite", () => {
  it("every run ends, every slot is released, nothing answered 2xx is lost", { timeout: 300_000 }, async () => {
    for (const [n, p] of plan.jobs.entries()) jobs.push(await start(p, n));

    for (let round = 0; round < ROUNDS; round++) {
      const faults = plan.rounds[round];
      rotate(faults.rotate);
      for (const i of faults.evict) for (const key of sessionsOf(jobs[i])) await evict(key);
      const lose = faults.loseExecutor === null ? null : jobs[faults.loseExecutor];
      if (lose && lose.plan.kind !== "model" && lose.plan.kind !== "subagent-model") await loseExecutor(lose);
      await actRuntimes(round);
      for (const job of jobs) for (const key of sessionsOf(job)) await advance(key, ROUND_MS);
    }

    // Time runs on: leases, deadlines and sweeps end whatever is left; children announce; requesters take them.
    for (let i = 0; i < 8; i++) {
      let stillOpen = 0;
      for (const job of jobs)
        for (const runId of job.runIds)
          if (open(await statusOf(runId))) {
            stillOpen++;
            await advance(job.key, RUNTIME_LEASE_MS + 1_000);
          }
      if (stillOpen === 0) break;
    }
    for (const job of jobs.filter((j) => j.requester)) {
      await settle(job.key, { rounds: 40, waitMs: 5_000 });
      await runDurableObjectAlarm(sessionStub(job.requester!));
    }

    const ended: Record<string, number> = {};
    let started = 0;
    for (const job of jobs)
      for (const runId of job.runIds) {
        started++;
        const status = await statusOf(runId);
        ended[status] = (ended[status] ?? 0) + 1;
      }
    let childSlots = 0;
    let lostMessages = 0;
    let announces = 0;
    let openRuns = 0;
    for (const job of jobs) {
      for (const key of sessionsOf(job)) openRuns += (await sessionStub(key).audit()).runs.length;
      for (const { key, text } of job.accepted) {
        const users = await runInDurableObject(
          sessionStub(key),
          async (_o: SessionObject, state) =>
            state.storage.sql
              .exec<{ json: string }>("SELECT json FROM messages WHERE role = 'user'")
              .toArray()
              .filter((r) => r.json.includes(text)).length,
        );
        if (users !== 1) lostMessages++;
      }
      if (job.requester) {
        childSlots += (await getRequesterSpawnState(env, job.requester)).activeChildren;
        const heard = await announcesIn(job.requester, job.key);
        if (heard.length === 1) announces++;
      }
    }
    const lane = await laneRows();
    const children = jobs.filter((j) => j.requester).length;
    const byState = ["ok", "error", "timeout", "aborted", "lost"].map((s) => `${s} ${ended[s] ?? 0}`).join(", ");
    console.log(
      `[fault-suite] seed ${SEED}: runs started ${started}; ended: ${byState}; still open ${openRuns}; slots leaked: ${childSlots + lane} (child ${childSlots}, lane ${lane}); 2xx lost: ${lostMessages}; children announced ${announces}/${children}`,
    );
    expect(Object.keys(ended).filter(open)).toEqual([]);
    expect(openRuns).toBe(0);
    expect(childSlots).toBe(0);
    expect(lane).toBe(0);
    expect(lostMessages).toBe(0);
    expect(announces).toBe(children);
    // The plan exercised what the suite is for.
    expect(plan.rounds.some((r) => r.rotate === "without-previous")).toBe(true);
    expect(plan.rounds.some((r) => r.rotate === "with-previous")).toBe(true);
  });
});
