import type { Hono } from "hono";
import { notFound } from "../errors";
import { callExtension } from "../session/session-object";
import type { AppEnv } from "./app-env";
import { rpc, targetOf } from "./route-helpers";

/**
 * A sub-agent's spawn attachments over REST, so its runs can read them (a webhook runtime with its
 * run token may read only its own session's files):
 *   GET /v1/sessions/{key}/attachments          → { sessionKey, count, attachments: [{ name, mimeType?, bytes, sha256 }] }
 *   GET /v1/sessions/{key}/attachments/{name}   → the bytes (Content-Type = the file's mimeType)
 */
export function attachmentsRoutes(app: Hono<AppEnv>): void {
  const target = (c: import("hono").Context<AppEnv>) => targetOf(c).canonicalKey;

  app.get("/v1/sessions/:key/attachments", async (c) => {
    const key = target(c);
    const list = await rpc(callExtension(c.env.SESSIONS.getByName(key), "subagent-lifecycle", "attachments"));
    return c.json({ sessionKey: key, count: list.length, attachments: list });
  });

  app.get("/v1/sessions/:key/attachments/:name", async (c) => {
    const key = target(c);
    const name = c.req.param("name");
    const file = await rpc(callExtension(c.env.SESSIONS.getByName(key), "subagent-lifecycle", "attachment", name));
    if (!file) throw notFound(`Attachment not found: ${name}`);
    return new Response(file.data, {
      headers: {
        "Content-Type": file.mimeType ?? "application/octet-stream",
        "Content-Length": String(file.bytes),
        "X-Attachment-Sha256": file.sha256,
      },
    });
  });
}
