import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { MAX_WATCHERS_PER_TARGET, WATCH_NOTICE_TIMER } from "../../src/events/watchers";
import { MAX_PENDING_NOTIFICATIONS } from "../../src/send/send-inbox";
import { useFakeProvider } from "../helpers/fake-provider";
import { advance, call, enc, invoke, sessionStub } from "../helpers/http";
import { evict } from "../helpers/restart";

// sessions_send `watch` and the change notices it brings (src/events/watchers.ts, src/events/watch-notices.ts;
// docs/events.md "Watchers and notices"). Every model call is answered at once: the turns end by themselves.

let n = 0;
const uniq = (base: string) => `agent:main:${base}-${++n}-${crypto.randomUUID().slice(0, 8)}`;
const notice = (target: string, since: number) =>
  `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince ${since}.`;

function model() {
  return useFakeProvider({
    extraConfig: { tools: { sessions: { visibility: "all" } }, session: { agentToAgent: { maxPingPongTurns: 0 } } },
    auto: (c) => c.reply("ANNOUNCE_SKIP"),
  });
}

/** A person's message into `key` (a `human_direct_message`), its turn finished. */
async function human(key: string, message: string): Promise<void> {
  const r = await call("POST", `/v1/sessions/${enc(key)}/messages`, { message });
  expect(r.status).toBe(202);
  const w = await call("GET", `/v1/runs/${r.json.runId}/wait?timeoutMs=10000`);
  expect(w.json.status).toBe("ok");
}

const send = (from: string, args: Record<string, unknown>) =>
  invoke("sessions_send", { timeoutSeconds: 0, ...args }, { sessionKey: from });

/** The notifications `key` holds (pending and read), oldest first. */
const inbox = (key: string) =>
  runInDurableObject(sessionStub(key), (_o, s) =>
    s.storage.sql
      .exec<{ state: string; message_json: string }>(
        "SELECT state, message_json FROM send_inbox WHERE kind = 'notify' ORDER BY seq",
      )
      .toArray()
      .map((r) => ({ state: r.state, text: JSON.parse(r.message_json).content[0].text as string })),
  );

type Row = {
  watcher_key: string;
  last_seen: number;
  notified: number;
  material: number;
  pending: number;
  state: string;
};
const watchers = (key: string) =>
  runInDurableObject(sessionStub(key), (_o, s) =>
    s.storage.sql.exec<Row>("SELECT * FROM watchers ORDER BY watcher_key").toArray(),
  );
const stateVersion = async (key: string, from: string) =>
  (await invoke("session_status", { sessionKey: key }, { sessionKey: from })).details.stateVersion as number;
const sql = (key: string, q: string) => runInDurableObject(sessionStub(key), (_o, s) => void s.storage.sql.exec(q));

/** A watcher W (its own session exists) watching target T from T's current version. */
async function watching() {
  const w = uniq("watcher");
  const t = uniq("target");
  await human(w, "hello");
  await human(t, "hello");
  const r = await send(w, { sessionKey: t, message: "keep me posted", mode: "notify", watch: true });
  expect(r.details).toMatchObject({ status: "queued", watched: true });
  const v0 = await stateVersion(t, w);
  return { w, t, v0 };
}

describe("sessions_send watch", () => {
  it("registers after admission and says `watched` only when asked; self-targets and refused sends are not watched", async () => {
    model();
    const w = uniq("watcher");
    const t = uniq("target");
    await human(w, "hello");
    await human(t, "hello");
    const v = await stateVersion(t, w);

    const plain = await send(w, { sessionKey: t, message: "no watch", mode: "notify" });
    expect(plain.details).not.toHaveProperty("watched");
    expect(await watchers(t)).toEqual([]);

    const classic = await send(w, { sessionKey: t, message: "watch this", watch: true });
    expect(classic.details).toEqual({
      runId: expect.any(String),
      status: "accepted",
      sessionKey: t,
      delivery: { status: "none", mode: "announce" },
      watched: true,
    });
    // From the target's version at admission (the send's own change included): nothing earlier notifies.
    const rows = await watchers(t);
    expect(rows).toMatchObject([{ watcher_key: w, pending: 0, state: "live" }]);
    expect(rows[0].last_seen).toBeGreaterThan(v);
    expect(rows[0].notified).toBe(rows[0].last_seen);

    const self = await send(w, { sessionKey: w, message: "note to self", mode: "notify", watch: true });
    expect(self.details).toMatchObject({ status: "queued", watched: false });
    expect(await watchers(w)).toEqual([]);

    const refused = await send(w, { sessionKey: uniq("missing"), message: "x", mode: "notify", watch: true });
    expect(refused.details.status).toBe("error");
    expect(refused.details).not.toHaveProperty("watched");

    // Watching again keeps the cursor; a wrong type is a 400 naming the field.
    expect((await send(w, { sessionKey: t, message: "again", mode: "notify", watch: true })).details.watched).toBe(
      true,
    );
    expect((await watchers(t))[0].last_seen).toBe(rows[0].last_seen);
    const bad = await send(w, { sessionKey: t, message: "x", watch: "yes" });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain("watch");
  });

  it(`at most ${MAX_WATCHERS_PER_TARGET} watchers per target: beyond, watched is false`, async () => {
    model();
    const { t } = await watching();
    await runInDurableObject(sessionStub(t), (_o, s) => {
      for (let i = 1; i < MAX_WATCHERS_PER_TARGET; i++)
        s.storage.sql.exec(
          "INSERT INTO watchers (watcher_key, last_seen, notified, material, created_at, updated_at) VALUES (?, 0, 0, 0, 0, 0)",
          `agent:main:filler-${i}`,
        );
    });
    const late = uniq("late");
    await human(late, "hello");
    expect((await send(late, { sessionKey: t, message: "me too", mode: "notify", watch: true })).details.watched).toBe(
      false,
    );
  });
});

