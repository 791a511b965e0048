import { A2A_CONTENT_TYPE } from "@a2a-js/sdk";
import { type OutboundPayload, type PostWebhookResult, postWebhook } from "../channels/webhook";
import type { SessionHost } from "../session/host";
import { pushConfig, pushTargetOf } from "./push-store";
import { pushUrlProblem } from "./push-url";

/** The header A2A names for a config's `token` (what the SDK's own sender uses). */
export const PUSH_TOKEN_HEADER = "X-A2A-Notification-Token";

/**
 * One attempt of an A2A push notification, made by the outbox like any delivery (src/channels/outbox-attempts.ts:
 * claimed, retried with backoff, dead after MAX_DELIVERY_ATTEMPTS). The config is read now, not copied into the
 * outbox row: its token and credentials never appear in the delivery listing, and a config deleted or changed
 * since the state change is honoured — deleted is a dead letter that says so, never a POST to a URL the client
 * withdrew. The body is the `StreamResponse` queued with the row; it is signed with the config's token as the key
 * (docs/protocols.md, "Verifying a notification").
 */
export async function attemptPush(host: SessionHost, payload: OutboundPayload): Promise<PostWebhookResult> {
  const target = pushTargetOf(payload.idempotencyKey);
  const config = target && pushConfig(host.sql, target.runId, target.configId);
  if (!target || !config)
    return { outcome: "dead", error: `push notification config ${target?.configId ?? "?"} was deleted` };
  // Stored URLs passed this check when set; checked again so no row written before a tightening is ever sent.
  const problem = pushUrlProblem(config.url);
  if (problem) return { outcome: "dead", error: problem };
  const headers: Record<string, string> = { [PUSH_TOKEN_HEADER]: config.token };
  if (config.auth_scheme && config.auth_credentials)
    headers.Authorization = `${config.auth_scheme} ${config.auth_credentials}`;
  return postWebhook({
    url: config.url,
    secret: config.token,
    payload,
    body: { raw: payload.message, contentType: A2A_CONTENT_TYPE, headers },
  });
}
