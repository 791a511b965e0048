import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import type { Config } from "../../src/config/schema";
import {
  type AttachmentInput,
  type AttachmentsConfig,
  attachmentsReceipt,
  redactAttachmentArgs,
  validateAttachments,
} from "../../src/spawn/attachments";

/** The defaults a config without `tools.sessions_spawn.attachments` gets: what sessions_spawn really uses. */
const DEFAULTS: AttachmentsConfig = (parseConfig({}) as Config).tools.sessions_spawn.attachments;
const ON: AttachmentsConfig = { ...DEFAULTS, enabled: true };
// Small limits make boundaries cheap to hit. 10 is not a multiple of 3, so ceil(10/3)*4 = 16
// encoded chars can carry 10, 11 or 12 bytes — exactly the case the decoded-length check exists for.
const SMALL: AttachmentsConfig = { ...ON, maxFileBytes: 10, maxTotalBytes: 15 };

const b64 = (bytes: number[]) => btoa(String.fromCharCode(...bytes));
const nBytes = (n: number) => Array.from({ length: n }, (_, i) => (i * 37 + 1) & 0xff);

async function errorOf(inputs: AttachmentInput[], config = ON) {
  const r = await validateAttachments(inputs, config);
  if (r.ok) throw new Error("expected a refusal, got ok");
  return r;
}

describe("config defaults", () => {
  it("the config schema's defaults match OpenClaw's defaults", () => {
    expect(DEFAULTS).toEqual({
      enabled: false,
      maxFiles: 50,
      maxFileBytes: 1048576,
      maxTotalBytes: 5242880,
      retainOnSessionKeep: false,
    });
  });
});

describe("validateAttachments — gate and counts", () => {
  it("disabled → forbidden with OpenClaw's message", async () => {
    const r = await errorOf([{ name: "a.txt", content: "x" }], DEFAULTS);
    expect(r).toEqual({
      ok: false,
      status: "forbidden",
      error: "attachments are disabled for sessions_spawn (enable tools.sessions_spawn.attachments.enabled)",
    });
  });

  it("an empty list is accepted even when disabled (nothing to refuse)", async () => {
    expect(await validateAttachments([], DEFAULTS)).toEqual({ ok: true, files: [], totalBytes: 0 });
  });

  it("too many files → file_count_exceeded, checked before any name", async () => {
    // The bad names prove the count check runs first.
    const inputs = [
      { name: "..", content: "" },
      { name: "", content: "" },
      { name: "c", content: "" },
    ];
    const r = await errorOf(inputs, { ...ON, maxFiles: 2 });
    expect(r).toEqual({ ok: false, status: "error", error: "attachments_file_count_exceeded (maxFiles=2)" });
  });

  it("exactly maxFiles files are accepted", async () => {
    const r = await validateAttachments(
      [
        { name: "a", content: "1" },
        { name: "b", content: "2" },
      ],
      { ...ON, maxFiles: 2 },
    );
    expect(r.ok).toBe(true);
  });
});

describe("validateAttachments — names", () => {
  it("empty and whitespace-only names → (empty)", async () => {
    expect((await errorOf([{ name: "", content: "x" }])).error).toBe("attachments_invalid_name (empty)");
    expect((await errorOf([{ name: "   ", content: "x" }])).error).toBe("attachments_invalid_name (empty)");
  });

  it.each([
    ["foo/bar"],
    ["foo\\bar"],
    ["."],
    [".."],
    [".manifest.json"],
    ["a\nb"],
    ["a\rb"],
    ["a\tb"],
    ["a\u0000b"],
    ["a\u0007b"],
    ["a\u007fb"],
  ])("%j is refused with the name in the message", async (name) => {
    const r = await errorOf([{ name, content: "x" }]);
    expect(r).toEqual({ ok: false, status: "error", error: `attachments_invalid_name (${name})` });
  });

  it("duplicates → duplicate_name (after trimming, like OpenClaw)", async () => {
    const r = await errorOf([
      { name: "a.txt", content: "1" },
      { name: " a.txt ", content: "2" },
    ]);
    expect(r.error).toBe("attachments_duplicate_name (a.txt)");
  });

  it("names are case-sensitive and dotfiles other than the manifest are fine", async () => {
    const r = await validateAttachments(
      [
        { name: "A.txt", content: "1" },
        { name: "a.txt", content: "2" },
        { name: ".env.example", content: "3" },
      ],
      ON,
    );
    expect(r.ok && r.files.map((f) => f.name)).toEqual(["A.txt", "a.txt", ".env.example"]);
  });

  it("checks run per file in order: an earlier bad file's error wins over a later bad name", async () => {
    const r = await errorOf([
      { name: "first.bin", content: "!!!!", encoding: "base64" },
      { name: "..", content: "x" },
    ]);
    expect(r.error).toBe("attachments_invalid_base64_or_too_large");
  });
});

