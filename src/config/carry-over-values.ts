import { MAX_CONCURRENT_MAX } from "../lane/subagent-lane";
import { PROVIDER_APIS } from "../runners/provider-catalog";
import { parseThinkingLevel, THINKING_LEVELS } from "../runners/thinking";
import { type Doc, isObject, objectAt } from "./carry-over";

/**
 * Values OpenClaw accepts that the schema would refuse or misread, clamped or mapped before validation
 * (docs/openclaw-carry-over.md), each change one warning. Runs after the legacy keys moved
 * (src/config/carry-over.ts) and after `${VAR}` references were resolved (src/config/env-refs.ts).
 */
export function mapValues(doc: Doc, warnings: string[]): void {
  clampNumbers(doc, warnings);
  mapSendPolicyProvider(doc, warnings);
  normaliseSendPolicyValues(doc, warnings);
  normaliseThinkingLevels(doc, warnings);
  mapThreadBindings(doc, warnings);
  mapChannelWebhooks(doc, warnings);
  mapProviderApis(doc, warnings);
}

/** The longest run timeout a config may set: 30 days, as sessions_spawn's runTimeoutSeconds (src/tools/sessions-spawn-schema.ts). */
const MAX_TIMEOUT_SECONDS = 30 * 24 * 3600;

/** Ranges OpenClaw clamps at run time instead of refusing the config (docs/openclaw-carry-over.md). */
const CLAMPED: { path: string[]; min: number; max: number; integer: boolean }[] = [
  { path: ["session", "agentToAgent", "maxPingPongTurns"], min: 0, max: 5, integer: true },
  // Timeouts have a maximum like every input (docs/limits.md): 30 days, as sessions_spawn's runTimeoutSeconds,
  // so every deadline is a real time; OpenClaw accepts larger values, so they are clamped, not refused.
  // timeoutSeconds 0 stays OpenClaw's "no deadline": such a run is ended by its lease and the sweeper instead.
  { path: ["agents", "defaults", "timeoutSeconds"], min: 0, max: MAX_TIMEOUT_SECONDS, integer: true },
  { path: ["agents", "defaults", "subagents", "runTimeoutSeconds"], min: 0, max: MAX_TIMEOUT_SECONDS, integer: false },
  { path: ["agents", "defaults", "subagents", "announceTimeoutMs"], min: 1, max: 2_147_000_000, integer: true },
  // The slot bank keeps a row per lease (docs/subagent-lane.md); OpenClaw accepts any count, so a larger one is clamped.
  { path: ["agents", "defaults", "subagents", "maxConcurrent"], min: 1, max: MAX_CONCURRENT_MAX, integer: true },
];

function clampNumbers(doc: Doc, warnings: string[]): void {
  for (const { path, min, max, integer } of CLAMPED) {
    const parent = objectAt(doc, path.slice(0, -1), false);
    const leaf = path[path.length - 1];
    const value = parent?.[leaf];
    if (typeof value !== "number" || !Number.isFinite(value)) continue; // a non-number stays invalid: a 500 naming it
    const clamped = Math.min(max, Math.max(min, integer ? Math.floor(value) : value));
    if (clamped !== value) {
      parent![leaf] = clamped;
      warnings.push(`${path.join(".")}: ${value} clamped to ${clamped} (range ${min}–${max})`);
    }
  }
}

/**
 * Legacy send-policy rules matched on `provider`, renamed `channel`. Dropping it would widen a deny
 * rule to every channel (test/config/config-carry-over.test.ts), so it is mapped; the match schema is strict,
 * so any other unknown matcher fails the config instead of widening a rule.
 */
function mapSendPolicyProvider(doc: Doc, warnings: string[]): void {
  const rules = objectAt(doc, ["session", "sendPolicy"], false)?.rules;
  if (!Array.isArray(rules)) return;
  rules.forEach((rule, i) => {
    const match = isObject(rule) ? rule.match : undefined;
    if (!isObject(match) || match.provider === undefined) return;
    const path = `session.sendPolicy.rules.${i}.match`;
    if (match.channel === undefined) {
      match.channel = match.provider;
      warnings.push(`${path}.provider: mapped to ${path}.channel`);
    } else if (match.channel === match.provider) {
      warnings.push(`${path}.provider: ignored (same as ${path}.channel)`);
    } else {
      // Both set and different: the current key wins, as for every other legacy key.
      warnings.push(
        `${path}.provider: ignored ("${String(match.provider)}"; ${path}.channel "${String(match.channel)}" is set and wins)`,
      );
    }
    delete match.provider;
  });
}

