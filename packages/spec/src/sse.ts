/** Reads a `text/event-stream` body and yields the data of each event (multi-line data joined with "\n"),
 * including a final `[DONE]`; comments and other fields are skipped (SGLang only sends `data:`). Takes a web
 * ReadableStream (fetch, browsers) or any async iterable of chunks (undici bodies). Web streams and TextDecoder
 * only, so it runs in browsers and Node. The one SSE reader of the direct client and the SGLang client. */
export async function* sseData(
  body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string>,
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  for await (const chunk of chunksOf(body)) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let newline = buffer.indexOf('\n');
    while (newline >= 0) {
      // Lines end at "\n" and lose a trailing "\r", so a CRLF split across two chunks is still one line end.
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
  buffer += decoder.decode();
  if (buffer.endsWith('\r')) buffer = buffer.slice(0, -1);
  if (buffer.startsWith('data:')) data.push(buffer.slice(buffer.charCodeAt(5) === 32 ? 6 : 5));
  if (data.length > 0) yield data.join('\n');
}

/** The chunks of a body. A consumer that stops early cancels a web stream (which aborts the engine request);
 * an async iterable is closed by `for await` itself. */
async function* chunksOf(
  body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string>,
): AsyncGenerator<Uint8Array | string> {
  if (!('getReader' in body)) {
    yield* body;
    return;
  }
  const reader = body.getReader();
  let done = false;
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) {
        done = true;
        return;
      }
      yield chunk.value;
    }
  } finally {
    if (!done) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
