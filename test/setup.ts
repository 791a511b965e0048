import { afterEach, vi } from "vitest";
import { setConfigOverride } from "../src/config/load";
import { releaseHangingRequests } from "./helpers/subagents";

/**
 * What every test of the workers project resets when it ends (vitest.config.ts `setupFiles`), so no test
 * file repeats it: model and webhook calls the fakes still hold are failed, the CONFIG override is
 * dropped and every spy and mock is restored. vitest runs after-hooks in reverse order of registration,
 * so a file's own `afterEach` (waiting for its children to settle, resetting its limits) runs first,
 * while its fakes still answer.
 */
afterEach(() => {
  releaseHangingRequests();
  setConfigOverride(null);
  vi.restoreAllMocks();
});
