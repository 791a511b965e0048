import { randomBytes } from "node:crypto";
import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, inject } from "vitest";
import { unstable_startWorker } from "wrangler";
import { openBrowser, TOKEN_KEY } from "./screenshot";

/**
 * What the console's browser tests share (test/node/console-*.test.ts): a local server standing in for the
 * agents' runtimes or model, the Worker under `wrangler dev` pointed at it, and Chromium signed in as the
 * operator.
 */

type Bindings = NonNullable<Parameters<typeof unstable_startWorker>[0]["bindings"]>;

export interface ConsoleRig {
  /** The Worker's URL. */
  base: string;
  context: BrowserContext;
  page: Page;
  /** When the Worker was ready: the browser's frozen clock, which screenshots need again. */
  clockFrozenAt: number;
  /** Closes the browser, the Worker and the local server (connections a failed test left open too). */
  close(): Promise<void>;
}

export interface ConsoleRigOptions {
  chromium: string;
  /** The operator's token: GATEWAY_TOKEN, and the token the page is signed in with. */
  token: string;
  /** Answers the Worker's calls to the local server (a runtime's webhook, a model's API). */
  serve: RequestListener;
  /** The Worker's bindings besides GATEWAY_TOKEN, given the local server's base URL. */
  bindings: (serverBase: string) => Bindings;
  /**
   * Where the token is put in session storage, as after the sign-in form: every page of the context, only
   * the first page (a test whose other tabs sign in themselves on another origin), or none (a test that
   * signs in through the form).
   */
  signIn: "context" | "page" | "none";
  /** Runs once the Worker is ready and the clock is taken, before the browser opens (seeding the store). */
  seed?: (base: string) => Promise<void>;
}

export async function startConsole(o: ConsoleRigOptions): Promise<ConsoleRig> {
  const server = createServer(o.serve);
  let dispose = async () => {};
  let closeBrowser = async () => {};
  const close = async () => {
    await closeBrowser();
    await dispose();
    server.closeAllConnections(); // a runtime's or model's reply a failed test left open
    await new Promise((r) => server.close(r));
  };
  try {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const serverBase = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // No fetch of the Request.cf sample from Cloudflare (scripts/dev.mjs): the test needs no network.
    process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
    const worker = await unstable_startWorker({
      config: "wrangler.jsonc",
      bindings: { GATEWAY_TOKEN: { type: "plain_text", value: o.token }, ...o.bindings(serverBase) },
      dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, persist: false, logLevel: "error" },
    });
    dispose = () => worker.dispose();
    await worker.ready;
    const base = String(await worker.url);
    const clockFrozenAt = Date.now();
    await o.seed?.(base);
    const browser = await openBrowser(o.chromium, clockFrozenAt);
    closeBrowser = browser.close;
    if (o.signIn !== "none") {
      const signedIn = o.signIn === "context" ? browser.context : browser.page;
      await signedIn.addInitScript(([key, token]) => sessionStorage.setItem(key, token), [TOKEN_KEY, o.token]);
    }
    return { base, context: browser.context, page: browser.page, clockFrozenAt, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The rig for one test file: started before its tests (not when no Chromium launches:
 * test/node/browser-setup.ts said why, and the file's `describe.skipIf` skips them), `started` handed what
 * it started, closed after them.
 */
export function useConsole(o: Omit<ConsoleRigOptions, "chromium"> & { started: (rig: ConsoleRig) => void }): void {
  let rig: ConsoleRig | undefined;
  beforeAll(async () => {
    const chromium = inject("chromium");
    if (!chromium) return;
    rig = await startConsole({ ...o, chromium });
    o.started(rig);
  }, 120_000);
  afterAll(() => rig?.close());
}

/**
 * The bindings of a console test about sub-agents: no agent tokens (not the developer's .dev.vars ones, for
 * npm start's agents), a signing secret of its own, and a CONFIG whose agents — `list` — answer with the
 * offline echo model and may spawn two levels deep, any agent; `more` is the rest of the CONFIG.
 */
export function subagentBindings(list: unknown[], more: Record<string, unknown> = {}): Bindings {
  return {
    AGENT_TOKENS: { type: "plain_text", value: "{}" },
    SIGNING_SECRET: { type: "plain_text", value: randomBytes(32).toString("base64url") },
    CONFIG: {
      type: "json",
      value: {
        agents: { defaults: { model: "builtin/echo", subagents: { maxSpawnDepth: 2, allowAgents: ["*"] } }, list },
        ...more,
      },
    },
  };
}
