import type { Hono } from "hono";
import { z } from "zod";
import { notFound } from "../errors";
import { callExtension } from "../session/extensions";
import { attachmentsSchema } from "./api-schemas";
import type { AppEnv } from "./app-env";
import { routeDoc } from "./route-doc";
import { keyParam, rpc, targetOf } from "./route-helpers";
import { valid } from "./validate";

/**
 * A sub-agent's spawn attachments over REST, so its runs can read them (a webhook runtime with its
 * run token may read only its own session's files).
 */
export function attachmentsRoutes(app: Hono<AppEnv>): void {
  app.get(
    "/v1/sessions/:key/attachments",
    routeDoc({
      tag: "sessions",
      summary: "Files attached to a sub-agent by sessions_spawn",
      ok: { description: "Attachments", schema: attachmentsSchema },
      errors: [400, 403],
    }),
    valid("param", keyParam),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const list = await rpc(callExtension(c.env.SESSIONS.getByName(key), "subagent-lifecycle", "attachments"));
      return c.json({ sessionKey: key, count: list.length, attachments: list } satisfies z.infer<
        typeof attachmentsSchema
      >);
    },
  );

  app.get(
    "/v1/sessions/:key/attachments/:name",
    routeDoc({
      tag: "sessions",
      summary: "One attachment's bytes (Content-Type is the file's mimeType; X-Attachment-Sha256 its hash)",
      ok: { description: "The file", contentType: "application/octet-stream" },
      errors: [400, 403, 404],
    }),
    valid("param", keyParam.extend({ name: z.string().max(512).describe("Attachment name") })),
    async (c) => {
      const key = targetOf(c).canonicalKey;
      const name = c.req.valid("param").name;
      const file = await rpc(callExtension(c.env.SESSIONS.getByName(key), "subagent-lifecycle", "attachment", name));
      if (!file) throw notFound(`Attachment not found: ${name}`);
      return new Response(file.data, {
        headers: {
          "Content-Type": file.mimeType ?? "application/octet-stream",
          "Content-Length": String(file.bytes),
          "X-Attachment-Sha256": file.sha256,
        },
      });
    },
  );
}
