import type { Hono } from "hono";
import { z } from "zod";
import { configWarnings } from "../config/load";
import { redactSecrets } from "../config/redact";
import { callExtension } from "../session/extensions";
import { RUNS_LIST_MAX, runSummarySchema } from "../session/runs-list-rpc";
import type { AppEnv } from "./app-env";
import { routeDoc } from "./route-doc";
import { keyParam, rpc, targetOf } from "./route-helpers";
import { assertOperator } from "./scopes";
import { intQuery, valid } from "./validate";

export const effectiveConfigSchema = z
  .strictObject({
    config: z
      .record(z.string(), z.unknown())
      .describe("CONFIG after defaults and validation, with every secret replaced by `[redacted]`"),
    warnings: z.array(z.string()).describe("What of CONFIG was mapped, clamped or ignored"),
  })
  .meta({ id: "EffectiveConfig" });

export const runsPageSchema = z.strictObject({
  sessionKey: z.string(),
  count: z.number().int(),
  runs: z.array(runSummarySchema),
});

/** What the operator console (/console) reads beyond the other /v1 routes. */
export function consoleRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/config",
    routeDoc({
      tag: "meta",
      summary: "The effective configuration, secrets redacted (operator token only)",
      ok: { description: "Configuration and its warnings", schema: effectiveConfigSchema },
      errors: [403],
    }),
    (c) => {
      assertOperator(c.get("principal"), "Reading the configuration");
      const cfg = c.get("cfg");
      return c.json({
        config: redactSecrets(cfg) as Record<string, unknown>,
        warnings: configWarnings(cfg),
      } satisfies z.infer<typeof effectiveConfigSchema>);
    },
  );

  app.get(
    "/v1/sessions/:key/runs",
    routeDoc({
      tag: "runs",
      summary: "A session's most recent runs, newest first",
      description:
        "Reply and error texts are cut to 1000 characters (`textTruncated`); GET /v1/runs/{id} has them whole.",
      ok: { description: "Runs", schema: runsPageSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    valid("query", z.object({ limit: intQuery({ min: 1, max: RUNS_LIST_MAX, def: 20, description: "Rows" }) })),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const { limit } = c.req.valid("query");
      const runs = await rpc(callExtension(c.env.SESSIONS.getByName(key), "runs", "list", { limit }));
      return c.json({ sessionKey: key, count: runs.length, runs } satisfies z.infer<typeof runsPageSchema>);
    },
  );
}
