import type { Config } from "../config/schema";
import type { Transcript } from "./transcript";
import type { EnqueueRequest, RunSnapshot, SessionMeta } from "./types";

/**
 * What the helpers a session object calls directly (the built-in model runner, sub-agent spawning and
 * attachments) may use of it. They take this instead of the SessionObject class so that the object can
 * import them without an import cycle (scripts/check-cycles.mjs); SessionObject satisfies it.
 */
export interface SessionHost {
  readonly key: string;
  readonly cfg: Config;
  readonly bindings: Env;
  readonly meta: SessionMeta | null;
  readonly sql: SqlStorage;
  readonly transcript: Transcript;
  /** Queue a run; `alsoInTransaction` writes its own rows in the same transaction as the run. */
  enqueue(req: EnqueueRequest, alsoInTransaction?: (host: SessionHost) => void): Promise<RunSnapshot>;
}
