/** Vite's `?raw` imports (a file's text), which the workerd test pool supports: test/config/secrets.test.ts. */
declare module "*?raw" {
  const text: string;
  export default text;
}
