import { h } from "preact";

function relative(ms: number, now: number): string {
  const seconds = Math.round((now - ms) / 1000);
  // A time ahead of this browser's clock (the two clocks differ) reads "just now" too, never "-3 s ago".
  if (seconds < 60) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return new Date(ms).toISOString().slice(0, 10);
}

/** A time as people scan it ("3 min ago"), the exact UTC time in a <time> element for hover and readers. */
export function when(ms: number | null | undefined) {
  if (!ms) return "—";
  const iso = new Date(ms).toISOString();
  return h("time", { dateTime: iso, title: `${iso.replace("T", " ").slice(0, 19)} UTC` }, relative(ms, Date.now()));
}

/** The readable text of a history message: its text parts joined, tool calls named. */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content === undefined ? "" : JSON.stringify(content);
  return content
    .map((part: { type?: string; text?: string; name?: string; toolName?: string }) => {
      if (part.type === "text") return part.text ?? "";
      if (part.type === "toolCall" || part.type === "tool-call") return `[tool call: ${part.name ?? part.toolName}]`;
      return `[${part.type ?? "part"}]`;
    })
    .join("\n");
}
