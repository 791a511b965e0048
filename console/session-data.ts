// Everything the session page shows, kept current from the session's event stream (or, without one,
// re-read after each change the operator makes).
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, enc } from "./api";
import { followRun, type RunStreamState, type StreamState, useSessionStream } from "./live";
import type { SseEvent } from "./sse";
import { listOf, NO_TASKS, TASKS_RECENT_MINUTES, TASKS_SHOWN, type TaskList, upsertTask } from "./task-list";
import type { HistoryMessage, Run, SessionRow, Task } from "./types";
import { RUN_ENDED } from "./types";

/** Messages held on the page: the newest ones; older ones are in GET …/transcript.jsonl. */
const MAX_MESSAGES = 200;
const HISTORY_PAGE = 50;

export interface SessionData {
  row: SessionRow | null;
  messages: HistoryMessage[];
  runs: Run[];
  /** Reply text of runs still generating, by run id, and how each run's stream is doing. */
  drafts: Record<string, Draft>;
  stream: StreamState;
  error: unknown;
  /** Bumped on every delivery event, so the deliveries tab re-reads its list. */
  deliveriesVersion: number;
  /** The session's ledger tasks, newest first (task-list.ts), moved by `task` events; read once `showTasks` was called. */
  tasks: TaskList;
  /** The tab that shows the tasks is open: read them now, and again whenever the page reads everything again. */
  showTasks(): void;
  send(message: string): Promise<void>;
  abort(runId: string): Promise<void>;
  /** POST /v1/tasks/{id}/cancel with the page's token: the server decides whether it may. */
  cancelTask(taskId: string): Promise<{ cancelled: boolean; reason?: string }>;
  patch(body: Record<string, unknown>): Promise<void>;
}

export interface Draft {
  text: string;
  stream: RunStreamState;
}

const seqOf = (m: HistoryMessage) => m.__switchboard?.seq;

function mergeMessages(held: HistoryMessage[], incoming: HistoryMessage[]): HistoryMessage[] {
  const bySeq = new Map<number, HistoryMessage>();
  const unsequenced: HistoryMessage[] = [];
  for (const m of [...held, ...incoming]) {
    const seq = seqOf(m);
    if (seq === undefined) unsequenced.push(m);
    else bySeq.set(seq, m);
  }
  const sorted = [...bySeq.entries()].sort((a, b) => a[0] - b[0]).map(([, m]) => m);
  return [...unsequenced, ...sorted].slice(-MAX_MESSAGES);
}

function upsertRun(runs: Run[], run: Partial<Run> & { runId: string }): Run[] {
  const i = runs.findIndex((r) => r.runId === run.runId);
  if (i < 0) return [{ status: "queued", kind: "inbound", createdAt: Date.now(), ...run }, ...runs].slice(0, 100);
  const next = runs.slice();
  next[i] = { ...runs[i], ...run };
  return next;
}

