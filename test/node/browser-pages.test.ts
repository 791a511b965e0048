import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { unstable_startWorker } from "wrangler";
import { LAUNCH_ARGS } from "./chromium";

/**
 * The gateway's two browser pages, /console (static assets, public/_headers from scripts/assets/headers.mjs)
 * and /docs (the Worker's page, src/http/docs.ts), as `wrangler dev` serves them: each with a
 * Content-Security-Policy, no framing and nosniff (docs/contract.md, "Browser pages"). In Chromium (the one
 * test/node/chromium.ts finds; a browser test like the console's, skipped with one line when none launches and
 * required by .ci/run), both pages are also loaded under their policy: they render, and the browser reports no
 * violation.
 */

const CHROMIUM = inject("chromium");
let worker: Awaited<ReturnType<typeof unstable_startWorker>>;
let base = "";

beforeAll(async () => {
  // No fetch of the Request.cf sample from Cloudflare (scripts/dev.mjs): the test needs no network.
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  worker = await unstable_startWorker({
    config: "wrangler.jsonc",
    dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, persist: false, logLevel: "error" },
  });
  await worker.ready;
  base = (await worker.url).href;
}, 60_000);

afterAll(async () => {
  await worker?.dispose();
});

const PAGES = ["/console", "/console/", "/docs"];

describe("browser pages", () => {
  it.each(PAGES)("%s has a CSP without inline scripts or framing, nosniff and no referrer", async (path) => {
    const res = await fetch(new URL(path, base), { redirect: "follow" });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toMatch(/script-src 'self'( 'sha256-[A-Za-z0-9+/=]+')?;/);
    expect(csp).not.toContain("'unsafe-inline'; script");
    expect(csp).not.toMatch(/script-src[^;]*unsafe-(inline|eval)/);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  });

  it.skipIf(!CHROMIUM)(
    "both render under their policy with no violation reported",
    async () => {
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: LAUNCH_ARGS });
      try {
        for (const [path, ready] of [
          ["/docs", "text=Switchboard"],
          ["/console", "input[type=password]"],
        ] as const) {
          const page = await browser.newPage();
          const violations: string[] = [];
          page.on("console", (m) => {
            // Scalar's stylesheet names web fonts on its CDN even with withDefaultFonts off; the policy keeps
            // the page from fetching them (nothing leaves for another origin) and it uses the system fonts.
            if (/Loading the font 'https:\/\/fonts\.scalar\.com\//.test(m.text())) return;
            if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
          });
          await page.goto(new URL(path, base).href);
          await page.locator(ready).first().waitFor({ timeout: 20_000 });
          expect(violations, path).toEqual([]);
          await page.close();
        }
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
