import { useState } from "preact/hooks";
import { ApiError, api, setToken } from "./api";

/** Paste a token; it is checked against the Worker, then kept in sessionStorage for this tab only. */
export function SignIn(props: { onSignedIn: () => void }) {
  const [token, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api("GET", "/v1/agents", undefined, token.trim());
      setToken(token.trim());
      props.onSignedIn();
    } catch (err) {
      setError(err instanceof ApiError ? `${err.status} ${err.type}: ${err.message}` : String(err));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main class="sign-in">
      <h1>Switchboard console</h1>
      <form onSubmit={submit}>
        <label for="token">Token</label>
        <input
          id="token"
          type="password"
          autocomplete="off"
          required
          value={token}
          onInput={(e) => setValue(e.currentTarget.value)}
          aria-describedby="token-help"
        />
        <p id="token-help" class="help">
          The operator token (GATEWAY_TOKEN) or an agent token. Kept in this tab's session storage only.
        </p>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
