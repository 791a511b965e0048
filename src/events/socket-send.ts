/** Send to a watcher's socket. One whose Worker side is gone throws on send; its close event cleans it up. */
export function send(ws: WebSocket, text: string): void {
  try {
    ws.send(text);
  } catch {
    /* closed */
  }
}
