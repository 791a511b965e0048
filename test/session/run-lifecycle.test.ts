import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { agentLaneName } from "../../src/lane/subagent-lane";
import { verifyRunToken } from "../../src/runners/run-token";
import { UNGUARDED_RUN } from "../../src/session/run-audit";
import { LOST_TWICE, RUNTIME_SILENT } from "../../src/session/run-queue";
import { LEASE_MS, RUNTIME_LEASE_MS, SWEEP_MS } from "../../src/session/run-types";
import type { SessionObject } from "../../src/session/session-object";
import { getRequesterSpawnState } from "../../src/spawn/requester-side";
import { getRun, HOOKS_URL, installFakeRuntime, posted, runPosts, runtime } from "../helpers/fake-runtime";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { until } from "../helpers/scripted";
import { announcesIn, settle } from "../helpers/subagents";

/**
 * Every run reaches a final state, whatever its runtime (docs/contract.md, "Runs"): a webhook runtime that
 * answered 202 keeps a run without a deadline alive with heartbeats (and gets fresh tokens), a silent one
 * loses it; a SIGNING_SECRET rotation strands nothing; the sweeper ends runs nothing guards. Each edge is
 * driven with moved timers and evictions, and each ends with the run's slots given back.
 */

const ORIGINAL_SECRET = env.SIGNING_SECRET;
const NEW_SECRET = "rotated-signing-secret-0123456789abcdef";

beforeEach(() => {
  installFakeRuntime({
    defaults: { timeoutSeconds: 600, subagents: { maxConcurrent: 1_000, allowAgents: ["hook"] } },
    channels: { webchat: { outbound: { url: `${HOOKS_URL}webchat` } } },
  });
  // The child's announce step is answered at once (it only adds Notes); tasks and inbound runs as the test says.
  runtime.respond = (req) =>
    req.kind === "subagent_announce" ? Response.json({ reply: "" }) : new Response(null, { status: 202 });
});

afterEach(() => {
  env.SIGNING_SECRET = ORIGINAL_SECRET;
  delete env.SIGNING_SECRET_PREVIOUS;
});

const requester = () => `agent:main:lifecycle-${crypto.randomUUID().slice(0, 8)}`;
const claimsOf = (token: string) => JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
const heartbeat = (runId: string, token: string) => call("POST", `/v1/runs/${runId}/heartbeat`, undefined, { token });

async function spawnHookChild(req: string): Promise<{ child: string; runId: string }> {
  const r = await invoke("sessions_spawn", { task: "long research", agentId: "hook" }, { sessionKey: req });
  expect(r.details.status).toBe("accepted");
  return { child: r.details.childSessionKey, runId: r.details.runId };
}

/** The rows of `child` in its requester agent's lane: none once its task has ended. */
async function laneRowsOf(child: string, req: string): Promise<number> {
  return runInDurableObject(
    env.SUBAGENT_LANE.getByName(agentLaneName(req.split(":")[1])),
    async (_obj, state) =>
      state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM lane_slots WHERE child_key = ?", child).one().n,
  );
}

async function expectSlotsReleased(req: string, child: string): Promise<void> {
  await until(async () => expect(await laneRowsOf(child, req)).toBe(0));
  expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(0);
}

