// The "Exchanges" tab: an agent-to-agent exchange (sessions_send, its reply and the ping-pong turns that
// followed) drawn as the sequence of turns it was — two lifelines, one arrow per message that went from one
// session to the other, in the order they happened. Built from the two transcripts the API already serves:
// every message one session sent the other is a transcript message with `provenance` (kind
// "inter_session", the sending session), and the last turn's answer is the receiver's reply after it.
import { useState } from "preact/hooks";
import { api, enc } from "./api";
import { ErrorLine } from "./errors";
import { messageText } from "./format";
import { Picture } from "./picture";
import { sessionHref } from "./router";
import type { SessionData } from "./session-data";
import type { HistoryMessage, Provenance } from "./types";
import { useRead } from "./use-read";

/** The newest turns drawn; an exchange is at most a send and 5 ping-pong turns, so 20 shows several. */
const MAX_TURNS = 20;
const WIDTH = 760;
const LEFT = 150;
const RIGHT = 610;
const TOP = 74;
const STEP = 58;
const LABEL_CHARS = 64;

export interface Turn {
  from: string;
  to: string;
  text: string;
  at: number;
  /** The receiver's answer to the last message (not sent on as a further turn). */
  reply?: boolean;
}

/** Control replies end a ping-pong or silence an announce (docs/models.md): nothing went to the other side. */
const CONTROL = /^(REPLY_SKIP|ANNOUNCE_SKIP|NO_REPLY)$/;

const provenanceOf = (m: HistoryMessage) => m.provenance as Provenance | undefined;
const isFrom = (m: HistoryMessage, source: string) => {
  const p = provenanceOf(m);
  return (
    m.role === "user" &&
    p?.kind === "inter_session" &&
    p.sourceTool === "sessions_send" &&
    p.sourceSessionKey === source
  );
};
/** A message another session wrote starts with the gateway's marker line; the picture shows the words. */
const words = (m: HistoryMessage) =>
  messageText(m.content)
    .replace(/^\[Inter-session message\][^\n]*\n/, "")
    .trim();

/** Sessions that exchanged messages with this one through sessions_send, the most recent first. */
export function counterpartsOf(messages: HistoryMessage[]): string[] {
  const seen: string[] = [];
  for (const m of [...messages].reverse()) {
    const p = provenanceOf(m);
    if (m.role === "user" && p?.kind === "inter_session" && p.sourceTool === "sessions_send" && p.sourceSessionKey)
      if (!seen.includes(p.sourceSessionKey)) seen.push(p.sourceSessionKey);
  }
  return seen;
}

/** The turns between `a` and `b`, oldest first, from their two transcripts. */
export function turnsBetween(a: string, aMessages: HistoryMessage[], b: string, bMessages: HistoryMessage[]): Turn[] {
  const sent = (holder: string, messages: HistoryMessage[], other: string) =>
    messages.flatMap((m, i) =>
      isFrom(m, other)
        ? [{ turn: { from: other, to: holder, text: words(m), at: m.timestamp ?? 0 }, messages, i }]
        : [],
    );
  const all = [...sent(a, aMessages, b), ...sent(b, bMessages, a)].sort((x, y) => x.turn.at - y.turn.at);
  const turns: Turn[] = all.map((t) => t.turn);
  const last = all[all.length - 1];
  const answer = last?.messages[last.i + 1];
  if (answer?.role === "assistant" && words(answer) && !CONTROL.test(words(answer)))
    turns.push({
      from: last.turn.to,
      to: last.turn.from,
      text: words(answer),
      at: answer.timestamp ?? last.turn.at,
      reply: true,
    });
  return turns.slice(-MAX_TURNS);
}

const cut = (text: string) => {
  const line = text.replace(/\s+/g, " ");
  return line.length > LABEL_CHARS ? `${line.slice(0, LABEL_CHARS - 1)}…` : line;
};

/** Both sides as a conversation reader sees them (no tool results, no internal announce prompts, no control replies). */
const conversation = async (key: string) =>
  (await api<{ messages: HistoryMessage[] }>("GET", `/v1/sessions/${enc(key)}/history?limit=200`)).messages;

export function ExchangeTab(props: { sessionKey: string; data: SessionData }) {
  const counterparts = counterpartsOf(props.data.messages);
  const [chosen, setChosen] = useState<string | null>(null);
  const other = chosen && counterparts.includes(chosen) ? chosen : (counterparts[0] ?? null);
  // Re-read when this session's transcript grows (its event stream): a new turn has arrived.
  const version = props.data.messages.length;
  const { value: sides, error } = useRead(
    other
      ? async () => {
          const [mine, theirs] = await Promise.all([conversation(props.sessionKey), conversation(other)]);
          return { key: other, mine, theirs };
        }
      : null,
    [props.sessionKey, other, version],
  );

  if (!other) return <p>No agent-to-agent exchange with this session yet.</p>;
  const me = props.sessionKey;
  const turns = sides?.key === other ? turnsBetween(me, sides.mine, other, sides.theirs) : [];
  const height = TOP + Math.max(1, turns.length) * STEP + 16;
  const xOf = (key: string) => (key === me ? LEFT : RIGHT);
  return (
    <>
      <ErrorLine error={error} />
      {counterparts.length > 1 && (
        <label>
          Exchange with{" "}
          <select value={other} onChange={(e) => setChosen((e.target as HTMLSelectElement).value)}>
            {counterparts.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
      )}
      <Picture
        kind="exchange"
        width={WIDTH}
        height={height}
        label={`Exchange between ${me} and ${other}: ${turns.length} turn${turns.length === 1 ? "" : "s"}`}
        testId="exchange"
      >
        <defs>
          <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto">
            <path d="M0,0 L10,5 L0,10 z" />
          </marker>
        </defs>
        {[me, other].map((key) => (
          <g key={key} class="lifeline">
            <a href={sessionHref(key, "exchanges")}>
              <rect x={xOf(key) - 130} y={8} width={260} height={34} rx={8} />
              <text x={xOf(key)} y={30} text-anchor="middle">
                {cut(key).slice(0, 40)}
              </text>
            </a>
            <line x1={xOf(key)} y1={42} x2={xOf(key)} y2={height - 8} />
          </g>
        ))}
        {turns.map((t, i) => {
          const y = TOP + i * STEP + 30;
          const x1 = xOf(t.from);
          const x2 = xOf(t.to);
          return (
            <g key={`${t.at}-${i}`} class={t.reply ? "turn reply" : "turn"} data-turn={i + 1} data-from={t.from}>
              <title>{t.text}</title>
              <text x={(x1 + x2) / 2} y={y - 8} text-anchor="middle">
                {`${i + 1}. ${cut(t.text)}`}
              </text>
              <line x1={x1} y1={y} x2={x2 + (x2 > x1 ? -4 : 4)} y2={y} marker-end="url(#arrow)" />
            </g>
          );
        })}
      </Picture>
      {turns.length === 0 && <p>Loading the exchange…</p>}
    </>
  );
}
