import { z } from "zod";
import { agentModel } from "../config/load";
import type { Config } from "../config/schema";
import { splitModelRef } from "../runners/models";
import { estimateCostUsd } from "../spawn/announce-format";
import { spawnAllowlist } from "../tools/agents-list";
import type { SessionRow } from "./row";
import { sessionRowSchema } from "./row-schema";
import { canonicalKeyOfRow, sessionIndex } from "./session-index";

/**
 * A session's sub-agents as a tree (the console's "Sub-agents" tab, `GET /v1/sessions/{key}/tree`): the
 * session, its children, theirs, … read level by level from the index's children lookup (the
 * `sessions_children` index of each shard, as the `tree` visibility of sessions_list reads it). Bounded
 * (docs/limits.md): at most TREE_MAX_DEPTH levels below the session and TREE_MAX_NODES nodes in all;
 * `truncated` says a bound cut it.
 */

/** `agents.defaults.subagents.maxSpawnDepth` is at most 5: no tree is deeper. */
export const TREE_MAX_DEPTH = 5;
export const TREE_MAX_NODES = 200;

/** A node: the fields of its session row (src/registry/row-schema.ts) that the tree shows, and its place in it. */
export const treeNodeSchema = sessionRowSchema
  .pick({
    key: true,
    agentId: true,
    label: true,
    status: true,
    startedAt: true,
    endedAt: true,
    runtimeMs: true,
    updatedAt: true,
    model: true,
    totalTokens: true,
    inputTokens: true,
    outputTokens: true,
    archived: true,
  })
  .extend({
    parentKey: z.string().nullable().describe("The session that spawned it; null for the tree's root"),
    depth: z.number().int().describe("0 for the root, 1 for its children, …"),
    costUsd: z
      .number()
      .nullable()
      .describe("Estimated from the model's prices (models.providers.*.models[].cost); null without prices"),
  })
  .meta({ id: "TreeNode" });

export const sessionTreeSchema = z
  .strictObject({
    sessionKey: z.string(),
    nodes: z.array(treeNodeSchema).describe("The root first, then each level in the index's order (newest first)"),
    truncated: z.boolean().describe(`A bound cut the tree (${TREE_MAX_DEPTH} levels, ${TREE_MAX_NODES} nodes)`),
  })
  .meta({ id: "SessionTree", description: "A session and its sub-agents, level by level." });

export type TreeNode = z.infer<typeof treeNodeSchema>;
export type SessionTree = z.infer<typeof sessionTreeSchema>;

/** The model's prices: a row names the model by id, the config by `<provider>/<model>`. */
function costOf(cfg: Config, row: SessionRow): number | null {
  const ref = row.model?.includes("/") ? row.model : agentModel(cfg, row.agentId);
  const parts = splitModelRef(ref);
  // A session that ran another model than its agent's (a per-session override) has prices we cannot name.
  if (!parts || (row.model && !row.model.includes("/") && parts.modelId !== row.model)) return null;
  const cost = cfg.models.providers[parts.provider]?.models?.find((m) => m.id === parts.modelId)?.cost;
  return estimateCostUsd({ input: row.inputTokens, output: row.outputTokens }, cost);
}

function nodeOf(cfg: Config, row: SessionRow, parentKey: string | null, depth: number): TreeNode {
  const node: TreeNode = {
    key: row.key,
    parentKey,
    depth,
    agentId: row.agentId,
    updatedAt: row.updatedAt,
    totalTokens: row.totalTokens,
    inputTokens: row.inputTokens,
    outputTokens: row.outputTokens,
    costUsd: costOf(cfg, row),
  };
  for (const f of ["label", "status", "startedAt", "endedAt", "runtimeMs", "model", "archived"] as const)
    if (row[f] !== undefined) (node as Record<string, unknown>)[f] = row[f];
  return node;
}

/**
 * The tree under `root` (its row first). Children are looked up in the index of every agent the parent's
 * agent may spawn (`subagents.allowAgents`, the parent's own agent included); `visible` filters the agents
 * a caller may see.
 */
export async function subagentTree(
  env: Env,
  cfg: Config,
  root: SessionRow,
  visible: (agentId: string) => boolean,
): Promise<SessionTree> {
  const nodes: TreeNode[] = [nodeOf(cfg, root, null, 0)];
  let level: TreeNode[] = nodes;
  let truncated = false;
  for (let depth = 1; depth <= TREE_MAX_DEPTH && level.length > 0; depth++) {
    const next: TreeNode[] = [];
    for (const parent of level) {
      const parentKey = parent.depth === 0 ? canonicalKeyOfRow(root) : parent.key;
      const agents = [parent.agentId, ...spawnAllowlist(cfg, parent.agentId).ids].filter(
        (id, i, all) => all.indexOf(id) === i && visible(id),
      );
      const room = TREE_MAX_NODES - nodes.length - next.length;
      if (room <= 0) {
        truncated = true;
        break;
      }
      const pages = await Promise.all(
        agents.map((agentId) =>
          sessionIndex(env, cfg, agentId).list({ scope: { type: "tree", key: parentKey }, limit: room + 1 }),
        ),
      );
      // The tree scope also returns the parent's own row; children are the rows it spawned.
      const children = pages
        .flatMap((p) => p.rows)
        .filter((r) => r.spawnedBy === parentKey)
        .sort((a, b) => b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : -1));
      if (children.length > room || pages.some((p) => p.next)) truncated = true;
      next.push(...children.slice(0, room).map((r) => nodeOf(cfg, r, parent.key, depth)));
    }
    nodes.push(...next);
    level = next;
  }
  return { sessionKey: root.key, nodes, truncated };
}