describe("validateAttachments — strict base64", () => {
  const bad = "attachments_invalid_base64_or_too_large";
  const one = (content: string, config = SMALL) => errorOf([{ name: "f.bin", content, encoding: "base64" }], config);

  it("empty content is refused", async () => {
    expect((await one("")).error).toBe(bad);
  });
  it("whitespace-only content is refused", async () => {
    expect((await one("  \n\t ")).error).toBe(bad);
  });
  it("missing padding (length not a multiple of 4) is refused", async () => {
    expect((await one("aGk")).error).toBe(bad); // "hi" without its '='
  });
  it("misplaced / excess padding is refused", async () => {
    expect((await one("a=Gk")).error).toBe(bad);
    expect((await one("a===")).error).toBe(bad);
  });
  it("characters outside the alphabet are refused (including url-safe -_)", async () => {
    expect((await one("aGk*")).error).toBe(bad);
    expect((await one("-_-_")).error).toBe(bad);
  });
  it("oversize encoded length is refused (13 bytes → 20 chars > 16)", async () => {
    expect((await one(b64(nBytes(13)))).error).toBe(bad);
  });
  it("oversize decoded length within the encoded cap is refused (11 and 12 bytes in 16 chars)", async () => {
    expect(b64(nBytes(11))).toHaveLength(16);
    expect((await one(b64(nBytes(11)))).error).toBe(bad);
    expect((await one(b64(nBytes(12)))).error).toBe(bad);
  });
  it("exact boundary (maxFileBytes bytes) is accepted and decoded byte-for-byte", async () => {
    const bytes = nBytes(10);
    const r = await validateAttachments([{ name: "f.bin", content: b64(bytes), encoding: "base64" }], SMALL);
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.files[0].bytes).toBe(10);
      expect(Array.from(r.files[0].data)).toEqual(bytes);
      expect(r.totalBytes).toBe(10);
    }
  });
  it("exact boundary with the real 1 MiB default is accepted; one byte more is refused", async () => {
    const big = new Uint8Array(1048576).fill(0xab);
    let bin = "";
    for (const b of big) bin += String.fromCharCode(b);
    const ok = await validateAttachments([{ name: "big.bin", content: btoa(bin), encoding: "base64" }], ON);
    expect(ok.ok && ok.files[0].bytes).toBe(1048576);
    const over = await errorOf([{ name: "big.bin", content: btoa(`${bin}\u00ab`), encoding: "base64" }]);
    expect(over.error).toBe(bad);
  });
  it("whitespace inside the encoding is stripped (line-wrapped base64 works)", async () => {
    const r = await validateAttachments([{ name: "f", content: "aGVs\nbG8=\n", encoding: "base64" }], ON);
    expect(r.ok && new TextDecoder().decode(r.files[0].data)).toBe("hello");
  });
  it("pre-decode guard: raw length over 2× the max encoding is refused even if it strips to valid", async () => {
    // max encoded = 16 chars → guard at 32 raw chars. "aGk=" + 29 spaces = 33 raw chars.
    expect((await one(`aGk=${" ".repeat(29)}`)).error).toBe(bad);
    // 32 raw chars is still inside the guard and decodes fine.
    const r = await validateAttachments([{ name: "f", content: `aGk=${" ".repeat(28)}`, encoding: "base64" }], SMALL);
    expect(r.ok).toBe(true);
  });
});

