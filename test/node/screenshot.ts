import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { expect } from "vitest";
import { LAUNCH_ARGS } from "./chromium";

/**
 * Byte-stable screenshots of the console for the browser tests (docs/testing.md, "Screenshots"). They are
 * written to test-results/screenshots/ (ignored by git); `npm run screenshots` copies them to docs/screenshots/.
 */
export const SCREENSHOTS = join(import.meta.dirname, "..", "..", "test-results", "screenshots");
export const TOKEN_KEY = "switchboard.console.token";

/**
 * A screenshot of `p` with the words it showed (rendered text, innerText, not textContent: hidden nodes
 * aside), taken only when the words stood still across it: a page still settling (the stream indicator
 * turning "live", a row re-read) is pictured again, at most 20 times.
 */
async function stillPicture(p: Page): Promise<{ text: string; picture: Buffer }> {
  // biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator, not a DOM node
  const textOf = () => p.locator("body").innerText();
  let text = await textOf();
  let picture: Buffer = Buffer.alloc(0);
  for (let tries = 0; tries < 20; tries++) {
    picture = await p.screenshot({ fullPage: false, animations: "disabled" });
    const after = await textOf();
    if (after === text) break;
    text = after;
  }
  return { text, picture };
}

export interface ShotScene {
  page: Page;
  context: BrowserContext;
  /** The page clock's frozen time (context.clock.setFixedTime): relative times are computed from it. */
  clockFrozenAt: number;
  /** The operator token a fresh tab signs in with (unless `signedIn: false`). */
  token: string;
}

/**
 * Write <name>.png under SCREENSHOTS, after checking that the picture depends only on what the page shows:
 * the same view rendered from scratch in a fresh tab (same URL, viewport, frozen clock, token) must be
 * byte-identical. The pointer is moved away first, so no hover state differs.
 */
export async function shot(scene: ShotScene, name: string, opts: { signedIn: boolean } = { signedIn: true }) {
  const { page, context } = scene;
  await page.mouse.move(0, 0);
  // Relative times ("3 min ago") are computed from the page's clock: it must still stand where it was frozen.
  expect(await page.evaluate(() => Date.now())).toBe(scene.clockFrozenAt);
  const { text, picture } = await stillPicture(page);
  const fresh = await context.newPage();
  try {
    await fresh.setViewportSize(page.viewportSize()!);
    if (opts.signedIn)
      await fresh.addInitScript(([key, token]) => sessionStorage.setItem(key, token), [TOKEN_KEY, scene.token]);
    await fresh.goto(page.url());
    await fresh.mouse.move(0, 0);
    let again: Buffer = Buffer.alloc(0);
    await expect
      .poll(
        async () => {
          const still = await stillPicture(fresh);
          again = still.picture;
          return still.text;
        },
        { timeout: 20_000 },
      )
      .toBe(text);
    if (!again.equals(picture)) {
      const kept = join(tmpdir(), `switchboard-${name}-fresh.png`);
      writeFileSync(kept, again);
      writeFileSync(join(tmpdir(), `switchboard-${name}-first.png`), picture);
      expect.fail(`${name}.png: a fresh render of the same view differs in its pixels (kept as ${kept})`);
    }
  } finally {
    await fresh.close();
  }
  mkdirSync(SCREENSHOTS, { recursive: true });
  writeFileSync(join(SCREENSHOTS, `${name}.png`), picture);
}

/**
 * Chromium with a fresh profile, a 1280×800 page and its clock frozen at `clockFrozenAt` (so relative times
 * read the same in every run); `close` also removes the profile.
 */
export async function openBrowser(executablePath: string, clockFrozenAt: number) {
  const profileDir = mkdtempSync(join(tmpdir(), "switchboard-chromium-"));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: LAUNCH_ARGS,
  });
  await context.clock.setFixedTime(clockFrozenAt);
  const page = context.pages()[0] ?? (await context.newPage());
  const close = async () => {
    await context.close();
    rmSync(profileDir, { recursive: true, force: true });
  };
  return { context, page, close };
}
