// Tests read JSON bodies loosely and assert on their shape; production code never does.
declare global {
  interface Response {
    // biome-ignore lint/suspicious/noExplicitAny: test bodies are checked by assertions
    json(): Promise<any>;
  }
}

export {};