describe("a webhook run without a deadline (sub-agent, runTimeoutSeconds 0)", () => {
  it("its token lives as long as the run; heartbeats renew its lease across evictions; it completes long after timeoutSeconds and frees its slots", async () => {
    const req = requester();
    const { child, runId } = await spawnHookChild(req);
    await posted();
    const first = runPosts()[0];
    expect(first).toMatchObject({
      runId,
      deadline: null,
      leaseMs: RUNTIME_LEASE_MS,
      heartbeatPath: `/v1/runs/${runId}/heartbeat`,
    });
    // No expiry of its own: the token is valid while the run runs, hours past agents.defaults.timeoutSeconds (600 s).
    expect(claimsOf(first.runToken).expiresAt).toBeNull();
    const later = Date.now() + 3 * 3_600_000;
    expect(await verifyRunToken(first.runToken, env, later)).toMatchObject({ role: "run", runId, sessionKey: child });

    let token = first.runToken;
    for (let i = 0; i < 3; i++) {
      const beat = await heartbeat(runId, token);
      expect(beat.status).toBe(200);
      expect(beat.json).toMatchObject({ run: { runId, status: "running" }, deadline: null });
      expect(beat.json.leaseExpiresAt).toBeGreaterThan(Date.now() + RUNTIME_LEASE_MS - 5_000);
      token = beat.json.runToken;
      // The object may lose its memory between beats: the lease is a timer row, renewed in storage.
      await evictDurableObject(sessionStub(child));
      await advance(child, RUNTIME_LEASE_MS - 60_000);
      expect((await getRun(runId)).status).toBe("running");
    }
    const done = await call("POST", `/v1/runs/${runId}/complete`, { reply: "found it" }, { token });
    expect(done.json).toMatchObject({ status: "ok", reply: "found it" });
    await settle(child);
    const [announce] = await announcesIn(req, child);
    expect(announce.text).toMatch(/^Status: completed successfully\nResult: found it\n/);
    await expectSlotsReleased(req, child);
  });

  it("a runtime that neither completes nor heartbeats loses the run after the lease: `lost`, announced as lost, slots freed", async () => {
    const req = requester();
    const { child, runId } = await spawnHookChild(req);
    await posted();
    await evictDurableObject(sessionStub(child));
    await advance(child, RUNTIME_LEASE_MS - 60_000);
    expect((await getRun(runId)).status).toBe("running");
    await advance(child, 61_000);
    expect(await getRun(runId)).toMatchObject({ status: "lost", error: RUNTIME_SILENT });
    // Its token died with it.
    const late = await call(
      "POST",
      `/v1/runs/${runId}/complete`,
      { reply: "too late" },
      { token: runPosts()[0].runToken },
    );
    expect(late.status).toBe(401);
    await settle(child);
    const [announce] = await announcesIn(req, child);
    expect(announce.text.startsWith(`Status: lost: ${RUNTIME_SILENT}\n`)).toBe(true);
    await expectSlotsReleased(req, child);
  });

  it("a run with a deadline is held until its deadline, heartbeat or not (the heartbeat only re-issues the token)", async () => {
    const key = `agent:hook:lifecycle-${crypto.randomUUID().slice(0, 8)}`;
    const runId = (await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "slow" })).json.runId;
    await posted();
    expect(runPosts()[0].deadline).toBeGreaterThan(Date.now());
    const beat = await heartbeat(runId, runPosts()[0].runToken);
    expect(beat.json).toMatchObject({ deadline: runPosts()[0].deadline, leaseExpiresAt: null });
    expect(claimsOf(beat.json.runToken).expiresAt).toBe(runPosts()[0].deadline);
    await advance(key, RUNTIME_LEASE_MS - 60_000);
    expect((await getRun(runId)).status).toBe("running");
    await advance(key, 61_000);
    expect((await getRun(runId)).status).toBe("timeout");
  });
});

describe("SIGNING_SECRET rotation", () => {
  it("with the old secret as SIGNING_SECRET_PREVIOUS, an accepted run keeps working and its heartbeat hands out a token of the new secret", async () => {
    const req = requester();
    const { child, runId } = await spawnHookChild(req);
    await posted();
    const oldToken = runPosts()[0].runToken;

    env.SIGNING_SECRET = NEW_SECRET;
    env.SIGNING_SECRET_PREVIOUS = ORIGINAL_SECRET;
    const read = (token: string) => call("GET", `/v1/runs/${runId}`, undefined, { token });
    expect((await read(oldToken)).status).toBe(200);
    const beat = await heartbeat(runId, oldToken);
    expect(beat.status).toBe(200);
    const newToken = beat.json.runToken as string;

    // The rotation ends: only the new secret verifies.
    delete env.SIGNING_SECRET_PREVIOUS;
    expect((await read(oldToken)).status).toBe(401);
    expect((await read(newToken)).status).toBe(200);
    const done = await call("POST", `/v1/runs/${runId}/complete`, { reply: "rotated" }, { token: newToken });
    expect(done.json).toMatchObject({ status: "ok", reply: "rotated" });
    await settle(child);
    await expectSlotsReleased(req, child);
  });

  it("a rotation without SIGNING_SECRET_PREVIOUS refuses the old tokens, and the run they held still ends (lost) and frees its slots", async () => {
    const req = requester();
    const { child, runId } = await spawnHookChild(req);
    await posted();
    env.SIGNING_SECRET = NEW_SECRET;
    expect((await heartbeat(runId, runPosts()[0].runToken)).status).toBe(401);
    await advance(child, RUNTIME_LEASE_MS + 1_000);
    expect((await getRun(runId)).status).toBe("lost");
    await settle(child);
    await expectSlotsReleased(req, child);
  });
});