/** OpenClaw reads rule actions and chat types case-insensitively, with `dm` meaning `direct` (src/policy/send-policy.ts). */
function normaliseSendPolicyValues(doc: Doc, warnings: string[]): void {
  const policy = objectAt(doc, ["session", "sendPolicy"], false);
  if (!policy) return;
  const lower = (holder: Doc, key: string, path: string, alias?: Record<string, string>) => {
    const v = holder[key];
    if (typeof v !== "string") return;
    const s = v.trim().toLowerCase();
    const mapped = alias?.[s] ?? s;
    if (mapped !== v) {
      holder[key] = mapped;
      warnings.push(`${path}: "${v}" mapped to "${mapped}"`);
    }
  };
  lower(policy, "default", "session.sendPolicy.default");
  if (!Array.isArray(policy.rules)) return;
  policy.rules.forEach((rule, i) => {
    if (!isObject(rule)) return;
    lower(rule, "action", `session.sendPolicy.rules.${i}.action`);
    if (isObject(rule.match))
      lower(rule.match, "chatType", `session.sendPolicy.rules.${i}.match.chatType`, { dm: "direct" });
  });
}

/**
 * `thinkingDefault` in any case and OpenClaw's spellings (`x-high`, `highest`, `false`) is its level; a
 * value that is no level (a typo) must not silently mean "no thinking": it is dropped with a warning
 * that says what applies instead.
 */
function normaliseThinkingLevels(doc: Doc, warnings: string[]): void {
  const holders: [Doc | undefined, string][] = [[objectAt(doc, ["agents", "defaults"], false), "agents.defaults"]];
  const entries = objectAt(doc, ["agents", "entries"], false);
  for (const [id, a] of Object.entries(entries ?? {})) if (isObject(a)) holders.push([a, `agents.entries.${id}`]);
  for (const [holder, path] of holders) {
    const raw = holder?.thinkingDefault;
    if (
      !holder ||
      raw === undefined ||
      (typeof raw === "string" && (THINKING_LEVELS as readonly string[]).includes(raw))
    )
      continue;
    const level = typeof raw === "string" || typeof raw === "boolean" ? parseThinkingLevel(raw) : undefined;
    if (level) {
      holder.thinkingDefault = level;
      warnings.push(`${path}.thinkingDefault: ${JSON.stringify(raw)} mapped to "${level}"`);
    } else {
      delete holder.thinkingDefault;
      const fallback = path === "agents.defaults" ? "the model's own default" : "agents.defaults.thinkingDefault";
      warnings.push(
        `${path}.thinkingDefault: ${JSON.stringify(raw)} is not a thinking level (${THINKING_LEVELS.join(", ")}); ignored, ${fallback} applies`,
      );
    }
  }
}

/**
 * OpenClaw's object form `{enabled?, spawnSessions?, idleHours?, maxAgeHours?, …}` → our boolean:
 * a channel's threads can bind spawned sub-agents unless bindings or spawning are turned off there or
 * in `session.threadBindings` (OpenClaw's `spawnSessions` defaults to true; its older name
 * `spawnSubagentSessions` is read too).
 */
function mapThreadBindings(doc: Doc, warnings: string[]): void {
  const sessionTb = objectAt(doc, ["session"], false)?.threadBindings;
  const spawnOf = (tb: Doc): unknown => tb.spawnSessions ?? tb.spawnSubagentSessions;
  const globalOn = isObject(sessionTb) ? sessionTb.enabled !== false && spawnOf(sessionTb) !== false : true;
  if (sessionTb !== undefined) {
    delete (doc.session as Doc).threadBindings;
    warnings.push(
      `session.threadBindings: ${globalOn ? "ignored" : "spawning off applied to every channel"} (idle and age limits are not enforced)`,
    );
  }
  const channels = isObject(doc.channels) ? doc.channels : {};
  for (const [name, ch] of Object.entries(channels)) {
    if (!isObject(ch)) continue;
    const tb = ch.threadBindings;
    if (isObject(tb)) {
      const on = globalOn && tb.enabled !== false && spawnOf(tb) !== false;
      ch.threadBindings = on;
      const read = new Set(["enabled", "spawnSessions", "spawnSubagentSessions"]);
      const ignored = Object.keys(tb).filter((k) => !read.has(k));
      warnings.push(
        `channels.${name}.threadBindings: object form mapped to ${on}${ignored.length ? ` (ignored: ${ignored.join(", ")})` : ""}`,
      );
    } else if (tb === true && !globalOn) {
      ch.threadBindings = false;
    }
  }
}

