import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getRequesterSpawnState } from "../../src/spawn/requester-side";
import { invoke, sessionStub } from "../helpers/http";
import { delivered, drive, setup, stepsOf, unfinished } from "../helpers/requester-turns";
import { crash } from "../helpers/restart";
import { announcesIn, outboxOf } from "../helpers/subagents";

/** "requester" announce delivery across evictions: every completion is told once, never twice, never lost. */

describe("announceDelivery: requester, with evictions", () => {
  it.each([1, 2, 3])(
    "an eviction between any two steps repeats nothing and loses nothing (%i evictions per spawn)",
    async (perSpawn) => {
      const { req, fakes } = await setup();
      const kids: string[] = [];
      // Work advances on its own (alarms fire by themselves) while the objects are evicted again and
      // again, so evictions land between different steps in each case; only evictions that hit
      // unfinished work are counted.
      let hits = 0;
      const evict = async () => {
        for (let i = 0; i < perSpawn; i++) {
          if (await unfinished([req, ...kids])) hits++;
          await crash(...[req, ...kids].map(sessionStub));
          for (const key of [req, ...kids]) await runDurableObjectAlarm(sessionStub(key));
        }
      };
      for (let i = 1; i <= 3; i++) {
        const r = await invoke("sessions_spawn", { task: `part ${i}`, label: `part ${i}` }, { sessionKey: req });
        kids.push(r.details.childSessionKey);
        await evict();
      }
      await drive(() => [req, ...kids], evict);
      await drive(() => [req, ...kids]);
      expect(hits).toBeGreaterThan(0);

      // Each completion reached the channel exactly once: inside one delivered reply of a turn, or — when
      // evictions cost its turn both attempts — as its direct announce.
      const out = delivered(fakes, req).filter((b) => b.message !== "hi");
      const states = new Map(
        (await stepsOf(req)).events.map((e) => [e.id.slice("announce:v1:".length).replace(/:[^:]+$/, ""), e.state]),
      );
      for (const kid of kids) {
        const mine = out.filter((b) => b.message.includes(kid));
        expect(mine).toHaveLength(1);
        expect(mine[0].kind).toBe(states.get(kid) === "fallback" ? "subagent_announce" : "reply");
        // …and the requester's transcript holds its completion event once (a retried turn does not write it twice).
        const told = (await announcesIn(req)).filter((a) => a.text.includes(`session_key: ${kid}`));
        expect(told).toHaveLength(1);
      }
      expect([...states.values()].every((v) => v === "turn_done" || v === "fallback")).toBe(true);
      expect(states.size).toBe(3);
      expect((await outboxOf(req)).filter((o) => o.status !== "delivered")).toEqual([]);
      expect((await getRequesterSpawnState(env, req)).activeChildren).toBe(0);
    },
  );
});
