import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { NO_ACTIVE_RUN } from "../../src/tools/sessions-send-modes";
import { sessionStub } from "../helpers/http";
import { provider, runningTarget, runsOf, send, transcript, wait } from "../helpers/send-modes";

/**
 * Which running runs a steer may join (src/send/send-modes.ts `steerableRun`): a conversation turn of the
 * agent. An announce step's reply is posted to a channel, never read by the sender, and an owner command has
 * no model step at all: both refuse steering with the no-active-run text, and nothing is stored.
 */

const setKind = (key: string, runId: string, kind: string) =>
  runInDurableObject(sessionStub(key), (_o, s) => {
    s.storage.sql.exec("UPDATE runs SET kind = ? WHERE id = ?", kind, runId);
  });

const inboxRows = (key: string) =>
  runInDurableObject(
    sessionStub(key),
    (_o, s) => s.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM send_inbox").one().n,
  );

describe("steer: the runs that accept it", () => {
  it("an announce step (a2a or sub-agent) or an owner command refuses steering; a conversation turn takes it", async () => {
    const fake = provider();
    const { key, runId } = await runningTarget(fake, "steer-kinds");
    for (const kind of ["a2a_announce", "subagent_announce", "command"]) {
      await setKind(key, runId, kind);
      const r = await send({ sessionKey: key, message: `guide ${kind}`, mode: "steer" });
      expect(r.details).toMatchObject({ status: "error", error: NO_ACTIVE_RUN, sessionKey: key });
      expect(await inboxRows(key)).toBe(0);
    }
    // The same run as a conversation turn takes the steer: the refusals above came from the run's kind alone.
    await setKind(key, runId, "inbound");
    const ok = await send({ sessionKey: key, message: "guide inbound", mode: "steer" });
    expect(ok.details).toMatchObject({ status: "accepted", targetDisposition: "steered" });
    expect(await inboxRows(key)).toBe(1);
    fake.pending()[0].reply("done");
    await wait(runId);
    // Unread when the run ended, the accepted steer becomes a turn of its own (src/send/send-modes.ts).
    await vi.waitFor(() => expect(fake.pending()).toHaveLength(1));
    fake.pending()[0].reply("noted");
    const runs = await runsOf(key);
    expect(runs).toHaveLength(2);
    await wait(runs[1].id);
    // No refused steer reached the transcript.
    const texts = await transcript(key);
    expect(texts.filter((t) => t.includes("guide ")).map((t) => t.slice(t.indexOf("guide ")))).toEqual([
      "guide inbound",
    ]);
  });
});
