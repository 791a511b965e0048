import { SwitchboardError } from "../errors";

/**
 * Send policy (docs/contract.md; test/policy/send-policy-e2e.test.ts): may a session deliver messages? A per-session override wins, then
 * the configured rules (deny short-circuits), then the configured default, then allow.
 */

export type SendPolicyAction = "allow" | "deny";
export type SendPolicyChatType = "direct" | "group" | "channel";

export interface SendPolicyRule {
  action: SendPolicyAction;
  match?: { channel?: string; chatType?: SendPolicyChatType; keyPrefix?: string; rawKeyPrefix?: string };
}

export interface SendPolicyConfig {
  default?: SendPolicyAction;
  rules?: SendPolicyRule[];
}

export interface SendPolicyInput {
  policy?: SendPolicyConfig;
  override?: SendPolicyAction | null;
  sessionKey: string;
  channel?: string | null;
  chatType?: string | null;
}

const norm = (v: unknown): string => (typeof v === "string" ? v.trim().toLowerCase() : "");

function normalizeAction(v: unknown): SendPolicyAction | undefined {
  const s = norm(v);
  return s === "allow" || s === "deny" ? s : undefined;
}

function normalizeChatType(v: unknown): SendPolicyChatType | undefined {
  const s = norm(v);
  if (s === "dm") return "direct";
  return s === "direct" || s === "group" || s === "channel" ? s : undefined;
}

/** `agent:<id>:<rest>` → `<rest>`; other keys unchanged (same split rules as the key parser: empty parts dropped). */
function stripAgentPrefix(key: string): string {
  const parts = key.split(":").filter(Boolean);
  return parts.length >= 3 && parts[0] === "agent" ? parts.slice(2).join(":") : key;
}

// Maps, not object literals: a key segment such as `constructor` must not hit Object.prototype.
const CHAT_TYPE_TOKENS = new Map<string, SendPolicyChatType>([
  ["group", "group"],
  ["channel", "channel"],
  ["direct", "direct"],
  ["dm", "direct"],
]);

/** `<channel>:group|channel|direct:<id>` and the per-account DM form `<channel>:<account>:direct:<peer>`. */
function channelFromKey(rest: string): string | undefined {
  const t = rest.split(":");
  if (t.length < 3 || CHAT_TYPE_TOKENS.has(t[0])) return undefined; // `direct:<peer>` names no channel
  if (CHAT_TYPE_TOKENS.has(t[1])) return t[0];
  if (t.length >= 4 && CHAT_TYPE_TOKENS.get(t[2]) === "direct") return t[0];
  return undefined;
}

function chatTypeFromKey(rest: string): SendPolicyChatType | undefined {
  const t = rest.split(":");
  // First chat-type token wins, so a peer id that happens to read `group` cannot override `direct`.
  for (const token of t) {
    const ct = CHAT_TYPE_TOKENS.get(token);
    if (ct) return ct;
  }
  if (rest.includes("@g.us")) return "group"; // WhatsApp group JIDs
  if (t.some((x) => x.startsWith("guild-")) && t.some((x) => x.startsWith("channel-"))) return "channel"; // Discord
  return undefined;
}

export function resolveSendPolicy(input: SendPolicyInput): SendPolicyAction {
  const override = normalizeAction(input.override);
  if (override) return override;
  const policy = input.policy;
  if (!policy) return "allow";

  const key = norm(input.sessionKey);
  const stripped = stripAgentPrefix(key);
  const channel = norm(input.channel) || channelFromKey(stripped);
  const chatType = normalizeChatType(input.chatType) ?? chatTypeFromKey(stripped);

  let allowMatched = false;
  for (const rule of policy.rules ?? []) {
    if (!rule || typeof rule !== "object") continue;
    const m = rule.match ?? {};
    // Every matcher present must hold; an unknown fact never satisfies a matcher.
    const wantChannel = norm(m.channel);
    if (wantChannel && wantChannel !== channel) continue;
    const wantChatType = m.chatType === undefined ? undefined : (normalizeChatType(m.chatType) ?? norm(m.chatType));
    if (wantChatType && wantChatType !== chatType) continue;
    const keyPrefix = norm(m.keyPrefix);
    // keyPrefix also sees the agent-less key, so `cron:` covers `agent:<id>:cron:…` too.
    if (keyPrefix && !key.startsWith(keyPrefix) && !stripped.startsWith(keyPrefix)) continue;
    const rawKeyPrefix = norm(m.rawKeyPrefix);
    if (rawKeyPrefix && !key.startsWith(rawKeyPrefix)) continue;
    // Reference: an unknown action counts as allow.
    if (normalizeAction(rule.action) === "deny") return "deny";
    allowMatched = true;
  }
  if (allowMatched) return "allow";
  return normalizeAction(policy.default) ?? "allow";
}

export const SEND_USAGE_REPLY = "⚙️ Usage: /send on|off|inherit";

const SEND_ARGS = new Map<string, { value: SendPolicyAction | null; word: string }>([
  ["on", { value: "allow", word: "on" }],
  ["allow", { value: "allow", word: "on" }],
  ["off", { value: "deny", word: "off" }],
  ["deny", { value: "deny", word: "off" }],
  ["inherit", { value: null, word: "inherit" }],
  ["default", { value: null, word: "inherit" }],
  ["reset", { value: null, word: "inherit" }],
]);

/**
 * The owner's standalone `/send on|off|inherit`. `null` = not a /send command (the message is
 * ordinary text); a reply without `value` = usage error; `value: null` = clear the override.
 */
export function parseSendCommand(text: string): null | { reply: string; value?: SendPolicyAction | null } {
  if (typeof text !== "string") return null;
  const m = /^\/send(?:\s+([\s\S]*))?$/i.exec(text.trim());
  if (!m) return null; // also rejects `/sender …`: the command must end or be followed by whitespace
  const args = (m[1] ?? "").trim().split(/\s+/).filter(Boolean);
  const arg = args.length === 1 ? SEND_ARGS.get(args[0].toLowerCase()) : undefined;
  if (!arg) return { reply: SEND_USAGE_REPLY };
  return { value: arg.value, reply: `⚙️ Send policy set to ${arg.word}.` };
}

/** `sessions.patch {sendPolicy}`: "allow" | "deny" (any case) or null to clear. */
export function parseSendPolicyPatch(value: unknown): SendPolicyAction | null {
  if (value === null) return null;
  const action = normalizeAction(value);
  if (!action) throw new SwitchboardError("invalid_request", 'invalid sendPolicy (use "allow"|"deny")');
  return action;
}
