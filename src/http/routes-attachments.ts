import type { Hono } from "hono";
import { fromRpcError, notFound } from "../errors";
import { keyContextOf, parseSessionKey } from "../keys";
import type { ChildAttachment } from "../spawn/child-spawn";
import type { AppEnv } from "./app";
import { authorizeKey } from "./auth";

/**
 * A sub-agent's spawn attachments over REST, so its runs can read them (a webhook runtime with its
 * run token may read only its own session's files):
 *   GET /v1/sessions/{key}/attachments          → { sessionKey, count, attachments: [{ name, mimeType?, bytes, sha256 }] }
 *   GET /v1/sessions/{key}/attachments/{name}   → the bytes (Content-Type = the file's mimeType)
 */
export function attachmentsRoutes(app: Hono<AppEnv>): void {
  const target = (c: import("hono").Context<AppEnv>) => {
    const principal = c.get("principal");
    const agent = principal.role === "operator" ? undefined : principal.agentId;
    const parsed = parseSessionKey(c.req.param("key") ?? "", keyContextOf(c.get("cfg"), agent, principal.role === "run" ? principal.sessionKey : undefined));
    authorizeKey(principal, parsed);
    return parsed.canonicalKey;
  };
  const rpc = async <T>(p: Promise<unknown>): Promise<T> => {
    try {
      return (await p) as T;
    } catch (err) {
      throw fromRpcError(err);
    }
  };

  app.get("/v1/sessions/:key/attachments", async (c) => {
    const key = target(c);
    const list = await rpc<Omit<ChildAttachment, "data">[]>(c.env.SESSIONS.getByName(key).extensionCall("subagent-lifecycle", "attachments"));
    return c.json({ sessionKey: key, count: list.length, attachments: list });
  });

  app.get("/v1/sessions/:key/attachments/:name", async (c) => {
    const key = target(c);
    const name = c.req.param("name");
    const file = await rpc<ChildAttachment | null>(c.env.SESSIONS.getByName(key).extensionCall("subagent-lifecycle", "attachment", name));
    if (!file) throw notFound(`Attachment not found: ${name}`);
    return new Response(file.data, {
      headers: { "Content-Type": file.mimeType ?? "application/octet-stream", "Content-Length": String(file.bytes), "X-Attachment-Sha256": file.sha256 },
    });
  });
}
