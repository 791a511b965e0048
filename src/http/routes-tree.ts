import type { Hono } from "hono";
import { forbidden, notFound } from "../errors";
import { sessionIndex } from "../registry/session-index";
import { sessionTreeSchema, subagentTree } from "../registry/subagent-tree";
import type { AppEnv } from "./app-env";
import { describe } from "./describe";
import { keyParam, targetOf } from "./route-helpers";
import { valid } from "./validate";

/** `GET /v1/sessions/{key}/tree`: the session and its sub-agents (src/registry/subagent-tree.ts), for the console. */
export function subagentTreeRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/sessions/:key/tree",
    describe({
      tag: "sessions",
      summary: "A session's sub-agent tree: children, their status, run time, tokens and cost",
      description:
        "Read from the session index, level by level: at most 5 levels and 200 nodes (`truncated`). An agent token sees the nodes of its own agent.",
      ok: { description: "The tree", schema: sessionTreeSchema },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam),
    async (c) => {
      const principal = c.get("principal");
      // A run token acts as one session only; the tree lists others.
      if (principal.role === "run") throw forbidden("The sub-agent tree needs the operator token or an agent token");
      const target = targetOf(c);
      const cfg = c.get("cfg");
      // The index row is written behind the session's changes: a session created a moment ago answers from its object.
      const root =
        (await sessionIndex(c.env, cfg, target.agentId).get(target.canonicalKey))?.row ??
        (await c.env.SESSIONS.getByName(target.canonicalKey).getRow());
      if (!root) throw notFound(`Session not found: ${target.canonicalKey}`);
      const visible = (agentId: string) => principal.role === "operator" || agentId === principal.agentId;
      return c.json(await subagentTree(c.env, cfg, root, visible));
    },
  );
}
