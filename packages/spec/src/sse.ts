/** Reads a `text/event-stream` body and yields the data of each event (multi-line data joined with "\n"),
 * including a final `[DONE]`. Web streams and TextDecoder only, so it runs in browsers and Node. */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  let done = false;
  try {
    while (!done) {
      const chunk = await reader.read();
      done = chunk.done;
      buffer += done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      let newline = buffer.indexOf('\n');
      while (newline >= 0) {
        let line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length > 0) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line.charCodeAt(5) === 32 ? 6 : 5));
        }
        newline = buffer.indexOf('\n');
      }
    }
    if (buffer.startsWith('data:')) data.push(buffer.slice(buffer.charCodeAt(5) === 32 ? 6 : 5));
    if (data.length > 0) yield data.join('\n');
  } finally {
    // An early exit by the consumer cancels the body, which aborts the engine request.
    if (!done) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
