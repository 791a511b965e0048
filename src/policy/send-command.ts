import { queueReply } from "../channels/outbox";
import type { SessionExtension } from "../session/extensions";
import { parseSendCommand } from "./send-policy";

/**
 * The owner's standalone `/send on|off|inherit` (test/http/token-scopes.test.ts, test/policy/send-policy-e2e.test.ts). The session object turns such an
 * inbound message into a `command` run; this extension answers it with OpenClaw's texts and
 * sets the per-session override in the run-ending transaction (so the answer and the change are
 * one atomic step, in queue order with the session's other messages).
 */
export const sendCommandExtension: SessionExtension = {
  name: "send-command",
  produceReply(host, _run, input) {
    if (input.kind !== "command") return undefined;
    const cmd = parseSendCommand(input.message);
    if (!cmd) return undefined;
    const m = host.meta!;
    // No model ran: keep the session's model facts as they are (finishRun records these).
    return Promise.resolve({
      messages: [],
      reply: cmd.reply,
      usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 },
      model: m.model ?? "command",
      provider: m.modelProvider ?? "switchboard",
    });
  },
  onRunEnded(host, event) {
    const { run, input } = event;
    if (input.kind !== "command" || run.status !== "ok" || !host.meta) return;
    const cmd = parseSendCommand(input.message);
    // A usage error changes nothing; a valid command takes effect before its answer is delivered,
    // so the answer follows the new policy (`/send off` is silent, `/send on` is heard).
    if (cmd && cmd.value !== undefined) {
      if (cmd.value === null) delete host.meta.sendPolicy;
      else host.meta.sendPolicy = cmd.value;
      host.saveMeta();
    }
    queueReply(host, event);
  },
};
