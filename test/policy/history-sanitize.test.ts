import { describe, expect, it, vi } from "vitest";
import {
  estimateBase64Bytes,
  HISTORY_BYTE_CAP,
  HISTORY_TEXT_CAP,
  isToolMessage,
  sanitizeHistoryMessages,
  utf8ByteLength,
} from "../../src/policy/history-sanitize";
import { maskSecret, redactSensitiveText } from "../../src/policy/redact";

const SECRET = "sk-1234567890abcdef1234";
const utf8 = (v: unknown) => new TextEncoder().encode(JSON.stringify(v)).length;

describe("redactSensitiveText", () => {
  it("masks long secrets as head6…tail4 and short ones as ***", () => {
    expect(maskSecret("abcdefghijklmnopqr")).toBe("abcdef…opqr"); // exactly 18
    expect(maskSecret("abcdefghijklmnopq")).toBe("***"); // 17
  });

  it("masks an sk- token and reports it", () => {
    expect(redactSensitiveText(`key is ${SECRET} ok`)).toEqual({ text: "key is sk-123…1234 ok", redacted: true });
  });

  it("leaves ordinary text alone", () => {
    const text = "The task-force met; the bearer of bad news said KEY points matter. risk-assessment-framework";
    expect(redactSensitiveText(text)).toEqual({ text, redacted: false });
  });

  it.each([
    ["ENV long", "OPENAI_API_KEY=abcdefghijklmnopqrstuvwxyz", "OPENAI_API_KEY=abcdef…wxyz"],
    ["ENV short", "DB_PASSWORD=hunter2 next", "DB_PASSWORD=*** next"],
    ["ENV quoted with spaces", 'MY_SECRET="correct horse battery staple"', 'MY_SECRET="correc…aple"'],
    ["ENV token/passwd", "GH_TOKEN=abc PASSWD=xyz", "GH_TOKEN=*** PASSWD=***"],
    ["JSON apiKey", '{"apiKey": "abcdefghijklmnopqrstuvwxyz"}', '{"apiKey": "abcdef…wxyz"}'],
    [
      "JSON fields",
      '{"token":"t1","secret":"s1","password":"p1","passwd":"p2"}',
      '{"token":"***","secret":"***","password":"***","passwd":"***"}',
    ],
    ["JSON access/refresh", '{"accessToken":"a1","refreshToken":"r1"}', '{"accessToken":"***","refreshToken":"***"}'],
    ["JSON upper-case name", '{"MY_SECRET": "abc"}', '{"MY_SECRET": "***"}'],
    ["CLI space", "cli --token abc123 --verbose", "cli --token *** --verbose"],
    ["CLI equals", "cli --api-key=abcdefghijklmnopqrstuvwxyz", "cli --api-key=abcdef…wxyz"],
    ["CLI secret/password", "x --secret s3 --password 'two words'", "x --secret *** --password '***'"],
    ["Authorization short", "Authorization: Bearer abc.def", "Authorization: Bearer ***"],
    ["Authorization long", "authorization: Bearer abcdefghijklmnopqrstuvwxyz", "authorization: Bearer abcdef…wxyz"],
    ["bare Bearer 18+", "use Bearer abcdefghijklmnopqrstuvwxyz now", "use Bearer abcdef…wxyz now"],
    ["ghp_", "ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_ab…0123"],
    ["github_pat_", "github_pat_11ABCDEFG0123456789_abcdefghij", "github…ghij"],
    ["xoxb-", "xoxb-123456789012-abcdefghij", "xoxb-1…ghij"],
    ["xapp-", "xapp-1-A0123456789-abcdef", "xapp-1…cdef"],
    ["gsk_", "gsk_abcdefghijklmnopqrstuv", "gsk_ab…stuv"],
    ["AIza", "AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSy…rstu"],
    ["pplx-", "pplx-abcdefghijklmnopqrstuv", "pplx-a…stuv"],
    ["npm_", "npm_abcdefghijklmnopqrstuvwxyz", "npm_ab…wxyz"],
    [
      "Telegram bot token in URL",
      "https://api.telegram.org/bot123456789:AAbbccddeeffgghhiijjkkllmmnnooppqqr/getMe",
      "https://api.telegram.org/bot123456…pqqr/getMe",
    ],
  ])("%s", (_name, input, expected) => {
    const r = redactSensitiveText(input);
    expect(r.text).toBe(expected);
    expect(r.redacted).toBe(true);
  });

  it("does not treat --token-file as a --token flag", () => {
    expect(redactSensitiveText("cli --token-file ./tok.txt").redacted).toBe(false);
  });

  it("replaces a PEM private key body with …redacted…", () => {
    const pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAabc\nZZZsecretbody\n-----END RSA PRIVATE KEY-----";
    const r = redactSensitiveText(`before\n${pem}\nafter`);
    expect(r.text).toBe("before\n-----BEGIN RSA PRIVATE KEY-----\n…redacted…\n-----END RSA PRIVATE KEY-----\nafter");
    expect(r.redacted).toBe(true);
  });

  it("redacts a PEM flattened onto one line (JSON-escaped newlines)", () => {
    const r = redactSensitiveText("-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANsecret\\n-----END PRIVATE KEY-----");
    expect(r.text).not.toContain("MIIEvQ");
  });

  it("is idempotent: redacting redacted text changes nothing", () => {
    const once = redactSensitiveText(
      `A_TOKEN=abcdefghijklmnopqrstuvwxyz and ${SECRET} and Bearer abcdefghijklmnopqrstuvwxyz`,
    );
    expect(once.redacted).toBe(true);
    expect(redactSensitiveText(once.text)).toEqual({ text: once.text, redacted: false });
  });

  it("stays fast on pathological long inputs (no catastrophic backtracking)", () => {
    // ~1 MB each: large enough that a quadratic scan (e.g. re-searching a PEM footer per header) takes seconds.
    const n = 1_000_000;
    const inputs = [
      "A".repeat(n),
      "A_KEY".repeat(n / 5),
      'KEY="'.repeat(n / 5),
      "-----BEGIN RSA PRIVATE KEY-----".repeat(n / 31),
      `"token": "${"\\a".repeat(n / 2)}`,
      `Bearer ${" ".repeat(n)}`,
      '--password "'.repeat(n / 12),
      "1".repeat(n),
      "sk-".repeat(n / 3),
      `${SECRET} `.repeat(n / 24),
    ];
    for (const input of inputs) {
      const t0 = Date.now();
      redactSensitiveText(input);
      expect(Date.now() - t0, input.slice(0, 20)).toBeLessThan(1000);
    }
  });
});

