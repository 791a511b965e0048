import { SwitchboardError, toRpcError } from "../errors";
import type { StateChange } from "../events/state-kinds";
import { log } from "../log";
import type { FlowFinding } from "./audit-types";
import type { SessionHost } from "./host";
import type { FinishedFlowStates } from "./retention";
import type { RunEndedEvent, RunnerAnswer, RunRow } from "./run-types";
import { type TimerKind, TimerKinds } from "./timer-policy";
import type { TimerRow } from "./timers";
import type { DeadDelivery, EnqueueRequest, RunInput, RunSnapshot, TranscriptMessage } from "./types";

/**
 * Later layers (runners, agent-to-agent flows, the outbox, sub-agent lifecycle) plug into the session
 * object here instead of growing one class: each hook runs at a fixed point of the run/timer lifecycle
 * with the object's narrow host surface (src/session/host.ts). An extension is a module exporting one
 * `SessionExtension`; src/extensions.ts lists them in the order their hooks run (AGENTS.md, "Add a
 * session extension").
 */
export interface SessionExtension {
  name: string;
  /**
   * Inside the transaction that moves a queued run to running (each start, a retried run's too): rows that follow
   * its start (a send task's `running`, an A2A task's `working` notification). Must be synchronous.
   */
  onRunStarted?(host: SessionHost, run: RunRow, input: RunInput, started: RunSnapshot): void;
  /** Inside the run-ending transaction: write follow-up rows (timers, outbox, flow state). Must be synchronous. */
  onRunEnded?(host: SessionHost, event: RunEndedEvent): void;
  /** After that transaction committed: start work that may do I/O (a delivery attempt, an RPC). */
  afterRunEnded?(host: SessionHost, event: RunEndedEvent): void | Promise<void>;
  /**
   * The timer kinds this extension owns (AGENTS.md, "Add a timer kind"): each one's attempt policy, what
   * ends when it dies and how an operator retry revives it (src/session/timer-policy.ts, docs/timers.md).
   * A kind nobody declared cannot be set (src/session/timers.ts).
   */
  timers?: Record<string, TimerKind<SessionHost>>;
  /** A due timer of one of this extension's kinds (`timers`). Deletes or reschedules its row in the transaction of its effect. */
  onTimer?(host: SessionHost, timer: TimerRow): Promise<void> | void;
  /**
   * Produce the reply of a run (the model runner, webhook agents, owner commands); undefined = not mine.
   * Runners claim disjoint runs, so their registration order does not matter. HELD_ELSEWHERE: the run goes
   * on outside this object and is ended later through `finishRun` (src/session/run-types.ts).
   */
  produceReply?(
    host: SessionHost,
    run: RunRow,
    input: RunInput,
    signal: AbortSignal,
  ): Promise<RunnerAnswer> | undefined;
  /**
   * An inbound message this object may not run itself (a thread bound to a sub-agent): a promise of the
   * run it became elsewhere (null: run it here), or null synchronously when the hook has nothing to check.
   */
  forwardInbound?(host: SessionHost, req: EnqueueRequest): Promise<RunSnapshot | null> | null;
  /** A queued run that may not start yet (a sub-agent task waiting for its lane slot); its holder kicks the queue later. */
  holdsQueuedRun?(host: SessionHost, run: RunRow): boolean;
  /**
   * A message entered the transcript, inside the transaction that wrote it (src/session/transcript.ts):
   * write the rows and timers that must follow it (the search feed, src/search/feed.ts). Synchronous.
   */
  onTranscriptAppend?(host: SessionHost, appended: AppendedMessage): void;
  /**
   * An event that is also a material state change was written at `seq` (docs/events.md, "changesSince"),
   * inside its transaction: write the rows and timers that must follow it (watcher notices, src/events/watchers.ts).
   */
  onStateChange?(host: SessionHost, seq: number, change: StateChange): void;
  /** A delivery of this session ended dead (its last attempt failed, or no webhook is configured). */
  onDeliveryDead?(host: SessionHost, delivery: DeadDelivery): Promise<void> | void;
  /** Called before the session's storage is deleted (archive/delete): release what lives elsewhere. */
  beforeDelete?(host: SessionHost): Promise<void> | void;
  /**
   * True when the run is executed outside this object (a webhook runtime accepted it and completes it
   * through the API later): no in-memory executor is expected, so an expired lease is not a lost run.
   * The run's deadline timer still ends it if nobody answers.
   */
  holdsRun?(host: SessionHost, runId: string): boolean;
  /**
   * The sweeper's audit of this extension's open flows (src/session/run-audit.ts), inside its transaction:
   * one finding per open flow (bounded), and a flow whose state waits on a timer that went missing gets it
   * back, due now (`repaired`). Must be synchronous.
   */
  audit?(host: SessionHost): FlowFinding[];
  /** The flow kinds this extension writes and their finished states: pruned after the retention period (retention.ts). */
  finishedFlows?: FinishedFlowStates;
  /** Methods other objects and routes call through `callExtension` (flow callbacks, delivery listing). */
  // biome-ignore lint/suspicious/noExplicitAny: each extension narrows its own argument type; ExtensionRpc re-types every call
  rpc?: Record<string, (host: SessionHost, arg: any) => unknown>;
}

