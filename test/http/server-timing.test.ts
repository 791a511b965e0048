import { describe, expect, it } from "vitest";
import { setConfigOverride } from "../../src/config/load";
import { call } from "../helpers/http";
import { quiesce } from "../helpers/quiesce";
import { baseConfig, installFakes } from "../helpers/scripted";

/** `a;dur=1, b;dur=2.5` → { a: 1, b: 2.5 } */
function phases(header: string | null): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.trim().split(";");
    const dur = params.map((p) => /^dur=([\d.]+)$/.exec(p.trim())).find(Boolean);
    if (name && dur) out[name] = Number(dur[1]);
  }
  return out;
}

describe("Server-Timing (docs/scale.md, where a send's time goes)", () => {
  it("a sessions_send answer times auth, the caller, the requester read and the one call into the target; total bounds them", async () => {
    setConfigOverride(baseConfig());
    installFakes(() => "ok");
    const r = await call("POST", "/tools/invoke", {
      tool: "sessions_send",
      sessionKey: "agent:main:main",
      args: { sessionKey: "agent:main:timing-target", message: "hi", timeoutSeconds: 0 },
    });
    expect(r.status).toBe(200);
    expect(r.json.result.details.status).toBe("accepted");
    const p = phases(r.headers.get("Server-Timing"));
    // No `meta` phase: the target's lineage and send policy are checked inside the enqueue call (src/session/send-into-rpc.ts).
    expect(Object.keys(p).sort()).toEqual(["auth", "caller", "enqueue", "requester", "resolve", "total"]);
    for (const v of Object.values(p)) expect(v).toBeGreaterThanOrEqual(0);
    expect(p.total).toBeGreaterThanOrEqual(p.enqueue);
    await quiesce();
  });

  it("the header carries durations only: no key, id or token appears in it", async () => {
    setConfigOverride(baseConfig());
    installFakes(() => "ok");
    const r = await call("POST", "/tools/invoke", {
      tool: "sessions_send",
      sessionKey: "agent:main:main",
      args: { sessionKey: "agent:main:secret-name-xyz", message: "hi", timeoutSeconds: 0 },
    });
    const header = r.headers.get("Server-Timing") ?? "";
    expect(header).not.toMatch(/secret-name-xyz|agent:|Bearer/);
    for (const part of header.split(",")) expect(part).toMatch(/^[a-z]+;dur=[\d.]+(;desc="[a-z ]+")?$/);
    await quiesce();
  });

  it("every route answers with at least the total (a bare GET /healthz)", async () => {
    const r = await call("GET", "/healthz", undefined, { token: null });
    expect(phases(r.headers.get("Server-Timing")).total).toBeGreaterThanOrEqual(0);
  });
});
