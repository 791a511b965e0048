import type { Context } from "hono";
import { setMetric } from "hono/timing";
import type { AppEnv } from "./app-env";

/**
 * A `ToolContext.time` that adds each phase's wall time to the response's Server-Timing header
 * (hono/timing, mounted in app.ts). Clocks in a Worker advance only across I/O, which is exactly what
 * the phases are: calls into objects. The header carries durations only, never keys or ids.
 */
export function phaseTimer(c: Context<AppEnv>) {
  return async <T>(phase: string, work: Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await work;
    } finally {
      setMetric(c, phase, performance.now() - t0);
    }
  };
}