/** A transcript row just written, as `onTranscriptAppend` hooks see it. */
export interface AppendedMessage {
  seq: number;
  role: TranscriptMessage["role"];
  /** Shown only with includeTools (src/session/conversation-rows.ts). */
  isTool: boolean;
}

/**
 * The RPC tables of the extensions, by extension name. Each extension module adds its entry by
 * declaration merging (`declare module "…/session/extensions" { interface ExtensionRpc { … } }`),
 * so every `callExtension` is checked against the method's real argument and result types while this
 * module still imports none of them.
 */
// biome-ignore lint/suspicious/noEmptyInterface: an empty table that extension modules fill by declaration merging
export interface ExtensionRpc {}

type RpcMethod<N extends keyof ExtensionRpc, M extends keyof ExtensionRpc[N]> = ExtensionRpc[N][M] extends (
  ...args: never[]
) => unknown
  ? ExtensionRpc[N][M]
  : never;
/** The call's argument list: the method's second parameter, or nothing for a method that takes only its host. */
type RpcArgs<F extends (...args: never[]) => unknown> = Parameters<F> extends [unknown, infer A] ? [arg: A] : [];

/** What `callExtension` needs of a session object's stub (the object's `extensionCall` RPC method). */
export interface ExtensionCallTarget {
  extensionCall(name: string, method: string, arg?: unknown): Promise<unknown>;
}

/** Call an extension's method in the object behind `stub`, typed by that extension's RPC table. */
export async function callExtension<N extends keyof ExtensionRpc, M extends keyof ExtensionRpc[N] & string>(
  stub: ExtensionCallTarget,
  name: N,
  method: M,
  ...arg: RpcArgs<RpcMethod<N, M>>
): Promise<Awaited<ReturnType<RpcMethod<N, M>>>> {
  // The one place the untyped wire call is narrowed: the table above is what the object dispatches to.
  return (await stub.extensionCall(name, method, arg[0])) as Awaited<ReturnType<RpcMethod<N, M>>>;
}

/**
 * A session object's extensions, installed from one ordered list (src/extensions.ts): each hook runs
 * over the list in that order. Built once per isolate; the checks below fail at startup (and in every
 * test) when two extensions claim the same name or timer kind, or a timer kind has no handler.
 */
export class SessionExtensions {
  readonly timerKinds: TimerKinds;
  /** Which extension runs each timer kind it declared. */
  private readonly timerOwners = new Map<string, SessionExtension>();

  constructor(
    readonly list: readonly SessionExtension[],
    coreTimerKinds: readonly string[],
  ) {
    const names = new Set<string>();
    const kinds: Record<string, TimerKind> = Object.fromEntries(coreTimerKinds.map((k) => [k, {}]));
    for (const ext of list) {
      if (names.has(ext.name)) throw new Error(`Two session extensions are named "${ext.name}"`);
      names.add(ext.name);
      const own = Object.keys(ext.timers ?? {});
      if (own.length > 0 !== Boolean(ext.onTimer))
        throw new Error(
          `Session extension "${ext.name}": declare timer kinds (timers) and their handler (onTimer) together`,
        );
      for (const kind of own) {
        if (kind in kinds) throw new Error(`Timer kind "${kind}" is declared twice (extension "${ext.name}")`);
        kinds[kind] = ext.timers![kind];
        this.timerOwners.set(kind, ext);
      }
    }
    this.timerKinds = new TimerKinds(kinds);
  }

