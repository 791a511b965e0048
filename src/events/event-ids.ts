/**
 * Event ids of both streams (docs/events.md). Opaque to clients; inside they are `<incarnation>:<n>`:
 * the session stream's incarnation is the session's `sessionId` (a new one each time the key's session
 * is created again after a delete or archive, when seqs restart at 1), the run stream's a random token
 * of the in-memory record of the running run (lost, and made anew, when the object restarts). A resume
 * id of another incarnation therefore never reads as a position in this one: nothing is skipped.
 */
export const EVENT_ID_MAX_CHARS = 80;

/** What a route accepts as `Last-Event-ID` / `lastEventId`: a bare number (legacy, or `0`) or `<incarnation>:<n>`. */
export const EVENT_ID_PATTERN = /^(?:\d{1,16}|[A-Za-z0-9-]{1,60}:\d{1,16})$/;

export function eventId(incarnation: string, n: number): string {
  return `${incarnation}:${n}`;
}

/**
 * Where a resume id points in the incarnation `current`: `{after: n}` for one of its own ids, `{after: 0}`
 * for `0` (from the start, whatever the incarnation), `"foreign"` for anything else — an id of another
 * incarnation, or a bare number from before ids carried one.
 */
export function resumeAfter(raw: string, current: string): { after: number } | "foreign" {
  if (raw === "0") return { after: 0 };
  const colon = raw.lastIndexOf(":");
  if (colon < 0 || raw.slice(0, colon) !== current) return "foreign";
  const n = Number(raw.slice(colon + 1));
  return Number.isSafeInteger(n) && n >= 0 ? { after: n } : "foreign";
}

/** A fresh run-stream incarnation: 12 hex digits, random. */
export function newRunIncarnation(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
