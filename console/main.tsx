import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { AgentsPage } from "./agents";
import { getToken, SIGNED_OUT_EVENT, setToken } from "./api";
import { useRoute } from "./router";
import { SessionPage } from "./session";
import { SessionsPage } from "./sessions";
import { SignIn } from "./sign-in";

function App() {
  const [signedIn, setSignedIn] = useState(() => getToken() !== null);
  const route = useRoute();
  useEffect(() => {
    const onSignedOut = () => setSignedIn(false);
    window.addEventListener(SIGNED_OUT_EVENT, onSignedOut);
    return () => window.removeEventListener(SIGNED_OUT_EVENT, onSignedOut);
  }, []);

  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  const signOut = () => {
    setToken(null);
    setSignedIn(false);
  };
  return (
    <>
      <header class="top">
        <span class="brand">Switchboard</span>
        <nav aria-label="Main">
          <a href="#/sessions" aria-current={route.page !== "agents" ? "page" : undefined}>
            Sessions
          </a>
          <a href="#/agents" aria-current={route.page === "agents" ? "page" : undefined}>
            Agents &amp; config
          </a>
        </nav>
        <button type="button" class="link" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>
        {route.page === "sessions" && <SessionsPage />}
        {route.page === "session" && <SessionPage key={route.key} sessionKey={route.key} tab={route.tab} />}
        {route.page === "agents" && <AgentsPage />}
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
