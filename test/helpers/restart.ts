import { evictDurableObject, runInDurableObject } from "cloudflare:test";

/**
 * The instances of the objects a test owns end, as they do in production, and only those: other test files
 * running at the same time are untouched (each file names its own objects). Storage stays; memory is lost.
 *
 * - `evict`: as on an idle eviction or a deploy (`evictDurableObject`): the instance goes once nothing is in
 *   flight. It refuses an object with work in flight (after 30 s: "it still has active references").
 * - `crash`: the instance ends at once, its in-flight work with it (a model call, a webhook POST), as when the
 *   machine fails: the object's own `ctx.abort()`. This is how a test loses a run's executor mid-run.
 *
 * An object that is not running has nothing in memory to lose: both accept it.
 */
export async function evict(...stubs: DurableObjectStub[]): Promise<void> {
  for (const stub of stubs)
    await evictDurableObject(stub).catch((err: unknown) => {
      if (!String(err).includes("not currently running")) throw err;
    });
}

const CRASH = "test: the instance crashed";

export async function crash(...stubs: DurableObjectStub[]): Promise<void> {
  for (const stub of stubs)
    await runInDurableObject(stub, (_obj, state) => state.abort(CRASH)).catch((err: unknown) => {
      if (!String(err).includes(CRASH)) throw err;
    });
}