export function useSessionData(key: string): SessionData {
  const [row, setRow] = useState<SessionRow | null>(null);
  const [messages, setMessages] = useState<HistoryMessage[]>([]);
  const [runs, setRuns] = useState<Run[]>([]);
  const [drafts, setDrafts] = useState<Record<string, Draft>>({});
  const [error, setError] = useState<unknown>(null);
  const [deliveriesVersion, setDeliveriesVersion] = useState(0);
  const [tasks, setTasks] = useState<TaskList>(NO_TASKS);
  const [reconnect, setReconnect] = useState(0);
  const followed = useRef(new Map<string, AbortController>());
  // Runs whose own stream has ended (a final status, or `end`: the session went). A row read that raced
  // the end (the session's `end` arrives before its storage is gone) may still list such a run as
  // running; following it again would open a second stream for a run that is over.
  const finished = useRef(new Set<string>());
  const path = `/v1/sessions/${enc(key)}`;

  // Tasks a `task` event brought while a read was under way: newer than what that read may answer.
  const taskEvents = useRef(new Map<string, Task>());
  // Read only once a tab shows them: the page's other reads (and its held event stream) need the
  // browser's few connections to the Worker first.
  const tasksShown = useRef(false);
  const readTasks = useCallback(async () => {
    if (!tasksShown.current) return;
    taskEvents.current = new Map();
    const read = await api<{ tasks: Task[] }>(
      "GET",
      `${path}/tasks?recentMinutes=${TASKS_RECENT_MINUTES}&limit=${TASKS_SHOWN + 1}`,
    );
    setTasks([...taskEvents.current.values()].reduce(upsertTask, listOf(read.tasks)));
  }, [path]);

  const reload = useCallback(async () => {
    const [r, history, recent] = await Promise.all([
      api<SessionRow>("GET", path).catch(() => null),
      api<{ messages: HistoryMessage[] }>("GET", `${path}/history?limit=${HISTORY_PAGE}&includeTools=true`).catch(
        () => ({ messages: [] }),
      ),
      api<{ runs: Run[] }>("GET", `${path}/runs?limit=20`),
    ]);
    setRow(r);
    setMessages((held) => mergeMessages(held, history.messages));
    setRuns(recent.runs);
    // A ledger the token may not read leaves the list empty; the rest of the page still shows.
    await readTasks().catch(() => setTasks(NO_TASKS));
  }, [path, readTasks]);

  const onEvent = useCallback(
    (e: SseEvent) => {
      const data = JSON.parse(e.data);
      if (e.event === "message") setMessages((held) => mergeMessages(held, [data]));
      else if (e.event === "run") {
        setRuns((held) => upsertRun(held, data));
        // A finished run changed the row (token counts, model): only the row is read again.
        if (RUN_ENDED.has(data.status)) api<SessionRow>("GET", path).then(setRow, setError);
      } else if (e.event === "delivery") setDeliveriesVersion((v) => v + 1);
      else if (e.event === "task") {
        taskEvents.current.set(data.taskId, data);
        setTasks((held) => upsertTask(held, data));
      } else if (e.event === "gap") reload().catch(setError);
      // The resume point belonged to an earlier life of the session (deleted and created again): what is
      // held is not this session's, so it is dropped and read again (docs/events.md).
      else if (e.event === "reset") {
        setMessages([]);
        reload().catch(setError);
      }
      // The session was deleted or archived: the stream ends; the row read now shows which.
      else if (e.event === "end") reload().catch(setError);
    },
    [reload, path],
  );
  const onOpen = useCallback(
    (resumed: boolean) => {
      if (!resumed) reload().catch(setError);
    },
    [reload],
  );
  const stream = useSessionStream(key, onEvent, onOpen, reconnect);

  useEffect(() => {
    reload().catch(setError);
    const held = followed.current;
    return () => {
      for (const c of held.values()) c.abort();
      held.clear();
    };
  }, [reload]);

  /** Show the run's reply as it is generated; without a run stream, wait for its end and re-read. */
  const follow = useCallback(
    async (runId: string) => {
      if (followed.current.has(runId) || finished.current.has(runId)) return;
      const ctl = new AbortController();
      followed.current.set(runId, ctl);
      try {
        const end = await followRun(
          runId,
          ctl.signal,
          (text) => setDrafts((d) => ({ ...d, [runId]: { stream: d[runId]?.stream ?? "live", text } })),
          // A draft appears with the first text; a drop before any text shows one too, saying so.
          (stream) =>
            setDrafts((d) =>
              d[runId] || stream === "reconnecting" ? { ...d, [runId]: { text: d[runId]?.text ?? "", stream } } : d,
            ),
        );
        if (!ctl.signal.aborted) finished.current.add(runId);
        setRuns((held) => upsertRun(held, { runId, status: end.status, reply: end.reply, error: end.error }));
      } catch {
        if (ctl.signal.aborted) return;
        const end = await api<Run>("GET", `/v1/runs/${enc(runId)}/wait?timeoutMs=60000`).catch(() => null);
        if (end) setRuns((held) => upsertRun(held, end));
      } finally {
        followed.current.delete(runId);
        setDrafts(({ [runId]: _done, ...rest }) => rest);
      }
      // The reply's message arrives on the session stream; without one, read it.
      if (stream !== "live") await reload().catch(setError);
    },
    [reload, stream],
  );

  useEffect(() => {
    for (const r of runs) if (!RUN_ENDED.has(r.status)) follow(r.runId);
  }, [runs, follow]);

  return {
    row,
    messages,
    runs,
    drafts,
    stream,
    error,
    deliveriesVersion,
    tasks,
    showTasks: useCallback(() => {
      if (tasksShown.current) return;
      tasksShown.current = true;
      readTasks().catch(() => setTasks(NO_TASKS));
    }, [readTasks]),
    async send(message) {
      const accepted = await api<{ runId: string }>("POST", `${path}/messages`, { message });
      setRuns((held) => upsertRun(held, { runId: accepted.runId, status: "queued", kind: "inbound" }));
      // The session may have been created (again) by this message: a stream refused or ended before can start
      // now; one resuming from the deleted session's id is told `reset` and starts over.
      if (stream === "unavailable" || stream === "deleted" || stream === "archived") setReconnect((n) => n + 1);
      if (stream !== "live") await reload();
    },
    async abort(runId) {
      const run = await api<Run>("POST", `/v1/runs/${enc(runId)}/abort`);
      setRuns((held) => upsertRun(held, run));
    },
    async cancelTask(taskId) {
      const answer = await api<{ cancelled: boolean; reason?: string }>("POST", `/v1/tasks/${enc(taskId)}/cancel`);
      // Live, the task's own event brings its new state; without a stream it is read again.
      if (stream !== "live") await readTasks();
      return answer;
    },
    async patch(body) {
      setRow(await api<SessionRow>("PATCH", path, body));
    },
  };
}
