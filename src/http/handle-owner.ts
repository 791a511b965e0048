import type { Config } from "../config/schema";
import { notFound } from "../errors";
import { keyContextOf, type ParsedKey, parseSessionKey } from "../keys";
import { sessionKeyOfRun } from "../session/run-id";
import { authorizeKey } from "./auth";
import type { Principal } from "./principal";

/**
 * The one check behind every handle a caller names by id — a run id (`/v1/runs/{id}`, an MCP task, which is
 * a run) or a ledger task id (`/v1/tasks/{taskId}`): both are `<uuid>.<base64url(ownerKey)>`
 * (src/session/run-id.ts, src/tasks/task-id.ts), so the owning session is read from the id, with no lookup.
 *
 * An id we could not have minted — not that shape, a key our grammar refuses, or a key in a spelling other
 * than its canonical one (`main`, `current`, other letter case: minted ids always carry the canonical key,
 * so such an id is forged and would address an object no session lives in) — is a 404 naming the id; a
 * session outside the caller's scope is the 403 of `authorizeKey` (docs/contract.md, "Authentication and
 * scopes"). Each surface calls this once per request and reuses the key it answers.
 */
export function handleOwner(cfg: Config, principal: Principal, id: string, noun: "Run" | "Task"): string {
  const parsed = mintedOwner(cfg, id);
  if (!parsed) throw notFound(`${noun} not found: ${id}`);
  authorizeKey(principal, parsed);
  return parsed.canonicalKey;
}

/**
 * The owning session an id we minted names, or null for an id we could not have minted (see handleOwner). A
 * surface with its own scope rule and not-found error (A2A: src/a2a/handler.ts) starts from this.
 */
export function mintedOwner(cfg: Config, id: string): ParsedKey | null {
  const key = sessionKeyOfRun(id);
  if (!key) return null;
  let parsed: ParsedKey;
  try {
    parsed = parseSessionKey(key, keyContextOf(cfg));
  } catch {
    return null;
  }
  return parsed.canonicalKey === key ? parsed : null;
}
