import { describe, expect, it } from "vitest";
import { defaultCandidates, findChromium } from "./chromium";

/** How the browser tests find a Chromium (test/node/chromium.ts): the fallbacks and the reasons reported. */
describe("finding a Chromium for the browser tests", () => {
  it("CHROMIUM_PATH, when set, is the only candidate; unset, the npm-shipped browser comes first", () => {
    expect(defaultCandidates({ CHROMIUM_PATH: "/opt/my/chrome" })).toEqual([
      { source: "CHROMIUM_PATH", path: "/opt/my/chrome" },
    ]);
    const candidates = defaultCandidates({});
    expect(candidates[0].source).toBe("@sparticuz/chromium");
    expect(candidates.slice(1).map((c) => c.path)).toContain("/usr/bin/chromium");
    expect(candidates.slice(1).map((c) => c.path)).toContain(
      "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    );
  });

  it("skips candidates that are absent, cannot be unpacked or do not launch, and says why for each", async () => {
    const found = await findChromium([
      { source: "CHROMIUM_PATH", path: "/nonexistent/chromium" },
      {
        source: "@sparticuz/chromium",
        path: async () => {
          throw new Error("ships a Linux x64 build only (this is darwin arm64)");
        },
      },
      { source: "installed", path: "/nonexistent/google-chrome" }, // absent install locations are not listed
      { source: "installed", path: "/bin/false" }, // exists, but is no browser
    ]);
    expect(found.path).toBeNull();
    if (found.path !== null) return;
    expect(found.tried).toHaveLength(3);
    expect(found.tried[0]).toBe("CHROMIUM_PATH=/nonexistent/chromium: no such file");
    expect(found.tried[1]).toBe("@sparticuz/chromium: ships a Linux x64 build only (this is darwin arm64)");
    expect(found.tried[2]).toMatch(/^installed \(\/bin\/false\): /);
  });
});
