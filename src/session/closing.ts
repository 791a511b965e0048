import { SwitchboardError, toRpcError } from "../errors";

/**
 * A session being deleted or archived refuses new work until it is gone.
 *
 * Deleting awaits other objects (slot release, thread unbind, registry) and archiving awaits R2, and a
 * Durable Object serves other calls during those awaits. Without this gate a message accepted in that
 * window (202) was wiped by the `deleteAll()` that followed: accepted and lost. The flag is set
 * synchronously before the first await and checked by every writer with no await between the check
 * and its transaction (test/session/close-race.test.ts). Memory only on purpose: a restart interrupts the
 * delete itself, and the session is then simply open again.
 */
export type ClosingReason = "deleted" | "archived";

const closing = new WeakMap<object, ClosingReason>();

/** Mark the session closing; returns the release (a no-op when an outer close already holds it). */
export function beginClosing(host: object, reason: ClosingReason): () => void {
  if (closing.has(host)) return () => {};
  closing.set(host, reason);
  return () => closing.delete(host);
}

/** Refuse (409) a write to a session that is being deleted or archived. */
export function assertOpen(host: object, key: string): void {
  const reason = closing.get(host);
  if (!reason) return;
  const what = reason === "deleted" ? "deleted" : "archived";
  throw toRpcError(
    new SwitchboardError(
      "conflict",
      `Session ${key} is being ${what}; nothing was accepted. Send again once it is gone.`,
    ),
  );
}
