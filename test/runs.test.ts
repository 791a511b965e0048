import { describe, expect, it } from "vitest";
import { call, enc, sendAndWait } from "./helpers/http";

describe("runs", () => {
  it("an inbound message creates the session, runs the echo model and records the transcript", async () => {
    const key = "agent:main:webchat:direct:alice";
    const run = await sendAndWait(key, "hello there", { channel: "webchat", to: "alice" });
    expect(run.status).toBe("ok");
    expect(run.reply).toBe("hello there");
    const hist = await call("GET", `/v1/sessions/${enc(key)}/history`);
    expect(hist.status).toBe(200);
    expect(hist.json.messages.map((m: any) => m.role)).toEqual(["user", "assistant"]);
    const row = await call("GET", `/v1/sessions/${enc(key)}`);
    expect(row.json).toMatchObject({ key, kind: "other", channel: "webchat", lastChannel: "webchat", lastTo: "alice", model: "echo" });
  });
});