  /** The object's side of `callExtension`: run the named extension's RPC method with this host. */
  async call(host: SessionHost, name: string, method: string, arg?: unknown): Promise<unknown> {
    const fn = this.list.find((e) => e.name === name)?.rpc?.[method];
    if (!fn) throw toRpcError(new SwitchboardError("not_found", `Unknown extension call: ${name}.${method}`));
    return await fn(host, arg);
  }

  /** The first forwarding hook that moved the message elsewhere, or null: run it here. */
  async forwardInbound(host: SessionHost, req: EnqueueRequest): Promise<RunSnapshot | null> {
    for (const ext of this.list) {
      const check = ext.forwardInbound?.(host, req);
      // Awaited only when a hook had something to look up: ordinary messages never yield here.
      const forwarded = check ? await check : null;
      if (forwarded) return forwarded;
    }
    return null;
  }

  queuedRunIsHeld(host: SessionHost, run: RunRow): boolean {
    return this.list.some((e) => e.holdsQueuedRun?.(host, run));
  }

  runIsHeldElsewhere(host: SessionHost, runId: string): boolean {
    return this.list.some((e) => e.holdsRun?.(host, runId));
  }

  /** The reply of a run from the runner that claims it; a run nobody claims is an error, never a silent success. */
  produceReply(host: SessionHost, run: RunRow, input: RunInput, signal: AbortSignal): Promise<RunnerAnswer> {
    for (const ext of this.list) {
      const r = ext.produceReply?.(host, run, input, signal);
      if (r) return r;
    }
    return Promise.reject(new Error(`No runner answers ${input.kind} runs of agent ${host.meta?.agentId}`));
  }

  /** Rows that follow a run's start, written in the transaction that claims it. */
  onRunStarted(host: SessionHost, run: RunRow, input: RunInput, started: RunSnapshot): void {
    for (const ext of this.list) ext.onRunStarted?.(host, run, input, started);
  }

  /** Follow-ups written in the run-ending transaction (flows, deliveries). */
  onRunEnded(host: SessionHost, event: RunEndedEvent): void {
    for (const ext of this.list) ext.onRunEnded?.(host, event);
  }

  /** Work started after the run-ending transaction committed (e.g. attempt a delivery now); failures are logged. */
  afterRunEnded(host: SessionHost, event: RunEndedEvent): void {
    for (const ext of this.list) {
      if (!ext.afterRunEnded) continue;
      void Promise.resolve(ext.afterRunEnded(host, event)).catch((err) =>
        log.error("after_run_ended_failed", {
          sessionKey: host.key,
          runId: event.run.runId,
          extension: ext.name,
          error: err,
        }),
      );
    }
  }

  /** A due timer of an extension's kind; false when no extension declared the kind. */
  async onTimer(host: SessionHost, timer: TimerRow): Promise<boolean> {
    const owner = this.timerOwners.get(timer.kind);
    if (!owner?.onTimer) return false;
    await owner.onTimer(host, timer);
    return true;
  }

  /** A message entered the transcript (inside its transaction). */
  onTranscriptAppend(host: SessionHost, appended: AppendedMessage): void {
    for (const ext of this.list) ext.onTranscriptAppend?.(host, appended);
  }

  /** A state change was written (inside its transaction). */
  onStateChange(host: SessionHost, seq: number, change: StateChange): void {
    for (const ext of this.list) ext.onStateChange?.(host, seq, change);
  }

  /** A delivery ended dead (src/channels/outbox-attempts.ts). A throw leaves its timer for the alarm to retry. */
  async deliveryDead(host: SessionHost, delivery: DeadDelivery): Promise<void> {
    for (const ext of this.list) await ext.onDeliveryDead?.(host, delivery);
  }

  async beforeDelete(host: SessionHost): Promise<void> {
    for (const ext of this.list) await ext.beforeDelete?.(host);
  }

  /** Every extension's open flows, for the sweeper (src/session/run-audit.ts). */
  audit(host: SessionHost): FlowFinding[] {
    return this.list.flatMap((e) => e.audit?.(host) ?? []);
  }

  finishedFlowStates(): FinishedFlowStates {
    return Object.assign({}, ...this.list.map((e) => e.finishedFlows ?? {}));
  }
}
