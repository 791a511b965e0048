import type {
  AuthenticationInfo,
  ListTaskPushNotificationConfigsResponse,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import { RequestMalformedError, TaskNotFoundError } from "@a2a-js/sdk/errors";
import { callExtension } from "../session/extensions";
import type { RunSnapshot } from "../session/run-schema";
import type { PushConfigView, SetPushConfig } from "./push";
import {
  MAX_PUSH_CONFIGS_PER_TASK,
  PUSH_CONFIG_ID,
  PUSH_CREDENTIALS_MAX_CHARS,
  PUSH_TOKEN_MAX_CHARS,
} from "./push-store";
import { pushUrlProblem } from "./push-url";

/**
 * The push-notification config methods of an agent (docs/protocols.md, "Push notifications"): the input checked
 * here, in the Worker, before anything is stored; the configs kept by the task's session object (src/a2a/push.ts).
 */

/** What a read-back config shows for `authentication.credentials`: set, never repeated. */
export const REDACTED_CREDENTIALS = "[redacted]";

const TOKEN = /^[\x21-\x7e]+$/;
/** An HTTP auth scheme name (RFC 9110 token). */
const SCHEME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,32}$/;
const CREDENTIALS = /^[\x20-\x7e]+$/;

/** A fresh token when the client gave none: 32 random bytes, base64url; it is the signing key (push-delivery.ts). */
function newToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

/** The id of a config sent with `SendMessage` without one: fixed, so a retried send sets the same config again. */
export const SEND_CONFIG_ID = "send";

/**
 * A client's config, checked: bad input is a malformed request naming the field (limits: docs/limits.md). An empty
 * id is `defaultId` (a UUID unless given).
 */
export function checkedPushConfig(
  runId: string,
  c: TaskPushNotificationConfig,
  defaultId: string = crypto.randomUUID(),
): SetPushConfig {
  const id = c.id || defaultId;
  if (!PUSH_CONFIG_ID.test(id))
    throw new RequestMalformedError("id: 1 to 64 characters of letters, digits, `.`, `_` and `-`");
  const problem = pushUrlProblem(c.url ?? "");
  if (problem) throw new RequestMalformedError(problem);
  const token = c.token || newToken();
  if (token.length > PUSH_TOKEN_MAX_CHARS || !TOKEN.test(token))
    throw new RequestMalformedError(`token: at most ${PUSH_TOKEN_MAX_CHARS} visible ASCII characters, no spaces`);
  const auth: AuthenticationInfo | undefined = c.authentication;
  if (auth && (auth.scheme || auth.credentials)) {
    if (!SCHEME.test(auth.scheme)) throw new RequestMalformedError("authentication.scheme: an HTTP auth scheme name");
    if (auth.credentials.length > PUSH_CREDENTIALS_MAX_CHARS || !CREDENTIALS.test(auth.credentials))
      throw new RequestMalformedError(
        `authentication.credentials: 1 to ${PUSH_CREDENTIALS_MAX_CHARS} printable ASCII characters`,
      );
  }
  return {
    runId,
    id,
    url: c.url,
    token,
    tokenMade: !c.token,
    authScheme: auth?.scheme || null,
    authCredentials: auth?.scheme ? auth.credentials : null,
  };
}

function asA2A(v: PushConfigView): TaskPushNotificationConfig {
  return {
    tenant: "",
    id: v.id,
    taskId: v.runId,
    url: v.url,
    token: v.token,
    authentication:
      v.authScheme !== null
        ? { scheme: v.authScheme, credentials: v.hasCredentials ? REDACTED_CREDENTIALS : "" }
        : undefined,
  };
}

const stubOf = (env: Env, run: RunSnapshot) => env.SESSIONS.getByName(run.sessionKey);

export async function setPushConfig(env: Env, run: RunSnapshot, c: SetPushConfig): Promise<TaskPushNotificationConfig> {
  const out = await callExtension(stubOf(env, run), "a2a-push", "set", c);
  if (out === "not_found") throw new TaskNotFoundError(`Task not found: ${run.runId}`);
  if (out === "limit")
    throw new RequestMalformedError(
      `Task ${run.runId} already has ${MAX_PUSH_CONFIGS_PER_TASK} push notification configs (docs/limits.md): delete one first`,
    );
  return asA2A(out);
}

export async function getPushConfig(env: Env, run: RunSnapshot, id: string): Promise<TaskPushNotificationConfig> {
  const v = await callExtension(stubOf(env, run), "a2a-push", "get", { runId: run.runId, id });
  if (!v) throw new TaskNotFoundError(`Push notification config ${JSON.stringify(id)} not found for task ${run.runId}`);
  return asA2A(v);
}

/** All of a task's configs: at most MAX_PUSH_CONFIGS_PER_TASK, so one page. */
export async function listPushConfigs(env: Env, run: RunSnapshot): Promise<ListTaskPushNotificationConfigsResponse> {
  const list = await callExtension(stubOf(env, run), "a2a-push", "list", { runId: run.runId });
  if (!list) throw new TaskNotFoundError(`Task not found: ${run.runId}`);
  return { configs: list.map(asA2A), nextPageToken: "" };
}

/** Deleting a config that is not there succeeds: the outcome the client asked for holds. */
export async function deletePushConfig(env: Env, run: RunSnapshot, id: string): Promise<void> {
  await callExtension(stubOf(env, run), "a2a-push", "delete", { runId: run.runId, id });
}