// A fat assistant message, as in OpenClaw's "80 oversized messages" test.
function bigAssistant(seq: number) {
  return {
    role: "assistant",
    content: [
      { type: "text", text: "x".repeat(10_000) },
      { type: "thinking", thinking: "y".repeat(10_000), thinkingSignature: "s".repeat(5_000) },
    ],
    usage: { input: 1, output: 2, totalTokens: 3 },
    cost: { total: 0.1 },
    details: { giant: "d".repeat(5_000) },
    timestamp: seq,
    __switchboard: { seq },
  };
}

describe("sanitizeHistoryMessages", () => {
  it("80 oversized messages are capped, stripped and truncated", () => {
    const input = Array.from({ length: 80 }, (_, i) => bigAssistant(i + 1));
    const r = sanitizeHistoryMessages(input);
    expect(r.truncated).toBe(true);
    expect(r.droppedMessages).toBe(true);
    expect(r.contentTruncated).toBe(true);
    expect(r.contentRedacted).toBe(false);
    expect(r.bytes).toBeLessThanOrEqual(81920);
    expect(r.bytes).toBe(utf8(r.messages));
    expect(r.messages.length).toBeGreaterThan(1);
    expect(r.messages.length).toBeLessThan(80);
    // The newest survive, in order.
    const seqs = r.messages.map((m: any) => m.__switchboard.seq);
    expect(seqs[seqs.length - 1]).toBe(80);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    for (const m of r.messages as any[]) {
      expect(m).not.toHaveProperty("details");
      expect(m).not.toHaveProperty("usage");
      expect(m).not.toHaveProperty("cost");
      expect(m.content[0].text.length).toBeLessThanOrEqual(4015);
      expect(m.content[0].text.endsWith("\n…(truncated)…")).toBe(true);
      expect(m.content[1].thinking.length).toBeLessThanOrEqual(4015);
      expect(m.content[1]).not.toHaveProperty("thinkingSignature");
    }
  });

  it("a single message with a 200 KB extra field becomes the placeholder, keeping __switchboard", () => {
    const r = sanitizeHistoryMessages([
      {
        role: "assistant",
        content: [{ type: "text", text: "hi" }],
        blob: "z".repeat(200 * 1024),
        __switchboard: { seq: 7 },
      },
    ]);
    expect(r.messages).toEqual([
      { role: "assistant", content: "[sessions_history omitted: message too large]", __switchboard: { seq: 7 } },
    ]);
    expect(r.contentTruncated).toBe(false);
    expect(r.droppedMessages).toBe(true);
    expect(r.truncated).toBe(true);
    expect(r.bytes).toBe(utf8(r.messages));
  });

  it("placeholder has no __switchboard when the original had none, and replaces earlier messages too", () => {
    const r = sanitizeHistoryMessages([
      { role: "user", content: "small" },
      { role: "assistant", content: "hi", blob: "z".repeat(100 * 1024) },
    ]);
    expect(r.messages).toEqual([{ role: "assistant", content: "[sessions_history omitted: message too large]" }]);
  });

  it("a secret is redacted without marking truncation", () => {
    const r = sanitizeHistoryMessages([
      { role: "assistant", content: [{ type: "text", text: `token ${SECRET}` }], __switchboard: { seq: 1 } },
    ]);
    const text = (r.messages[0] as any).content[0].text;
    expect(text).toBe("token sk-123…1234");
    expect(r.contentRedacted).toBe(true);
    expect(r.truncated).toBe(false);
    expect(r.contentTruncated).toBe(false);
    expect(r.droppedMessages).toBe(false);
  });

  it("a long text with a secret is both redacted and truncated", () => {
    const r = sanitizeHistoryMessages([{ role: "user", content: `${SECRET} ${"a".repeat(5000)}` }]);
    const content = (r.messages[0] as any).content as string;
    expect(content.startsWith("sk-123…1234 ")).toBe(true);
    expect(content.length).toBe(HISTORY_TEXT_CAP + "\n…(truncated)…".length);
    expect(r.contentRedacted).toBe(true);
    expect(r.contentTruncated).toBe(true);
    expect(r.truncated).toBe(true);
  });

  it("redacts and caps top-level text and partialJson, and redacts thinking", () => {
    const r = sanitizeHistoryMessages([
      {
        role: "assistant",
        text: "b".repeat(4001),
        content: [
          {
            type: "toolCall",
            id: "c1",
            name: "x",
            arguments: {},
            partialJson: `{"apiKey":"abcdefghijklmnopqrstuvwxyz"}`,
          },
          { type: "thinking", thinking: `remember ${SECRET}` },
        ],
      },
    ]);
    const m = r.messages[0] as any;
    expect(m.text).toBe(`${"b".repeat(4000)}\n…(truncated)…`);
    expect(m.content[0].partialJson).toBe('{"apiKey":"abcdef…wxyz"}');
    expect(m.content[1].thinking).toBe("remember sk-123…1234");
    expect(r.contentRedacted).toBe(true);
    expect(r.contentTruncated).toBe(true);
  });

  it("does not flag text of exactly 4000 units", () => {
    const r = sanitizeHistoryMessages([{ role: "user", content: "c".repeat(4000) }]);
    expect((r.messages[0] as any).content).toBe("c".repeat(4000));
    expect(r.truncated).toBe(false);
  });

  it("never splits a surrogate pair at the cut", () => {
    const text = `${"a".repeat(3999)}😀tail`; // the emoji occupies units 3999–4000
    const r = sanitizeHistoryMessages([{ role: "user", content: text }]);
    const content = (r.messages[0] as any).content as string;
    // Asserted without echoing the string: a lone surrogate in a failure diff breaks the pool's transport.
    expect(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(content)).toBe(false);
    expect(content === `${"a".repeat(3999)}\n…(truncated)…`).toBe(true);
  });

  it("omits image data and reports the decoded size", () => {
    const data = btoa("0123456789"); // 10 bytes, "MDEyMzQ1Njc4OQ=="
    const r = sanitizeHistoryMessages([
      { role: "user", content: [{ type: "image", data, mimeType: "image/png" }], __switchboard: { seq: 3 } },
    ]);
    expect(r.messages[0]).toEqual({
      role: "user",
      content: [{ type: "image", mimeType: "image/png", omitted: true, bytes: 10 }],
      __switchboard: { seq: 3 },
    });
    expect(r.contentTruncated).toBe(true);
  });

  it("estimates decoded base64 sizes", () => {
    expect(estimateBase64Bytes("")).toBe(0);
    expect(estimateBase64Bytes("QQ==")).toBe(1);
    expect(estimateBase64Bytes("QUI=")).toBe(2);
    expect(estimateBase64Bytes("QUJD")).toBe(3);
    expect(estimateBase64Bytes("QUJDRA")).toBe(4); // unpadded
    expect(estimateBase64Bytes("QUJD\nRA==")).toBe(4);
    expect(estimateBase64Bytes("data:image/png;base64,QUJD")).toBe(3);
  });

  it("passes clean messages through untouched and never mutates its input", () => {
    const input = [
      {
        role: "user",
        content: "hello",
        timestamp: 1,
        provenance: { kind: "external_user" },
        __switchboard: { seq: 1 },
      },
      bigAssistant(2),
    ];
    const before = JSON.parse(JSON.stringify(input));
    const r = sanitizeHistoryMessages(input);
    expect(input).toEqual(before);
    expect(r.messages[0]).toEqual(before[0]);
    expect(r.messages[0]).not.toBe(input[0]);
    // Nested objects are copies too.
    (r.messages[0] as any).provenance.kind = "changed";
    expect((input[0] as any).provenance.kind).toBe("external_user");
  });

  it("reports nothing for an empty or clean history", () => {
    expect(sanitizeHistoryMessages([])).toEqual({
      messages: [],
      truncated: false,
      droppedMessages: false,
      contentTruncated: false,
      contentRedacted: false,
      bytes: 2,
    });
    const r = sanitizeHistoryMessages([{ role: "user", content: "hi" }]);
    expect(r.truncated).toBe(false);
    expect(r.bytes).toBe(utf8([{ role: "user", content: "hi" }]));
  });

  it("drops exactly the oldest messages needed to fit, counting multi-byte UTF-8", () => {
    // Each message is ~29 KB (3000 × 3-byte "€" + 10000 × 2-byte "é"): two fit under 80 KB, three do not.
    const input = Array.from({ length: 5 }, (_, i) => ({
      role: "user",
      content: "€".repeat(3000),
      pad: "é".repeat(10_000),
      __switchboard: { seq: i + 1 },
    }));
    const r = sanitizeHistoryMessages(input);
    expect(r.messages.map((m: any) => m.__switchboard.seq)).toEqual([4, 5]);
    expect(r.bytes).toBe(utf8(r.messages));
    expect(r.bytes).toBeLessThanOrEqual(HISTORY_BYTE_CAP);
    expect(utf8(input.slice(2))).toBeGreaterThan(HISTORY_BYTE_CAP); // one more would not have fitted
    expect(r.droppedMessages).toBe(true);
    expect(r.contentTruncated).toBe(false);
    expect(r.truncated).toBe(true);
  });

  it("keeps a history that is exactly at the byte cap and drops at one byte more", () => {
    // Filled through a non-text field so the 4000-unit text cap does not interfere.
    const msg = { role: "user", content: "", pad: "" };
    const pad = "q".repeat(HISTORY_BYTE_CAP - utf8([msg]));
    const exact = sanitizeHistoryMessages([{ ...msg, pad }]);
    expect(exact.bytes).toBe(HISTORY_BYTE_CAP);
    expect(exact.droppedMessages).toBe(false);
    expect(exact.truncated).toBe(false);
    const over = sanitizeHistoryMessages([{ ...msg, pad: `${pad}q` }]);
    expect(over.droppedMessages).toBe(true);
    expect((over.messages[0] as any).content).toBe("[sessions_history omitted: message too large]");
  });

  it("sizes each message once instead of re-serializing while dropping (O(n))", () => {
    const input = Array.from({ length: 300 }, (_, i) => ({
      role: "user",
      content: "m".repeat(1000),
      __switchboard: { seq: i },
    }));
    const spy = vi.spyOn(JSON, "stringify");
    try {
      const r = sanitizeHistoryMessages(input);
      expect(r.droppedMessages).toBe(true);
      // One copy + one size per message, plus a constant.
      expect(spy.mock.calls.length).toBeLessThanOrEqual(2 * input.length + 5);
    } finally {
      spy.mockRestore();
    }
  });

  it("counts UTF-8 bytes like TextEncoder", () => {
    for (const s of ["", "abc", "é", "€", "😀", "a😀é€", "\ud800x", "x\udc00"]) {
      expect(utf8ByteLength(s), JSON.stringify(s)).toBe(new TextEncoder().encode(s).length);
    }
  });
});

describe("isToolMessage", () => {
  it("recognises toolResult and tool roles only", () => {
    expect(isToolMessage({ role: "toolResult" })).toBe(true);
    expect(isToolMessage({ role: "tool" })).toBe(true);
    expect(isToolMessage({ role: "assistant" })).toBe(false);
    expect(isToolMessage({ role: "user" })).toBe(false);
    expect(isToolMessage(null)).toBe(false);
    expect(isToolMessage("tool")).toBe(false);
  });
});