describe("change notices", () => {
  it("a person's message: exactly one notice with OpenClaw's text; a second change while it is pending adds none", async () => {
    model();
    const { w, t, v0 } = await watching();
    await human(t, "from a person");
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () => expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]));
    const [first] = await watchers(t);
    expect(first).toMatchObject({ last_seen: v0, pending: 1 });

    await human(t, "and again");
    await runDurableObjectAlarm(sessionStub(t));
    expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]);
    const [second] = await watchers(t);
    // Frozen while pending: only `material` moved.
    expect(second.notified).toBe(first.notified);
    expect(second.material).toBeGreaterThan(first.notified);
  });

  it("consumed by the watcher's turn: the cursor advances and one fresh notice opens for what came after", async () => {
    const fake = model();
    const { w, t, v0 } = await watching();
    await human(t, "one");
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () => expect(await inbox(w)).toHaveLength(1));
    await human(t, "two");
    const { notified, material } = (await watchers(t))[0];
    expect(material).toBeGreaterThan(notified);

    const before = fake.calls.length;
    await human(w, "what is new?");
    expect(
      fake.calls.slice(before).some((c) => JSON.stringify(c.body).includes(JSON.stringify(notice(t, v0)).slice(1, -1))),
    ).toBe(true);
    await runDurableObjectAlarm(sessionStub(w));
    await vi.waitFor(async () =>
      expect((await watchers(t))[0]).toMatchObject({ last_seen: notified, notified: material, pending: 1 }),
    );
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () =>
      expect(await inbox(w)).toEqual([
        { state: "consumed", text: notice(t, v0) },
        { state: "pending", text: notice(t, notified) },
      ]),
    );

    // Read again with nothing new after it: the cursor catches up and no notice opens.
    await human(w, "and now?");
    await runDurableObjectAlarm(sessionStub(w));
    await vi.waitFor(async () =>
      expect((await watchers(t))[0]).toMatchObject({ last_seen: material, notified: material, pending: 0 }),
    );
    await runDurableObjectAlarm(sessionStub(t));
    expect((await inbox(w)).map((x) => x.state)).toEqual(["consumed", "consumed"]);
  });

  it("a notice pushed out of the watcher's inbox by newer notifications is put back at its turn's end: never lost to that bound", async () => {
    model();
    const { w, t, v0 } = await watching();
    await human(t, "from a person");
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () => expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]));
    // MAX_PENDING_NOTIFICATIONS newer notifications evict the oldest pending one: the notice.
    const other = uniq("flood");
    await human(other, "hello");
    for (let i = 0; i < MAX_PENDING_NOTIFICATIONS; i++)
      expect((await send(other, { sessionKey: w, message: `flood ${i}`, mode: "notify" })).details.status).toBe(
        "queued",
      );
    expect((await inbox(w)).map((x) => x.text)).not.toContain(notice(t, v0));
    // The watcher's turn reads the flood; at its end the notice, still unread, is back for the next turn.
    await human(w, "what is new?");
    const after = await inbox(w);
    expect(after.filter((x) => x.state === "pending")).toEqual([{ state: "pending", text: notice(t, v0) }]);
  });

  it("self-caused changes never notify; another session's message does; a run's end does not", async () => {
    model();
    const { w, t, v0 } = await watching();
    await send(w, { sessionKey: t, message: "my own follow-up", mode: "followup", timeoutSeconds: 10 });
    await runDurableObjectAlarm(sessionStub(t));
    expect(await inbox(w)).toEqual([]);
    expect((await watchers(t))[0]).toMatchObject({ last_seen: v0, material: v0, pending: 0 });

    const other = uniq("other");
    await human(other, "hello");
    await send(other, { sessionKey: t, message: "someone else's ask", mode: "followup", timeoutSeconds: 10 });
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () => expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]));
    // The other session is not a watcher: it gets nothing.
    expect(await inbox(other)).toEqual([]);
  });

  it("both objects evicted between the change and the delivery, and between the read and its acknowledgement: nothing lost, nothing repeated", async () => {
    model();
    const { w, t, v0 } = await watching();
    // The watcher cannot take the notice yet (its table is away): the target's timer retries later.
    await sql(w, "ALTER TABLE watching RENAME TO watching_away");
    await human(t, "one");
    await vi.waitFor(async () =>
      expect(
        await runInDurableObject(sessionStub(t), (_o, s) =>
          s.storage.sql.exec("SELECT attempts FROM timers WHERE kind = ?", WATCH_NOTICE_TIMER).one(),
        ),
      ).toMatchObject({ attempts: 1 }),
    );
    await evict(sessionStub(t), sessionStub(w));
    await sql(w, "ALTER TABLE watching_away RENAME TO watching");
    await advance(t, 10 * 60_000);
    await vi.waitFor(async () => expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]));

    // The delivery runs again (as after an eviction before its timer was cleared): still one notice.
    const { notified } = (await watchers(t))[0];
    await runInDurableObject(sessionStub(t), async (_o, s) => {
      s.storage.sql.exec(
        "INSERT INTO timers (kind, ref, due_at, payload) VALUES (?, ?, 0, ?)",
        WATCH_NOTICE_TIMER,
        w,
        JSON.stringify({ notified }),
      );
      await s.storage.setAlarm(Date.now());
    });
    await runDurableObjectAlarm(sessionStub(t));
    expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]);

    // A change after it, then the read; the target cannot take the acknowledgement until both were evicted.
    await human(t, "two");
    await sql(t, "ALTER TABLE watchers RENAME TO watchers_away");
    await human(w, "news?");
    await vi.waitFor(async () =>
      expect(
        await runInDurableObject(sessionStub(w), (_o, s) =>
          s.storage.sql.exec("SELECT attempts FROM timers WHERE kind = 'watch-ack'").toArray(),
        ),
      ).toMatchObject([{ attempts: 1 }]),
    );
    await evict(sessionStub(t), sessionStub(w));
    await sql(t, "ALTER TABLE watchers_away RENAME TO watchers");
    await advance(w, 10 * 60_000);
    await vi.waitFor(async () => expect((await watchers(t))[0]).toMatchObject({ last_seen: notified, pending: 1 }));
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () =>
      expect(await inbox(w)).toEqual([
        { state: "consumed", text: notice(t, v0) },
        { state: "pending", text: notice(t, notified) },
      ]),
    );
  });

  it("watching again sends a pending notice again: a watcher that lost it (deleted and created again) gets it once", async () => {
    model();
    const { w, t, v0 } = await watching();
    await human(t, "one");
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () => expect(await inbox(w)).toHaveLength(1));
    // Watching again while it is held: the repeat is a no-op.
    expect((await send(w, { sessionKey: t, message: "again", mode: "notify", watch: true })).details.watched).toBe(
      true,
    );
    await runDurableObjectAlarm(sessionStub(t));
    expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]);
    // The watcher's rows are gone (as for a session deleted and created again): watching again brings it back once.
    await sql(w, "DELETE FROM send_inbox; DELETE FROM watching");
    expect((await send(w, { sessionKey: t, message: "again", mode: "notify", watch: true })).details.watched).toBe(
      true,
    );
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () => expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]));
  });

  it("a notice the watcher never takes ends dead after its attempts, visibly; an operator retry delivers it", async () => {
    model();
    const { w, t, v0 } = await watching();
    await sql(w, "ALTER TABLE watching RENAME TO watching_away");
    await human(t, "one");
    for (let i = 0; i < 8; i++) {
      await advance(t, 10 * 60_000);
      if ((await watchers(t))[0].state === "dead") break;
    }
    expect((await watchers(t))[0]).toMatchObject({ state: "dead", pending: 1 });
    const dead = await call("GET", `/v1/sessions/${enc(t)}/timers/dead`);
    expect(dead.json.timers).toMatchObject([{ kind: WATCH_NOTICE_TIMER, ref: w, attempts: 8, retryable: true }]);
    // Dead: later changes only move `material`; nothing is sent.
    await human(t, "two");
    expect(
      await runInDurableObject(sessionStub(t), (_o, s) =>
        s.storage.sql.exec("SELECT COUNT(*) AS n FROM timers WHERE kind = ?", WATCH_NOTICE_TIMER).one(),
      ),
    ).toEqual({ n: 0 });

    await sql(w, "ALTER TABLE watching_away RENAME TO watching");
    const retry = await call("POST", `/v1/sessions/${enc(t)}/timers/dead/${WATCH_NOTICE_TIMER}/${enc(w)}/retry`);
    expect(retry.status).toBe(200);
    await runDurableObjectAlarm(sessionStub(t));
    await vi.waitFor(async () => expect(await inbox(w)).toEqual([{ state: "pending", text: notice(t, v0) }]));
    expect((await watchers(t))[0].state).toBe("live");
  });
});