/**
 * The state an eviction leaves when it strikes while a run's executor is still in this object (here: between
 * the runtime's 202 and its record): the run is `running` in storage with its executor's lease, and nothing holds it.
 */
async function loseExecutor(child: string, runId: string): Promise<void> {
  await runInDurableObject(sessionStub(child), async (_obj, state) => {
    state.storage.sql.exec("DELETE FROM flows WHERE id = ?", `webhook_run:${runId}`);
    state.storage.sql.exec(
      "UPDATE timers SET due_at = ? WHERE kind = 'lease' AND ref = ?",
      Date.now() + LEASE_MS,
      runId,
    );
  });
  await evictDurableObject(sessionStub(child));
}

describe("lost executors", () => {
  it("a run whose executor is lost is retried once; lost again, it ends `lost` (not `error`), and its slots are freed", async () => {
    const req = requester();
    const { child, runId } = await spawnHookChild(req);
    await posted();
    await loseExecutor(child, runId);
    await advance(child, LEASE_MS + 1_000);
    await posted(2);
    expect(runPosts()[1]).toMatchObject({ runId, attempt: 2 });
    await loseExecutor(child, runId);
    await advance(child, LEASE_MS + 1_000);
    expect(await getRun(runId)).toMatchObject({ status: "lost", error: LOST_TWICE });
    await settle(child);
    expect((await announcesIn(req, child))[0].text.startsWith(`Status: lost: ${LOST_TWICE}\n`)).toBe(true);
    await expectSlotsReleased(req, child);
  });
});

/** Move a timer to dead_timers as if its handler had failed every attempt (docs/timers.md). */
async function killTimer(key: string, kind: string, ref: string): Promise<void> {
  await runInDurableObject(sessionStub(key), async (_obj, state) => {
    const sql = state.storage.sql;
    sql.exec(
      "INSERT INTO dead_timers (kind, ref, payload, attempts, last_error, first_failed_at, died_at) VALUES (?, ?, NULL, 8, 'boom', ?, ?)",
      kind,
      ref,
      Date.now(),
      Date.now(),
    );
    sql.exec("DELETE FROM timers WHERE kind = ? AND ref = ?", kind, ref);
  });
}

const timersOf = (key: string) =>
  runInDurableObject(sessionStub(key), async (_obj, state) =>
    state.storage.sql.exec<{ kind: string; ref: string }>("SELECT kind, ref FROM timers").toArray(),
  );

