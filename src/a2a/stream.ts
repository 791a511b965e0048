import { type StreamResponse, TaskState } from "@a2a-js/sdk";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { eventStreamResponse } from "../events/sse-bridge";
import type { RunSnapshot } from "../session/run-schema";
import { agentMessage, contextOfKey, replyArtifact, TASK_STATE_OF_RUN } from "./tasks";

/** Where our event id travels in an A2A update (and the SSE `id:` line the route writes from it). */
export const EVENT_ID_META = "switchboard.eventId";

/**
 * The run's own event stream (`GET /v1/runs/{id}/events`, docs/events.md), read from its session object:
 * each SSE event in order; `after` is a `Last-Event-ID` to resume from. Ends when the object closes the
 * stream (the run ended, or the stream's lifetime did).
 */
async function* runEvents(env: Env, sessionKey: string, runId: string, after: string | null) {
  const url = new URL("https://session/events");
  url.searchParams.set("stream", "run");
  url.searchParams.set("runId", runId);
  if (after !== null) url.searchParams.set("after", after);
  const res = await eventStreamResponse(
    env.SESSIONS.getByName(sessionKey).fetch(url, { headers: { Upgrade: "websocket" } }),
  );
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => queue.push(e) });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      while (queue.length) yield queue.shift()!;
    }
  } finally {
    // The A2A client went away (or the run ended): the bridge's WebSocket to the object closes with it.
    await reader.cancel().catch(() => {});
  }
}

interface RunStatusData {
  status: RunSnapshot["status"];
  reply?: string;
  error?: string;
}

/**
 * A run's events as A2A stream updates (docs/protocols.md, "A2A"): the first piece of text moves the task to
 * `working`; each text piece appends to the `reply` artifact (a `reset` — the resume point was not kept —
 * makes the next piece replace it instead); the run's end is the whole reply as the last chunk, then the final
 * status. Each update carries our event id in its metadata, which the route writes as the SSE `id:` so a
 * resubscribe with `Last-Event-ID` continues without repeats.
 */
export async function* runUpdates(
  env: Env,
  agentId: string,
  run: RunSnapshot,
  after: string | null,
): AsyncGenerator<StreamResponse> {
  const taskId = run.runId;
  const contextId = contextOfKey(agentId, run.sessionKey);
  let working = run.status === "running";
  // Resuming after one of our ids: the client holds the text up to it, so what follows appends to it.
  let append = after !== null;
  const meta = (id: string | undefined) => (id ? { [EVENT_ID_META]: id } : undefined);
  const status = (state: TaskState, id: string | undefined, text?: string): StreamResponse => ({
    payload: {
      $case: "statusUpdate",
      value: {
        taskId,
        contextId,
        status: {
          state,
          message: text === undefined ? undefined : agentMessage(run, contextId, text),
          timestamp: new Date().toISOString(),
        },
        metadata: meta(id),
      },
    },
  });
  const artifact = (text: string, id: string | undefined, lastChunk: boolean): StreamResponse => ({
    payload: {
      $case: "artifactUpdate",
      value: {
        taskId,
        contextId,
        artifact: replyArtifact(text),
        append,
        lastChunk,
        metadata: meta(id),
      },
    },
  });
  for await (const e of runEvents(env, run.sessionKey, run.runId, after)) {
    if (e.event === "reset") {
      append = false;
      continue;
    }
    if ((e.event === "delta" || e.event === "tool-call") && !working) {
      working = true;
      yield status(TaskState.TASK_STATE_WORKING, undefined);
    }
    if (e.event === "delta") {
      yield artifact((JSON.parse(e.data) as { text: string }).text, e.id, false);
      append = true;
    } else if (e.event === "status") {
      const end = JSON.parse(e.data) as RunStatusData;
      if (end.status === "ok") {
        // The whole reply, replacing what was streamed: a client that missed pieces still ends with all of it.
        append = false;
        yield artifact(end.reply ?? "", undefined, true);
      }
      const text = end.status === "ok" ? end.reply : end.error;
      yield status(TASK_STATE_OF_RUN[end.status], e.id, text);
      return;
    }
  }
}
