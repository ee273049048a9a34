/** Splits a `text/event-stream` body into the `data` payload of each event (multi-line data joined with "\n").
 * Comments and other fields are skipped: SGLang only sends `data:`. */
export async function* sseData(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of body) {
    buf += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    // Normalise CRLF once so one separator search covers every line ending.
    if (buf.includes('\r')) buf = buf.replace(/\r\n?/g, '\n');
    let sep = buf.indexOf('\n\n');
    while (sep !== -1) {
      const data = eventData(buf.slice(0, sep));
      buf = buf.slice(sep + 2);
      if (data !== undefined) yield data;
      sep = buf.indexOf('\n\n');
    }
  }
  buf += decoder.decode();
  const tail = eventData(buf.replace(/\r\n?/g, '\n'));
  if (tail !== undefined) yield tail;
}

function eventData(event: string): string | undefined {
  let data: string | undefined;
  for (const line of event.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const value = line.slice(line.charAt(5) === ' ' ? 6 : 5);
    data = data === undefined ? value : `${data}\n${value}`;
  }
  return data;
}