describe("the sweeper", () => {
  it("ends a running run that nothing guards any more (its lease timer died) `lost`, and the child's slots are freed", async () => {
    const req = requester();
    const { child, runId } = await spawnHookChild(req);
    await posted();
    await evictDurableObject(sessionStub(child));
    await killTimer(child, "lease", runId);
    const audit = await sessionStub(child).audit();
    expect(audit.runs).toEqual([
      { runId, kind: "subagent_task", status: "running", guard: "none", reason: UNGUARDED_RUN },
    ]);
    await advance(child, SWEEP_MS + 1_000);
    expect(await getRun(runId)).toMatchObject({ status: "lost", error: UNGUARDED_RUN });
    await settle(child);
    await expectSlotsReleased(req, child);
    // Nothing open any more: at its next round the sweep stops itself.
    await advance(child, SWEEP_MS);
    expect((await timersOf(child)).filter((t) => t.kind === "sweep")).toEqual([]);
  });

  it("starts a queue that nothing would start (its pump timer gone) and reports what guards each open run", async () => {
    const key = `agent:main:sweep-${crypto.randomUUID().slice(0, 8)}`;
    await call("POST", `/v1/sessions/${enc(key)}/messages`, { message: "first" });
    await until(async () =>
      expect((await call("GET", `/v1/sessions/${enc(key)}/runs`)).json.runs[0].status).toBe("ok"),
    );
    // A queued run whose start was lost: no pump timer, nothing running.
    const runId = await runInDurableObject(sessionStub(key), async (_obj: SessionObject, state) => {
      const id = `${crypto.randomUUID()}.${btoa(key).replace(/=+$/, "")}`;
      state.storage.sql.exec(
        "INSERT INTO runs (id, qseq, kind, status, input_json, created_at) VALUES (?, 100, 'inbound', 'queued', ?, ?)",
        id,
        JSON.stringify({ kind: "inbound", message: "stalled", provenance: { kind: "external_user" } }),
        Date.now(),
      );
      state.storage.sql.exec("DELETE FROM timers WHERE kind = 'pump'");
      state.storage.sql.exec(
        "INSERT OR REPLACE INTO timers (kind, ref, due_at) VALUES ('sweep', 'runs', ?)",
        Date.now() + SWEEP_MS,
      );
      return id;
    });
    expect((await sessionStub(key).audit()).runs).toEqual([
      { runId, kind: "inbound", status: "queued", guard: "none", reason: "queued with nothing to start it" },
    ]);
    await advance(key, SWEEP_MS + 1_000);
    expect((await call("GET", `/v1/runs/${runId}/wait?timeoutMs=10000`)).json).toMatchObject({ status: "ok" });
  });

  it("puts back a missing child-slot check (a slot nothing would free), but never revives a timer that died", async () => {
    const req = requester();
    const { child } = await spawnHookChild(req);
    await posted();
    const slotTimer = async () => (await timersOf(req)).filter((t) => t.kind === "subagent-slot");
    expect(await slotTimer()).toHaveLength(1);
    await runInDurableObject(sessionStub(req), async (_obj, state) =>
      state.storage.sql.exec("DELETE FROM timers WHERE kind = 'subagent-slot'"),
    );
    const audit = await sessionStub(req).audit();
    expect(audit.flows).toEqual([{ flow: `child:${child}`, state: "running", guard: "subagent-slot", repaired: true }]);
    expect(await slotTimer()).toHaveLength(1);
    await killTimer(req, "subagent-slot", child);
    expect((await sessionStub(req).audit()).flows).toEqual([
      { flow: `child:${child}`, state: "running", guard: "subagent-slot (dead)" },
    ]);
    expect(await slotTimer()).toHaveLength(0);
  });

  it("the requester's slot check frees the slot of a child that exists but can no longer announce (its announce flow failed)", async () => {
    const req = requester();
    const { child, runId } = await spawnHookChild(req);
    await posted();
    // The child's task ended and its announce gave up (docs/timers.md): nothing will ever reach the requester.
    await runInDurableObject(sessionStub(child), async (_obj, state) => {
      const sql = state.storage.sql;
      sql.exec("UPDATE runs SET status = 'error', ended_at = ? WHERE id = ?", Date.now(), runId);
      sql.exec(
        "INSERT INTO flows (id, kind, state, json, created_at, updated_at) VALUES (?, 'subagent_announce_out', 'failed', '{}', ?, ?)",
        `announce:${runId}`,
        Date.now(),
        Date.now(),
      );
      sql.exec("DELETE FROM timers");
    });
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(1);
    await runInDurableObject(sessionStub(req), async (_obj, state) =>
      state.storage.sql.exec("UPDATE timers SET due_at = 0 WHERE kind = 'subagent-slot'"),
    );
    await runDurableObjectAlarm(sessionStub(req));
    expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(0);
  });
});
