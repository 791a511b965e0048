import { useState } from "preact/hooks";
import { ErrorLine } from "./errors";
import type { SessionData } from "./session-data";

/**
 * Label and send policy (PATCH /v1/sessions/{key}; the send policy needs the operator token). The form
 * starts from the row it is mounted with; session.tsx mounts it again once the row has loaded.
 */
export function SettingsTab(props: { data: SessionData }) {
  const row = props.data.row;
  const [label, setLabel] = useState(row?.label ?? "");
  const [policy, setPolicy] = useState<string>(row?.sendPolicy ?? "inherit");
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState("");

  async function save(what: string, body: Record<string, unknown>) {
    setError(null);
    setSaved("");
    try {
      await props.data.patch(body);
      setSaved(`${what} saved.`);
    } catch (err) {
      setError(err);
    }
  }

  return (
    <div class="settings">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          save("Label", { label: label.trim() ? label : null });
        }}
      >
        <label for="label">Label</label>
        <input id="label" maxLength={512} value={label} onInput={(e) => setLabel(e.currentTarget.value)} />
        <button type="submit">Save label</button>
      </form>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          save("Send policy", { sendPolicy: policy === "inherit" ? null : policy });
        }}
      >
        <label for="send-policy">Send policy</label>
        <select id="send-policy" value={policy} onChange={(e) => setPolicy(e.currentTarget.value)}>
          <option value="inherit">Inherit (session.sendPolicy)</option>
          <option value="allow">Allow</option>
          <option value="deny">Deny</option>
        </select>
        <button type="submit">Save send policy</button>
      </form>
      <p role="status">{saved}</p>
      <ErrorLine error={error} />
    </div>
  );
}
