import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { type ErrorCode, UisError } from '@uis/spec';
import { answeredOnSocket } from '../proxy/index.ts';

/** The JSON answers to what node's HTTP parser refuses, by error code (anything else: 400 `invalid_http`). */
const PARSER_REFUSALS: Record<string, { code: ErrorCode; path?: string; message: string }> = {
  HPE_HEADER_OVERFLOW: {
    code: 'headers_too_large',
    path: 'headers',
    message: 'request headers are too large; send fewer or shorter headers',
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    code: 'request_timeout',
    path: 'body',
    message: "the request (headers and body) did not arrive within the gateway's deadline; send it faster",
  },
};

/** node's answer to a request its HTTP parser refuses (bad request line, header bytes, chunk framing, headers too
 * large or too slow) is a bare status line without a body: this one carries the product's JSON error. A socket in the
 * middle of a response is only closed, as node does; an idle keep-alive socket that answered earlier requests still
 * gets the error (a pooled client would otherwise see a bare close on a reused connection). */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  // node's own test (`_http_server.js` socketOnError): the response in flight on this socket, if any.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent: boolean } | null })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const known = err.code === undefined ? undefined : PARSER_REFUSALS[err.code];
  const refusal = new UisError(
    known ?? {
      code: 'invalid_http',
      message: `the request is not valid HTTP/1.1 (${err.code ?? err.message}); fix the client's request framing`,
    },
  );
  answeredOnSocket(socket, refusal);
  const body = JSON.stringify(refusal.toJSON());
  socket.end(
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
