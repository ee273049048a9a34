import type { IncomingMessage, ServerResponse } from 'node:http';

/** Carries no stack: it only tells the engine pool why a request stops. A captured stack costs ~40 us under tsx (source
 * maps, read by node's destroy()), paid per stream when hundreds of clients leave at once. */
export class ClientGoneError extends Error {
  constructor() {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super('client disconnected');
    Error.stackTraceLimit = limit;
    this.name = 'ClientGoneError';
  }
}

/** `res.chunkedEncoding` is what node's ServerResponse consults to frame each write as a chunk; a chunked engine
 * answer relayed with its own framing turns it off after writing the head. Checked, not assumed. */
export function canRelayChunked(req: IncomingMessage, res: ServerResponse): boolean {
  return req.httpVersionMajor === 1 && req.httpVersionMinor === 1 && typeof res.chunkedEncoding === 'boolean';
}
