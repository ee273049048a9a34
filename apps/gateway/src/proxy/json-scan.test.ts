import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ForwardedBody, forwardedBody, GENERATE_EDIT, openAIEdit, parseServingBody } from './body.ts';
import { scanObject } from './json-scan.ts';

/** JSON texts near the grammar's edges: valid objects, then the same with bytes changed, cut or added. */
const jsonObject = fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 });
const spaced = (text: string, spaces: string[]) =>
  text.replace(/[,:[\]{}]/g, (c) => `${spaces[c.charCodeAt(0) % spaces.length] ?? ''}${c}`);
const texts = fc.oneof(
  fc
    .tuple(jsonObject, fc.array(fc.constantFrom('', ' ', '\n', '\t', '\r\n'), { minLength: 1 }))
    .map(([o, s]) => spaced(JSON.stringify(o), s)),
  fc
    .tuple(jsonObject, fc.nat(), fc.constantFrom(...'{}[]",:\\ -+.0123456789eEtrufalsn\u0001\u00e9x'))
    .map(([o, at, c]) => {
      const t = JSON.stringify(o);
      const i = at % (t.length + 1);
      return `${t.slice(0, i)}${c}${t.slice(i + (at % 2))}`;
    }),
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v) ?? ''),
  fc.string({ unit: fc.constantFrom(...'{}[]",:\\ -0123456789eE.truefalsn') }),
);

/** What the engine receives. */
const sent = (f: ForwardedBody) => Buffer.concat([Buffer.from(f.prefix, 'latin1'), f.bytes]).toString();

const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

describe('scanObject', () => {
  it('accepts only JSON objects, and reads each top-level member as JSON.parse does', () => {
    let accepted = 0;
    fc.assert(
      fc.property(texts, (text) => {
        const bytes = Buffer.from(text);
        const members = scanObject(bytes, 128);
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        if (members === undefined) {
          // Refusing a valid object only costs time (the body is then parsed whole), but no valid object should be.
          expect(isObject(parsed), text).toBe(false);
          return;
        }
        accepted++;
        expect(isObject(parsed), text).toBe(true);
        const read: Record<string, unknown> = {};
        for (const m of members)
          Object.defineProperty(read, m.key, {
            value: JSON.parse(bytes.toString('utf8', m.valueStart, m.end)),
            enumerable: true,
            configurable: true,
          });
        expect(read).toEqual(parsed);
      }),
      { numRuns: 5000 },
    );
    expect(accepted).toBeGreaterThan(1000);
  });

  it('refuses nesting deeper than the limit (the full parse then names where)', () => {
    expect(scanObject(Buffer.from('{"a":[[1]]}'), 3)).toHaveLength(1);
    expect(scanObject(Buffer.from('{"a":[[1]]}'), 2)).toBeUndefined();
    const deep = parseServingBody(Buffer.from('{"a":[[1]]}'), 2);
    expect(deep).toMatchObject({ code: 'json_too_deep', path: 'body.a[0]' });
  });
});

describe('forwardedBody', () => {
  it('edits a scanned body to what parsing, editing and serializing it would send', () => {
    fc.assert(
      fc.property(
        jsonObject,
        fc.option(fc.constantFrom('m', 'served', ''), { nil: undefined }),
        fc.boolean(),
        fc.boolean(),
        (obj, model, generate, inject) => {
          const body = { ...obj, ...(model === undefined ? {} : { model }) };
          const raw = Buffer.from(JSON.stringify(body));
          const parsed = parseServingBody(raw);
          if (!('raw' in parsed)) return; // routing fields of the wrong type: refused, nothing forwarded
          expect(parsed.members).toBeDefined();
          const edit = generate ? GENERATE_EDIT : openAIEdit('served');
          const out = forwardedBody(parsed, edit, inject ? 'rid-1' : undefined);
          const expected: Record<string, unknown> = JSON.parse(raw.toString());
          for (const key of edit.remove ?? []) delete expected[key];
          for (const [key, value] of Object.entries(edit.set ?? {})) expected[key] = value;
          if (inject) expected.rid = 'rid-1';
          expect(JSON.parse(sent(out))).toEqual(expected);
          // Nothing to change: the client's bytes themselves (with the rid spliced in).
          const unchanged =
            (edit.remove ?? []).every((k) => !(k in body)) && (generate || body.model === 'served');
          if (unchanged && !inject) expect(out.bytes).toBe(raw);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('keeps the bytes of the members it does not edit', () => {
    const raw = Buffer.from('{"model": "alias", "temperature": 1.0, "text": "\\u00e9"}');
    const parsed = parseServingBody(raw);
    if (!('raw' in parsed)) throw new Error('refused');
    expect(sent(forwardedBody(parsed, openAIEdit('served'), undefined))).toBe(
      '{"model": "served","temperature": 1.0,"text": "\\u00e9"}',
    );
    expect(sent(forwardedBody(parsed, GENERATE_EDIT, 'r'))).toBe(
      '{"temperature": 1.0,"text": "\\u00e9","rid":"r"}',
    );
  });
});