describe("validateAttachments — utf8 and totals", () => {
  it("utf8 over the cap → file_bytes_exceeded with name, UTF-8 byte count and max", async () => {
    // 5 × "é" = 5 UTF-16 units but 10 UTF-8 bytes: the check must count bytes, not characters.
    const r = await errorOf([{ name: "note.txt", content: "ééééé" }], { ...SMALL, maxFileBytes: 8 });
    expect(r).toEqual({
      ok: false,
      status: "error",
      error: "attachments_file_bytes_exceeded (name=note.txt bytes=10 maxFileBytes=8)",
    });
  });
  it("utf8 exactly at the cap is accepted", async () => {
    const r = await validateAttachments([{ name: "note.txt", content: "éééé" }], { ...SMALL, maxFileBytes: 8 });
    expect(r.ok && r.files[0].bytes).toBe(8);
  });
  it("astral characters count as 4 bytes", async () => {
    const r = await errorOf([{ name: "e.txt", content: "😀😀😀" }], SMALL); // 12 bytes > 10
    expect(r.error).toBe("attachments_file_bytes_exceeded (name=e.txt bytes=12 maxFileBytes=10)");
  });
  it("running total over the cap → total_bytes_exceeded with the total reached", async () => {
    const r = await errorOf(
      [
        { name: "a", content: "1234567890" },
        { name: "b", content: "123456" },
      ],
      SMALL, // total cap 15: 10 + 6 = 16
    );
    expect(r.error).toBe("attachments_total_bytes_exceeded (totalBytes=16 maxTotalBytes=15)");
  });
  it("total exactly at the cap is accepted", async () => {
    const r = await validateAttachments(
      [
        { name: "a", content: "1234567890" },
        { name: "b", content: "12345" },
      ],
      SMALL,
    );
    expect(r.ok && r.totalBytes).toBe(15);
  });
  it("non-string content → materialization_failed instead of a crash", async () => {
    const r = await errorOf([{ name: "a", content: 42 as unknown as string }]);
    expect(r.error).toBe("attachments_materialization_failed");
  });
});

describe("materialized files", () => {
  it('sha256 of "hello" is the well-known digest; mimeType kept; data is the UTF-8 bytes', async () => {
    const r = await validateAttachments([{ name: "h.txt", content: "hello", mimeType: "text/plain" }], ON);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.files[0]).toMatchObject({
      name: "h.txt",
      bytes: 5,
      sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
      mimeType: "text/plain",
    });
    expect(Array.from(r.files[0].data)).toEqual([104, 101, 108, 108, 111]);
  });
  it("the same bytes via base64 hash identically", async () => {
    const r = await validateAttachments([{ name: "h.bin", content: "aGVsbG8=", encoding: "base64" }], ON);
    expect(r.ok && r.files[0].sha256).toBe("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    expect(r.ok && "mimeType" in r.files[0]).toBe(false);
  });
});

describe("attachmentsReceipt", () => {
  it("summarises without content", async () => {
    const r = await validateAttachments(
      [
        { name: "a", content: "hello" },
        { name: "b", content: "xy" },
      ],
      ON,
    );
    if (!r.ok) throw new Error(r.error);
    const receipt = attachmentsReceipt(r.files, ".switchboard/attachments/123");
    expect(receipt).toEqual({
      count: 2,
      totalBytes: 7,
      files: [
        { name: "a", bytes: 5, sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" },
        { name: "b", bytes: 2, sha256: r.files[1].sha256 },
      ],
      relDir: ".switchboard/attachments/123",
    });
    expect(JSON.stringify(receipt)).not.toContain("data");
  });
});

describe("redactAttachmentArgs", () => {
  it("replaces content, keeps name/encoding/mimeType, drops other entry fields, leaves the input untouched", () => {
    const args = {
      task: "summarise",
      label: "x",
      attachments: [
        { name: "a.txt", content: "secret text", mimeType: "text/plain" },
        { name: "b.bin", content: "c2VjcmV0", encoding: "base64", extra: "also secret" },
      ],
    };
    const out = redactAttachmentArgs(args);
    expect(out).toEqual({
      task: "summarise",
      label: "x",
      attachments: [
        { name: "a.txt", content: "__OPENCLAW_REDACTED__", mimeType: "text/plain" },
        { name: "b.bin", content: "__OPENCLAW_REDACTED__", encoding: "base64" },
      ],
    });
    expect(JSON.stringify(out)).not.toMatch(/secret|c2VjcmV0/);
    // The original must survive: it is still needed to actually spawn.
    expect(args.attachments[0].content).toBe("secret text");
    expect(out).not.toBe(args);
  });
  it("args without attachments come back as an equal deep copy", () => {
    const args = { task: "t", nested: { a: [1, 2] } };
    const out = redactAttachmentArgs(args);
    expect(out).toEqual(args);
    expect(out.nested).not.toBe(args.nested);
  });
});
