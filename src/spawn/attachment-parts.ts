import type { FilePart, TextPart } from "ai";
import type { SessionHost } from "../session/host";
import { listAttachments, readAttachment } from "./child-spawn";

/**
 * A sub-agent's spawn attachments as AI SDK content parts of its task message, so a built-in model
 * sees the files it was handed: text files as text parts, images as file parts with an image media type. Anything else is
 * named in a text part with the path it can be fetched from — never dropped without a word. The
 * bytes are bounded by `tools.sessions_spawn.attachments` (checked at spawn, src/spawn/attachments.ts).
 */
export type AttachmentPart = TextPart | FilePart;

const TEXT_MIME = /^(text\/|application\/(json|xml|yaml|x-yaml|javascript|x-ndjson|csv|toml|sql)\b)|\+(json|xml)\b/i;
const IMAGE_MIME = /^image\/(png|jpeg|gif|webp)$/i;

/** Image type from the file's first bytes, for attachments sent without a mimeType. */
function sniffImage(b: Uint8Array): string | undefined {
  if (b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) return "image/png";
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg";
  if (b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46) return "image/gif";
  if (
    b[0] === 0x52 &&
    b[1] === 0x49 &&
    b[2] === 0x46 &&
    b[3] === 0x46 &&
    b[8] === 0x57 &&
    b[9] === 0x45 &&
    b[10] === 0x42 &&
    b[11] === 0x50
  )
    return "image/webp";
  return undefined;
}

/** UTF-8 text without NULs, or null (binary). */
function asText(b: Uint8Array): string | null {
  try {
    const s = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(b);
    return s.includes("\u0000") ? null : s;
  } catch {
    return null;
  }
}

export function attachmentParts(host: SessionHost): AttachmentPart[] {
  const parts: AttachmentPart[] = [];
  for (const meta of listAttachments(host)) {
    const file = readAttachment(host, meta.name);
    if (!file) continue;
    const mime = file.mimeType?.toLowerCase();
    const label = `[Attachment: ${file.name} (${mime ?? "no type"}, ${file.bytes} bytes)]`;
    const image = mime && IMAGE_MIME.test(mime) ? mime : !mime ? sniffImage(file.data) : undefined;
    if (image) {
      parts.push(
        { type: "text", text: label },
        { type: "file", mediaType: image, data: { type: "data", data: file.data } },
      );
      continue;
    }
    const text = !mime || TEXT_MIME.test(mime) ? asText(file.data) : null;
    if (text !== null) {
      parts.push({ type: "text", text: `${label}\n${text}` });
      continue;
    }
    const path = `/v1/sessions/${encodeURIComponent(host.key)}/attachments/${encodeURIComponent(file.name)}`;
    parts.push({
      type: "text",
      text: `${label} binary content not included here; GET ${path} with this session's token.`,
    });
  }
  return parts;
}
