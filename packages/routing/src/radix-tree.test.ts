import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApproxRadixTree, commonPrefixLength } from './radix-tree.ts';

describe('ApproxRadixTree', () => {
  it('matches the longest prefix, counting a partially matched edge', () => {
    const tree = new ApproxRadixTree({ maxTenantChars: 1000 });
    tree.insert('hello world', 'a');
    tree.insert('hello there', 'b');
    expect(tree.prefixMatch('hello world!')).toEqual({
      matchedChars: 11,
      tenant: 'a',
      tenantMatchedChars: 11,
    });
    expect(tree.prefixMatch('hello wo')).toMatchObject({ matchedChars: 8, tenant: 'a' });
    // "hello " is shared: the most recent tenant there is b.
    expect(tree.prefixMatch('hello you')).toMatchObject({
      matchedChars: 6,
      tenant: 'b',
      tenantMatchedChars: 6,
    });
    expect(tree.prefixMatch('goodbye')).toEqual({ matchedChars: 0, tenant: null, tenantMatchedChars: 0 });
  });

  it('walks back up to a node whose tenant is accepted', () => {
    const tree = new ApproxRadixTree({ maxTenantChars: 1000 });
    tree.insert('system prompt: A', 'a');
    tree.insert('system prompt: B', 'b');
    const m = tree.prefixMatch('system prompt: B and more', (t) => t === 'a');
    expect(m).toMatchObject({ tenant: 'a', tenantMatchedChars: 15, matchedChars: 16 });
  });

  it('counts characters per tenant, shared edges once per tenant', () => {
    const tree = new ApproxRadixTree({ maxTenantChars: 1000 });
    tree.insert('abcdef', 'a');
    tree.insert('abcxyz', 'a');
    tree.insert('abcdef', 'b');
    expect(tree.tenantChars('a')).toBe(9);
    expect(tree.tenantChars('b')).toBe(6);
    tree.insert('abcdef', 'a');
    expect(tree.tenantChars('a')).toBe(9);
  });

  it('evicts least recently used leaves when a tenant exceeds its bound', () => {
    const tree = new ApproxRadixTree({ maxTenantChars: 100, lowWater: 0.5 });
    for (let i = 0; i < 10; i++) tree.insert(`${i}`.repeat(20), 'a');
    expect(tree.tenantChars('a')).toBeLessThanOrEqual(100);
    // The newest text survives, the oldest is gone.
    expect(tree.prefixMatch('9'.repeat(20)).tenant).toBe('a');
    expect(tree.prefixMatch('0'.repeat(20)).tenant).toBeNull();
  });

  it('property: every tenant stays within its bound and the tree never holds tenant-less nodes', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.string({ unit: fc.constantFrom('a', 'b', 'c'), maxLength: 30 }),
            fc.constantFrom('x', 'y', 'z'),
          ),
          {
            maxLength: 200,
          },
        ),
        (ops) => {
          const tree = new ApproxRadixTree({ maxTenantChars: 40 });
          for (const [text, tenant] of ops) {
            tree.insert(text, tenant);
            if (tree.tenantChars(tenant) > 40) return false;
          }
          // Removing every tenant leaves only the root.
          for (const t of tree.tenants()) tree.removeTenant(t);
          return tree.nodes === 1;
        },
      ),
    );
  });

  it('property: a text just inserted for a tenant matches fully for that tenant (when within the bound)', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 20 }), { minLength: 1, maxLength: 50 }), (texts) => {
        const tree = new ApproxRadixTree({ maxTenantChars: 10_000 });
        for (const [i, t] of texts.entries()) tree.insert(t, `t${i % 3}`);
        const last = texts[texts.length - 1]!;
        const m = tree.prefixMatch(last, (t) => t === `t${(texts.length - 1) % 3}`);
        return last.length === 0 || m.tenantMatchedChars === last.length;
      }),
    );
  });

  it('property: commonPrefixLength equals a naive char-by-char count', () => {
    const chunk = fc.string({ unit: fc.constantFrom('a', 'b'), maxLength: 80 });
    fc.assert(
      fc.property(chunk, chunk, chunk, fc.nat(20), (shared, x, y, offset) => {
        const text = 'z'.repeat(offset) + shared + x;
        const edge = shared + y;
        let naive = 0;
        while (naive < edge.length && offset + naive < text.length && text[offset + naive] === edge[naive])
          naive++;
        return commonPrefixLength(text, offset, edge) === naive;
      }),
      { numRuns: 500 },
    );
  });
});
