import type { Writable } from 'node:stream';
import type pino from 'pino';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
};
const COLORS: Record<number, string> = { 10: '90', 20: '90', 30: '32', 40: '33', 50: '31', 60: '31' };
const OMIT = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service', 'component', 'role']);

/** One pino JSON line as an operator reads it: `12:01:02 INFO  [manager rollout] msg key=value`. */
export function humanLine(json: string, color: boolean): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(json);
  } catch {
    return json;
  }
  const level = Number(rec.level);
  const time = new Date(Number(rec.time)).toISOString().slice(11, 19);
  const where = [rec.component, rec.role].filter((v) => typeof v === 'string').join(' ');
  const fields = Object.entries(rec)
    .filter(([k, v]) => !OMIT.has(k) && v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' && !/\s/.test(v) ? v : JSON.stringify(v)}`);
  const name = LEVELS[level] ?? String(rec.level);
  const tag = color ? `\u001b[${COLORS[level] ?? '0'}m${name}\u001b[0m` : name;
  return [time, tag, where ? `[${where}]` : '', String(rec.msg ?? ''), ...fields].filter(Boolean).join(' ');
}

/** A pino destination that writes human-readable lines to `out` (a TTY) instead of JSON. */
export function humanDestination(out: Writable & { isTTY?: boolean }): pino.DestinationStream {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line) out.write(`${humanLine(line, out.isTTY === true)}\n`);
    },
  };
}
