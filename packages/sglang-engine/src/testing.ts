/** Test helpers for packages that talk to SGLang engines (`@uis/sglang-engine/testing`). */
import type { IncomingMessage, ServerResponse } from 'node:http';

export { ManualClock } from './manual-clock.ts';

/** One way an engine (or a proxy in front of it) answers badly, as a node:http handler. */
export type EngineFault = (req: IncomingMessage, res: ServerResponse) => void;

/** An engine that answers `status` with `body` of `type`. */
export const engineReply =
  (status: number, type: string, body: string): EngineFault =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  };

/** The bad answers seen in the field, by name: wrong bodies, error pages, a refusal, a cut answer, a reset, and
 * no answer at all. */
export const ENGINE_FAULTS = {
  not_json: engineReply(200, 'text/html', '<html>proxy page</html>'),
  success_yes: engineReply(200, 'application/json', '{"success":"yes"}'),
  list: engineReply(200, 'application/json', '[]'),
  null: engineReply(200, 'application/json', 'null'),
  html_500: engineReply(500, 'text/html', '<html><body>Internal Server Error</body></html>'),
  html_400: engineReply(400, 'text/html', '<html><body>Bad Request</body></html>'),
  success_false: engineReply(200, 'application/json', '{"success":false,"message":"engine refused"}'),
  // Announces 100 bytes, sends 6, dies.
  truncated: (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
    res.write('{"succ');
    setTimeout(() => res.destroy(), 20);
  },
  reset: (req) => req.socket.destroy(),
  silent: () => {},
} satisfies Record<string, EngineFault>;

export type EngineFaultName = keyof typeof ENGINE_FAULTS;
