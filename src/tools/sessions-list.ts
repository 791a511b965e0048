import { z } from "zod";
import { invalid } from "../errors";
import { sanitizeHistoryMessages } from "../policy/history-sanitize";
import type { ListPage } from "../registry/registry-object";
import type { SessionRow } from "../registry/row";
import { canonicalKeyOfRow, mergePages, sessionIndex } from "../registry/session-index";
import { jsonBytes, LIST_RESULT_MAX_BYTES, PREVIEW_ROW_MAX_BYTES } from "../session/byte-budget";
import type { ToolContext } from "./context";
import { defineTool } from "./definition";
import { mapPool } from "./pool";
import { visibleScope } from "./resolve";

/** `,"messages":` added to a row that carries a preview. */
const PREVIEW_FIELD_BYTES = 12;
/** A preview always has room for one short message (or the oversize placeholder). */
const MIN_PREVIEW_BYTES = 2048;

export const SESSION_KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;
export const LIST_DEFAULT_LIMIT = 50;
export const LIST_MAX_LIMIT = 200;
export const MESSAGE_LIMIT_MAX = 20;
/** Input bounds (docs/limits.md): beyond them a 400 names the field; `limit`/`messageLimit` are clamped instead. */
export const KINDS_MAX_ITEMS = 256;
export const ACTIVE_MINUTES_MAX = 10_000_000;
export const CURSOR_MAX_CHARS = 2048;

/** Longest `search` text (docs/limits.md). */
export const SEARCH_MAX_CHARS = 256;

// Strict: an unknown parameter is a 400 naming it (src/tools/registry.ts), never silently ignored —
// OpenClaw's newer filters this gateway does not have (activeOnly, relationship, …) would otherwise
// answer an unfiltered listing.
export const sessionsListSchema = z.strictObject({
  kinds: z
    .array(z.string().max(64))
    .max(KINDS_MAX_ITEMS)
    .optional()
    .describe('Only these kinds: any of "main", "group", "cron", "hook", "node", "other".'),
  limit: z
    .number()
    .min(1)
    .optional()
    .describe(`Max rows (default ${LIST_DEFAULT_LIMIT}, clamped to ${LIST_MAX_LIMIT}).`),
  activeMinutes: z
    .number()
    .min(1)
    .max(ACTIVE_MINUTES_MAX)
    .optional()
    .describe(`Only sessions updated within the last N minutes (1–${ACTIVE_MINUTES_MAX}).`),
  messageLimit: z
    .number()
    .min(0)
    .optional()
    .describe(
      `Include the last N non-tool messages per row, sanitised like sessions_history (0 = none, max ${MESSAGE_LIMIT_MAX}; at most 16 KiB per row: \`truncated: true\` when cut).`,
    ),
  cursor: z.string().max(CURSOR_MAX_CHARS).optional().describe("nextCursor of a previous page, to read further."),
  label: z.string().min(1).max(512).optional().describe("Only sessions with exactly this label (case-sensitive)."),
  agentId: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe("Only this agent's sessions (yours, or another agent's when visibility and agentToAgent allow it)."),
  search: z
    .string()
    .min(1)
    .max(SEARCH_MAX_CHARS)
    .optional()
    .describe(
      "Case-insensitive text in the key, label, sessionId, kind, display name, channel or model. Each page scans at most 2,000 rows per index shard: a page may hold fewer rows than `limit` and still carry nextCursor.",
    ),
});
export type SessionsListArgs = z.infer<typeof sessionsListSchema>;

export interface SessionsListResult {
  count: number;
  sessions: SessionRow[];
  /** Present when more rows may follow; pass back as `cursor`. */
  nextCursor?: string;
  /** Which scope produced this page, so a scoped caller knows the listing is scoped. */
  visibility: string;
  /**
   * Present (true) when message previews were cut by their byte budget: some rows' `messages` hold
   * fewer than `messageLimit` messages (each row's preview is at most PREVIEW_ROW_MAX_BYTES, or an equal
   * share of what the rows leave of LIST_RESULT_MAX_BYTES). The rows themselves are never cut.
   */
  truncated?: true;
}

/** Valid kinds, each once: the registry's query binds one variable per kind, so its size never grows with the input. */
export function normalizeKinds(raw: readonly string[]): string[] {
  const valid = new Set<string>();
  for (const k of raw) {
    const kind = k.trim().toLowerCase();
    if ((SESSION_KINDS as readonly string[]).includes(kind)) valid.add(kind);
    if (valid.size === SESSION_KINDS.length) break;
  }
  return [...valid];
}

