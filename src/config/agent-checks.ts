import { type EnvLookup, resolveModelTarget } from "../runners/model-resolution";
import { OPENCLAW_DEFAULT_MODEL } from "../runners/provider-catalog";
import { INVALID_THINKING, parseThinkingLevel } from "../runners/thinking";
import type { Config } from "./schema";

/**
 * What a loaded config means for its agents, checked once when it loads and reported on `GET /healthz`
 * (operator) before anything else: which agent is the default when the roster does not say, agents that
 * cannot run here (their runtime), and every agent whose model does not resolve — named, so a pasted
 * config never fails silently at its first run (docs/openclaw-carry-over.md).
 */
export function agentWarnings(cfg: Config, env: EnvLookup, hasWorkersAi: boolean): string[] {
  const out: string[] = [];
  const { roster, defaultId, defaults } = cfg.agents;
  const owner = defaults.systemAgent?.agentId?.trim().toLowerCase();
  const ownerKnown = !!owner && roster.some((a) => a.id === owner);
  const marked = Object.values(cfg.agents.entries).filter((e) => e.default === true).length;
  if (owner && !ownerKnown)
    out.push(
      `agents.defaults.systemAgent.agentId: "${owner}" is not a configured agent; the default agent is "${defaultId}"`,
    );
  if (!ownerKnown && marked > 1)
    out.push(`agents.entries: more than one entry has default: true; the first, "${defaultId}", is the default agent`);
  else if (roster.length > 1 && !ownerKnown && marked === 0)
    out.push(
      `agents.entries: ${roster.length} agents and no default (set agents.defaults.systemAgent.agentId, or default: true on one entry); "main" and un-prefixed session keys go to the first, "${defaultId}"`,
    );

  for (const a of roster) {
    if (a.runtime.type === "unavailable") {
      const why =
        a.runtime.requested === "acp"
          ? "an ACP harness (an external coding agent) runs outside this gateway"
          : "it is not a runtime this gateway knows (embedded, webhook)";
      out.push(
        `agents.entries.${a.id}.runtime.type: "${a.runtime.requested}" is not supported (${why}); agent "${a.id}" is unavailable: messages to its sessions are refused`,
      );
      continue;
    }
    if (a.runtime.type === "webhook") continue;
    const ref = a.model ?? defaults.model!;
    const target = resolveModelTarget(cfg, ref, env, { agentId: a.id, hasWorkersAi });
    if (!target.ok) {
      const where = a.model ? `agents.entries.${a.id}.model` : "agents.defaults.model";
      out.push(`${where}: agent "${a.id}" cannot run: ${target.problem}`);
    }
  }

  const modelChecks: [string | undefined, string, string][] = [
    [defaults.subagents.model, "agents.defaults.subagents.model", "sessions_spawn without a model fails"],
    [defaults.compaction.model, "agents.defaults.compaction.model", "compaction uses the session's model instead"],
    ...roster.map((a): [string | undefined, string, string] => [
      a.subagents?.model,
      `agents.entries.${a.id}.subagents.model`,
      "its sessions_spawn without a model fails",
    ]),
  ];
  for (const [ref, path, effect] of modelChecks) {
    if (!ref) continue;
    const target = resolveModelTarget(cfg, ref, env, { hasWorkersAi });
    if (!target.ok) out.push(`${path}: ${target.problem}; ${effect}`);
  }
  // A sub-agent thinking default that is no level is dropped at spawn: say so when the config loads.
  const thinkingChecks: [string | undefined, string][] = [
    [defaults.subagents.thinking, "agents.defaults.subagents.thinking"],
    ...roster.map((a): [string | undefined, string] => [
      a.subagents?.thinking,
      `agents.entries.${a.id}.subagents.thinking`,
    ]),
  ];
  for (const [level, path] of thinkingChecks)
    if (level !== undefined && !parseThinkingLevel(level))
      out.push(
        `${path}: ${INVALID_THINKING(level)} Ignored: a sub-agent gets no thinking level unless sessions_spawn names one`,
      );
  return out;
}

/** The warning when no model is configured and OpenClaw's default cannot run here either (`why`: its problem). */
export function echoFallbackWarning(why: string): string {
  return `agents.defaults.model: not set, and OpenClaw's default ${OPENCLAW_DEFAULT_MODEL} cannot run here (${why.replace(/^invalid model: \S+ \((.*)\)$/, "$1")}); agents without a model run on the offline builtin/echo`;
}