/**
 * OpenClaw channels whose `webhookUrl` / `webhookSecret` configure *inbound* webhooks (Telegram's webhook
 * mode and the like). Here those keys used to name the outbound delivery target; on these channels that
 * reading would POST every reply, signed with the inbound secret, to the old inbound endpoint.
 */
const INBOUND_WEBHOOK_CHANNELS = new Set(["telegram", "googlechat", "synology-chat", "zalo"]);

/**
 * Outbound delivery is `channels.<ch>.outbound.{url, secret}`. The older `webhookUrl`/`webhookSecret`
 * map to it where they can only have meant that (channels without an inbound webhook of that name in
 * OpenClaw); on the others they are OpenClaw's inbound settings and are ignored, with a warning that
 * says where outbound delivery is configured.
 */
function mapChannelWebhooks(doc: Doc, warnings: string[]): void {
  const channels = isObject(doc.channels) ? doc.channels : {};
  for (const [name, ch] of Object.entries(channels)) {
    if (!isObject(ch) || (ch.webhookUrl === undefined && ch.webhookSecret === undefined)) continue;
    const { webhookUrl, webhookSecret } = ch;
    delete ch.webhookUrl;
    delete ch.webhookSecret;
    const names = [
      webhookUrl !== undefined ? "webhookUrl" : "",
      webhookSecret !== undefined ? "webhookSecret" : "",
    ].filter(Boolean);
    const keys = names.length === 1 ? names[0] : `{${names.join(", ")}}`;
    if (INBOUND_WEBHOOK_CHANNELS.has(name.toLowerCase())) {
      warnings.push(
        `channels.${name}.${keys}: ignored (OpenClaw's inbound webhook for ${name}; this gateway receives messages at POST /v1/sessions/{key}/messages and delivers replies to channels.${name}.outbound.url)`,
      );
      continue;
    }
    if (isObject(ch.outbound)) {
      warnings.push(`channels.${name}.${keys}: ignored (channels.${name}.outbound is set and wins)`);
      continue;
    }
    if (webhookUrl === undefined) {
      warnings.push(`channels.${name}.webhookSecret: ignored (no webhookUrl to sign for)`);
      continue;
    }
    ch.outbound = { url: webhookUrl, ...(webhookSecret !== undefined ? { secret: webhookSecret } : {}) };
    warnings.push(
      `channels.${name}.${keys}: mapped to channels.${name}.outbound.${webhookSecret !== undefined ? "{url, secret}" : "url"}`,
    );
  }
}

function mapProviderApis(doc: Doc, warnings: string[]): void {
  const providers = objectAt(doc, ["models", "providers"], false);
  if (!providers) return;
  for (const [id, p] of Object.entries(providers)) {
    if (!isObject(p)) continue;
    if (p.api === "openai") {
      p.api = "openai-completions";
      warnings.push(`models.providers.${id}.api: "openai" mapped to "openai-completions"`);
    } else if (p.api === "ollama") {
      // Ollama serves the same models on its OpenAI-compatible endpoint, under /v1.
      p.api = "openai-completions";
      if (typeof p.baseUrl === "string" && !/\/v1\/?$/.test(p.baseUrl))
        p.baseUrl = `${p.baseUrl.replace(/\/+$/, "")}/v1`;
      warnings.push(
        `models.providers.${id}.api: "ollama" mapped to "openai-completions" (Ollama's OpenAI-compatible /v1 endpoint)`,
      );
    } else if (typeof p.api === "string" && !(PROVIDER_APIS as readonly string[]).includes(p.api)) {
      // The gateway stays up; a model of this provider is refused by name when an agent uses it.
      delete providers[id];
      warnings.push(
        `models.providers.${id}: ignored (api "${p.api}" is not supported; use one of ${PROVIDER_APIS.join(", ")})`,
      );
    }
  }
}
