export function when(ms: number | null | undefined): string {
  if (!ms) return "—";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
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
