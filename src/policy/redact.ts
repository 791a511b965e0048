/**
 * Secret redaction for text that leaves a session (test/policy/history-sanitize.test.ts).
 *
 * Only the secret value is masked; the surrounding context (`API_KEY=`, `"token": "`, `--password `,
 * `Bearer `) is kept so a reader still knows *what* was there. Every pattern is written so the regex
 * engine does linear work per input: no nested quantifiers, and quantified runs are anchored by a
 * literal prefix (`sk-`, `--token`, …) or a word boundary so a failed attempt cannot be retried from
 * every position inside the same run.
 */

/** Masking rule of OpenClaw: long secrets keep a recognisable head/tail, short ones vanish. */
export function maskSecret(value: string): string {
  if (value.length < 18) return "***";
  return `${safeHead(value, 6)}…${safeTail(value, 4)}`;
}

// Head/tail cuts never split a surrogate pair (quoted values may hold any text).
function safeHead(s: string, n: number): string {
  const code = s.charCodeAt(n - 1);
  return s.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n);
}
function safeTail(s: string, n: number): string {
  const code = s.charCodeAt(s.length - n);
  return s.slice(code >= 0xdc00 && code <= 0xdfff ? s.length - n + 1 : s.length - n);
}

/*
 * Each rule masks the first capture group that participated in the match (the `d` flag gives its
 * offsets), or the whole match when the regex has no groups. Alternatives such as
 * `"quoted value"|bare` therefore each get their own group.
 */
const RULES: RegExp[] = [
  // `Authorization: Bearer <token>` (also as a JSON/YAML pair); any length, so short tokens become ***.
  /\bAuthorization["']?\s*[:=]\s*["']?Bearer\s+([A-Za-z0-9._~+/=-]+)/dgi,
  // Bare `Bearer <18+ chars>`: shorter words after "bearer" are too likely to be prose.
  /\b[Bb]earer\s+([A-Za-z0-9._~+/=-]{18,})/dg,
  // JSON fields. The string body `(?:[^"\\]|\\.)` has disjoint alternatives, so a failed match backtracks linearly, never exponentially.
  /"(?:api_?key|token|secret|password|passwd|access_?token|refresh_?token)"\s*:\s*"((?:[^"\\]|\\.)+)"/dgi,
  // CLI flags: `--token abc`, `--api-key=abc`, `--password "a b"`. The `(?:\s+|=)` keeps `--token-file x` out.
  /(?<![\w-])--(?:api[-_]key|token|secret|password|passwd)(?:\s+|=)(?:"([^"\r\n]+)"|'([^'\r\n]+)'|([^\s"']+))/dgi,
  // ENV-style `*KEY|TOKEN|SECRET|PASSWORD|PASSWD=value` (upper-case names, as in env files and shells).
  // `\b` allows one start per word, so the backtracking of `[A-Z0-9_]*` stays linear overall.
  // The optional quote after the name also catches `"MY_SECRET": "…"` pairs the JSON rule does not list.
  /\b[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)["']?\s*[=:]\s*(?:"([^"\r\n]+)"|'([^'\r\n]+)'|([^\s"'\\]+))/dg,
  // Vendor-prefixed tokens.
  /\bsk-[A-Za-z0-9_-]{8,}/dg,
  /\bghp_[A-Za-z0-9]{20,}/dg,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/dg,
  /\bxox[baprs]-[A-Za-z0-9-]{10,}/dg,
  /\bxapp-[A-Za-z0-9-]{10,}/dg,
  /\bgsk_[A-Za-z0-9_-]{10,}/dg,
  /\bAIza[0-9A-Za-z_-]{20,}/dg,
  /\bpplx-[A-Za-z0-9_-]{10,}/dg,
  /\bnpm_[A-Za-z0-9]{10,}/dg,
  // Telegram bot tokens. `(?<!\d)` rather than `\b`: they usually follow `/bot` in API URLs.
  /(?<!\d)\d{8,10}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])/dg,
];

// Values this module already produced are left as they are, so redacting twice is a no-op
// (history quoted into another session's history must not be reported as a fresh redaction).
const MASKED = /^(?:\*\*\*|[^…]{0,6}…[^…]{0,4})$/;
const isMasked = (value: string) => MASKED.test(value);

function applyRule(text: string, re: RegExp): string {
  re.lastIndex = 0;
  let out = "";
  let last = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const indices = m.indices!;
    let span: [number, number] = indices[0];
    for (let g = 1; g < indices.length; g++) {
      const s = indices[g];
      if (s) {
        span = s;
        break;
      }
    }
    const value = text.slice(span[0], span[1]);
    out += text.slice(last, span[0]) + (isMasked(value) ? value : maskSecret(value));
    last = span[1];
  }
  return last === 0 ? text : out + text.slice(last);
}

// A closed list of key kinds keeps the number of distinct footers (and footer searches) bounded.
const PEM_BEGIN = /-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?)PRIVATE KEY-----/g;

/**
 * PEM private keys: header + `…redacted…` + footer. Done with indexOf instead of a lazy
 * `[\s\S]*?` regex, which would rescan the rest of the text for every unterminated BEGIN line.
 * The header/footer stand in for the "first/last line", which also covers PEMs flattened onto one
 * line (JSON-escaped `\n`), where a literal first line would be the whole key.
 */
function redactPem(text: string): string {
  if (!text.includes("PRIVATE KEY-----")) return text;
  PEM_BEGIN.lastIndex = 0;
  let out = "";
  let last = 0;
  // A footer missing after one header is missing after every later one: search for it only once.
  const missing = new Set<string>();
  for (let m = PEM_BEGIN.exec(text); m !== null; m = PEM_BEGIN.exec(text)) {
    const footer = `-----END ${m[1]}PRIVATE KEY-----`;
    if (missing.has(footer)) continue;
    const end = text.indexOf(footer, PEM_BEGIN.lastIndex);
    if (end < 0) {
      missing.add(footer);
      continue;
    }
    out += `${text.slice(last, m.index)}${m[0]}\n…redacted…\n${footer}`;
    last = end + footer.length;
    PEM_BEGIN.lastIndex = last;
  }
  return last === 0 ? text : out + text.slice(last);
}

export function redactSensitiveText(text: string): { text: string; redacted: boolean } {
  // PEM first, so the base64 body is gone before the token rules look at it.
  let out = redactPem(text);
  for (const re of RULES) out = applyRule(out, re);
  return { text: out, redacted: out !== text };
}
