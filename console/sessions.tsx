import { useEffect, useState } from "preact/hooks";
import { api } from "./api";
import { ErrorLine } from "./errors";
import { when } from "./format";
import { sessionHref } from "./router";
import { RowsHead } from "./table-parts";
import type { Agent, SessionRow } from "./types";

const KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;
const ACTIVITY = [
  { label: "Any time", minutes: 0 },
  { label: "Last hour", minutes: 60 },
  { label: "Last day", minutes: 1440 },
  { label: "Last week", minutes: 10080 },
];
export const PAGE_SIZE = 25;

/** A row shows an agent's main session as `main`; routes need the key with its agent. */
const fullKey = (s: SessionRow) => (s.key.startsWith("agent:") ? s.key : `agent:${s.agentId}:${s.key}`);

interface Listing {
  agentId: string;
  kinds: string[];
  activeMinutes: number;
  /** Cursors of the pages before the current one and of the current one (undefined: the first page). */
  cursors: (string | undefined)[];
}

// Kept across navigation so "back to sessions" returns to the same page. Only cursors are kept (one short
// string per page visited), never rows: one page of rows is held at a time, however long the listing.
let remembered: Listing | null = null;

interface Page {
  sessions: SessionRow[];
  nextCursor: string | null;
}

export function SessionsPage() {
  const [agents, setAgents] = useState<Agent[]>([]);
  const [listing, setListing] = useState<Listing | null>(remembered);
  const [page, setPage] = useState<Page | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(false);

  useEffect(() => {
    api<{ defaultAgentId: string; agents: Agent[] }>("GET", "/v1/agents")
      .then((r) => {
        setAgents(r.agents);
        setListing((l) => l ?? { agentId: r.defaultAgentId, kinds: [], activeMinutes: 0, cursors: [undefined] });
      })
      .catch(setError);
  }, []);

  useEffect(() => {
    if (!listing) return;
    remembered = listing;
    const q = new URLSearchParams({ agentId: listing.agentId, limit: String(PAGE_SIZE) });
    if (listing.kinds.length) q.set("kinds", listing.kinds.join(","));
    if (listing.activeMinutes) q.set("activeMinutes", String(listing.activeMinutes));
    const cursor = listing.cursors[listing.cursors.length - 1];
    if (cursor) q.set("cursor", cursor);
    let stale = false;
    setLoading(true);
    api<Page>("GET", `/v1/sessions?${q}`)
      .then((p) => {
        if (stale) return;
        setPage(p);
        setError(null);
      })
      .catch((e) => !stale && setError(e))
      .finally(() => !stale && setLoading(false));
    return () => {
      stale = true;
    };
  }, [listing]);

  if (!listing) return <ErrorLine error={error} />;
  const filter = (change: Partial<Listing>) => setListing({ ...listing, ...change, cursors: [undefined] });
  const pageNumber = listing.cursors.length;

  return (
    <section aria-labelledby="sessions-title">
      <h1 id="sessions-title">Sessions</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Agent
          <select value={listing.agentId} onChange={(e) => filter({ agentId: e.currentTarget.value })}>
            {agents.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name ? `${a.name} (${a.id})` : a.id}
              </option>
            ))}
          </select>
        </label>
        <fieldset>
          <legend>Kind</legend>
          {KINDS.map((k) => (
            <label key={k} class="check">
              <input
                type="checkbox"
                checked={listing.kinds.includes(k)}
                onChange={(e) =>
                  filter({
                    kinds: e.currentTarget.checked ? [...listing.kinds, k] : listing.kinds.filter((x) => x !== k),
                  })
                }
              />
              {k}
            </label>
          ))}
        </fieldset>
        <label>
          Activity
          <select
            value={String(listing.activeMinutes)}
            onChange={(e) => filter({ activeMinutes: Number(e.currentTarget.value) })}
          >
            {ACTIVITY.map((a) => (
              <option key={a.minutes} value={String(a.minutes)}>
                {a.label}
              </option>
            ))}
          </select>
        </label>
      </form>
      <ErrorLine error={error} />
      <div class="pager" aria-live="polite">
        <button
          type="button"
          disabled={pageNumber === 1 || loading}
          onClick={() => setListing({ ...listing, cursors: listing.cursors.slice(0, -1) })}
        >
          ← Previous
        </button>
        <span data-testid="page-number">Page {pageNumber}</span>
        <button
          type="button"
          disabled={!page?.nextCursor || loading}
          onClick={() => page?.nextCursor && setListing({ ...listing, cursors: [...listing.cursors, page.nextCursor] })}
        >
          Next →
        </button>
      </div>
      {page && page.sessions.length === 0 && <p>No sessions match.</p>}
      {page && page.sessions.length > 0 && (
        <table class="rows sessions">
          <RowsHead columns={["Session", "Kind", "Label", "Channel", "Updated"]} />
          <tbody>
            {page.sessions.map((s) => (
              <tr key={s.key}>
                <td data-label="Session">
                  <a href={sessionHref(fullKey(s))}>{s.key}</a>
                </td>
                <td data-label="Kind">{s.kind}</td>
                <td data-label="Label">{s.label ?? ""}</td>
                <td data-label="Channel">{s.channel}</td>
                <td data-label="Updated">{when(s.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
