import { Writable } from 'node:stream';
import { InvalidArgumentError } from 'commander';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseLogLevel, parseSeconds } from '../cli/serve-command.ts';
import { humanDestination, humanLine } from './log-format.ts';

describe('logs on a terminal', () => {
  it('a pino record reads as time, level, where, message and fields', () => {
    const line = humanLine(
      JSON.stringify({
        level: 30,
        time: Date.UTC(2026, 0, 1, 12, 1, 2),
        service: 'uis',
        component: 'manager',
        role: 'rollout',
        msg: 'phase changed',
        from: 'rollout',
        to: 'genrm score',
        reason: null,
      }),
      false,
    );
    expect(line).toBe('12:01:02 INFO  [manager rollout] phase changed from=rollout to="genrm score"');
  });

  it('colours the level only on a TTY, and passes a line that is not JSON through', () => {
    expect(humanLine(JSON.stringify({ level: 50, time: 0, msg: 'x' }), true)).toContain(
      '\u001b[31mERROR\u001b[0m',
    );
    expect(humanLine('not json', true)).toBe('not json');
  });

  it('pino writes through the human destination', () => {
    const lines: string[] = [];
    const out = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    pino({ base: { service: 'uis' } }, humanDestination(out)).warn({ engine: 'policy/0' }, 'engine slow');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d WARN {2}engine slow engine=policy\/0\n$/);
  });
});

describe('--log-level and --start-deadline', () => {
  it.for(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])('takes %s', (level) => {
    expect(parseLogLevel(level)).toBe(level);
  });

  it('refuses an unknown level, naming the choices', () => {
    expect(() => parseLogLevel('loud')).toThrow(InvalidArgumentError);
    expect(() => parseLogLevel('loud')).toThrow(/trace, debug, info/);
  });

  it('reads seconds as milliseconds and refuses 0, negatives and words', () => {
    expect(parseSeconds('1200')).toBe(1_200_000);
    expect(parseSeconds('2.5')).toBe(2500);
    for (const bad of ['0', '-5', 'ten', '', '1e3'])
      expect(() => parseSeconds(bad)).toThrow(InvalidArgumentError);
  });
});