export async function sessionsList(ctx: ToolContext, args: SessionsListArgs): Promise<SessionsListResult> {
  const limit = Math.min(LIST_MAX_LIMIT, Math.max(1, Math.floor(args.limit ?? LIST_DEFAULT_LIMIT)));
  const messageLimit = Math.min(MESSAGE_LIMIT_MAX, Math.max(0, Math.floor(args.messageLimit ?? 0)));
  const kinds = normalizeKinds(args.kinds ?? []);
  const activeSince =
    args.activeMinutes !== undefined ? Date.now() - Math.max(1, Math.floor(args.activeMinutes)) * 60_000 : undefined;
  const cursor = args.cursor ? decodeCursor(args.cursor) : undefined;

  // Visibility is pushed into each shard's query (scope), so LIMIT applies to visible rows only.
  const { scope, agents: visibleAgents, visibility } = visibleScope(ctx);
  const onlyAgent = args.agentId?.trim().toLowerCase();
  // `agentId` filters: an agent the caller may not see (or that does not exist) lists nothing.
  const agents = onlyAgent === undefined ? visibleAgents : visibleAgents.filter((id) => id === onlyAgent);

  const pages: ListPage[] = await Promise.all(
    agents.map((agentId) =>
      sessionIndex(ctx.env, ctx.cfg, agentId).list({
        scope,
        kinds: kinds.length ? kinds : undefined,
        activeSince,
        limit,
        cursor,
        ...(args.label !== undefined ? { label: args.label } : {}),
        ...(args.search !== undefined ? { search: args.search.toLowerCase() } : {}),
      }),
    ),
  );
  // Merge agents by (updatedAt desc, key desc): the order every shard uses, so the cursor stays valid.
  const page = mergePages(pages, limit);
  const rows = page.rows;
  const result: SessionsListResult = { count: rows.length, sessions: rows, visibility };
  if (page.next) result.nextCursor = encodeCursor(page.next);

  if (messageLimit > 0 && rows.length > 0) {
    // Previews are history pages: the same heads, the same sanitiser (redaction, text cap, tool results
    // hidden, oversize placeholder), each within PREVIEW_ROW_MAX_BYTES — a glance, not a read (that is
    // sessions_history) — or its equal share of what the rows leave of the result budget when smaller.
    const left = LIST_RESULT_MAX_BYTES - jsonBytes(JSON.stringify(result));
    const share = Math.max(
      MIN_PREVIEW_BYTES,
      Math.min(PREVIEW_ROW_MAX_BYTES, Math.floor(left / rows.length) - PREVIEW_FIELD_BYTES),
    );
    let cut = false;
    await mapPool(rows, 4, async (row) => {
      const page = await ctx.env.SESSIONS.getByName(canonicalKeyOfRow(row)).history({
        limit: messageLimit,
        includeTools: false,
        maxBytes: share,
      });
      const s = sanitizeHistoryMessages(page.messages, share);
      if (page.cutByBytes || s.droppedMessages) cut = true;
      row.messages = s.messages as Record<string, unknown>[];
    });
    if (cut) result.truncated = true;
  }
  return result;
}

/** Keyset cursor of a listing page (sessions_list and `GET /v1/sessions` share it). */
export function encodeCursor(c: { updatedAt: number; key: string }): string {
  return btoa(JSON.stringify([c.updatedAt, c.key])).replace(/=+$/, "");
}

export function decodeCursor(s: string): { updatedAt: number; key: string } {
  try {
    const [updatedAt, key] = JSON.parse(atob(s)) as [number, string];
    if (
      typeof updatedAt !== "number" ||
      !Number.isSafeInteger(updatedAt) ||
      typeof key !== "string" ||
      key.length > 1024
    )
      throw new Error();
    return { updatedAt, key };
  } catch {
    throw invalid("cursor: not a cursor returned by a previous listing page");
  }
}

export const sessionsListTool = defineTool({
  name: "sessions_list",
  description:
    "List visible sessions with optional filters for kind, recent activity, label, agent and search text, and last messages. Use this to discover a target session before calling sessions_history or sessions_send.",
  schema: sessionsListSchema,
  handler: sessionsList,
  subagents: "orchestrators",
});
