import { generateText, stepCountIs, type ModelMessage, type ToolSet } from "ai";
import type { ResolvedModel } from "./models";
import type { ContentBlock, TranscriptMessage, Usage } from "../session/types";
import { redactAttachmentArgs } from "../spawn/attachments";

/**
 * The built-in runner: one run = one `generateText` call (with up to 8 tool steps when the session may
 * use the session tools). It returns the transcript rows the run produced; it never writes storage —
 * the session object records them in the transaction that ends the run.
 */
export interface RunnerResult {
  /** Assistant and toolResult messages produced by the run, in order. */
  messages: TranscriptMessage[];
  /** Final assistant text (the run's reply). */
  reply: string;
  usage: Usage;
  model: string;
  provider: string;
}

export interface ModelRunRequest {
  model: ResolvedModel;
  system: string;
  history: TranscriptMessage[];
  tools?: ToolSet;
  signal: AbortSignal;
}

export async function runModel(req: ModelRunRequest): Promise<RunnerResult> {
  const hasTools = req.tools && Object.keys(req.tools).length > 0;
  const result = await generateText({
    model: req.model.model,
    system: req.system,
    messages: toModelMessages(req.history),
    tools: hasTools ? req.tools : undefined,
    stopWhen: stepCountIs(hasTools ? 8 : 1),
    abortSignal: req.signal,
    maxRetries: 1,
  });
  const now = Date.now();
  const usage = toUsage(result.totalUsage, req.model.cost);
  const messages: TranscriptMessage[] = [];
  result.steps.forEach((step, i) => {
    const content: ContentBlock[] = [];
    if (step.text) content.push({ type: "text", text: step.text });
    // Attachment bytes handed to sessions_spawn never enter the requester's persisted transcript (reference §4.7).
    for (const call of step.toolCalls) {
      const args = call.toolName === "sessions_spawn" ? redactAttachmentArgs(call.input) : call.input;
      content.push({ type: "toolCall", id: call.toolCallId, name: call.toolName, arguments: args });
    }
    const last = i === result.steps.length - 1;
    messages.push({
      role: "assistant",
      content,
      api: req.model.api,
      provider: req.model.provider,
      model: req.model.modelId,
      // Usage is recorded once, on the final assistant message of the run.
      usage: last ? usage : undefined,
      stopReason: step.finishReason === "tool-calls" ? "toolUse" : step.finishReason === "length" ? "length" : "stop",
      timestamp: now,
    });
    for (const tr of step.toolResults) {
      messages.push({
        role: "toolResult",
        toolCallId: tr.toolCallId,
        toolName: tr.toolName,
        content: [{ type: "text", text: typeof tr.output === "string" ? tr.output : JSON.stringify(tr.output) }],
        isError: false,
        timestamp: now,
      });
    }
  });
  return { messages, reply: result.text, usage, model: req.model.modelId, provider: req.model.provider };
}

export function toUsage(u: { inputTokens?: number; outputTokens?: number; totalTokens?: number }, cost?: { input?: number; output?: number }): Usage {
  const input = u.inputTokens ?? 0;
  const output = u.outputTokens ?? 0;
  const usage: Usage = { input, output, cacheRead: 0, cacheWrite: 0, totalTokens: u.totalTokens ?? input + output };
  if (cost && (cost.input !== undefined || cost.output !== undefined)) {
    const ci = (input * (cost.input ?? 0)) / 1e6;
    const co = (output * (cost.output ?? 0)) / 1e6;
    usage.cost = { input: ci, output: co, cacheRead: 0, cacheWrite: 0, total: ci + co };
  }
  return usage;
}

/** Transcript → model messages. Inter-session input is marked at replay time so the model can tell it from user input. */
export function toModelMessages(history: TranscriptMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of history) {
    if (m.role === "user") {
      let text = typeof m.content === "string" ? m.content : textOf(m.content);
      if (m.provenance?.kind === "inter_session") {
        text = `[Inter-session message] sourceSession=${m.provenance.sourceSessionKey ?? "unknown"} sourceChannel=${m.provenance.sourceChannel ?? "unknown"} sourceTool=${m.provenance.sourceTool ?? "unknown"}\n${text}`;
      }
      out.push({ role: "user", content: text });
    } else if (m.role === "assistant") {
      const text = textOf(m.content);
      if (text) out.push({ role: "assistant", content: text });
    }
  }
  return out;
}

export function textOf(content: ContentBlock[] | string): string {
  if (typeof content === "string") return content;
  return content.map((b) => (b.type === "text" ? b.text : "")).join("");
}
