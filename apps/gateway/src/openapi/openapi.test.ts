import { Validator } from '@seriousme/openapi-schema-validator';
import { commandRoutes } from '@uis/control-plane';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';

const gw = gatewayOnSims({ config: splitTestConfig(), server: { adminToken: 'the-admin-token' } });

type Doc = { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };

async function document(): Promise<Doc> {
  const r = await fetch(`${gw.url}/openapi.json`);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toContain('application/json');
  return (await r.json()) as Doc;
}

/** `METHOD /path` of every documented operation, `{role}` expanded to the configured roles. */
function documented(doc: Doc): Set<string> {
  const out = new Set<string>();
  for (const [path, ops] of Object.entries(doc.paths))
    for (const method of Object.keys(ops))
      for (const role of path.startsWith('/admin/') ? ['{role}'] : ['rollout', 'genrm', 'teacher'])
        out.add(`${method.toUpperCase()} ${path.replace('{role}', role).replace(/\{([a-z_]+)\}/g, ':$1')}`);
  return out;
}

describe('OpenAPI 3.1 document and /docs', () => {
  it('is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)', async () => {
    const doc = await document();
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect((doc as unknown as { openapi: string }).openapi).toBe('3.1.0');
  });

  it('documents every route the server answers (serving fast path and Hono), each with its error answers', async () => {
    const doc = await document();
    const listed = documented(doc);
    const served = [
      ...gw.server.routes.list().map(([m, p]) => `${m} ${p}`),
      ...gw.server.app.routes
        .filter((r) => (r.method === 'GET' || r.method === 'POST') && !r.path.includes('*'))
        // Swagger UI's own files are the page's, not API routes.
        .filter((r) => !r.path.startsWith('/docs/'))
        .map((r) => `${r.method} ${r.path}`),
    ];
    // A path documented under another method is that route's 405 answer (with Allow), not another route.
    const paths = new Set([...listed].map((r) => r.split(' ')[1]));
    const routes = served.filter((r) => !paths.has(r.split(' ')[1]) || listed.has(r));
    expect(routes.length).toBeGreaterThan(20);
    expect(routes.filter((r) => !listed.has(r))).toEqual([]);
    const chat = doc.paths['/{role}/v1/chat/completions']!.post!;
    expect(Object.keys(chat.responses)).toEqual(['200', '400', '401', '404', '413', '502', '503', '504']);
    // The admin routes come from the command table: one operation per command, idempotent ones take the key.
    const admin = Object.entries(doc.paths).filter(([p]) => p.startsWith('/admin/'));
    expect(admin.length).toBeGreaterThan(15);
    const drain = doc.paths['/admin/roles/{role}/drain']!.post! as unknown as Record<string, unknown>;
    expect(drain.operationId).toBe('drain');
    expect(JSON.stringify(drain.parameters)).toContain('Idempotency-Key');
    const root = doc.paths['/v1/completions']!.post!;
    expect(JSON.stringify(root.responses['400'])).toContain('ambiguous_model');
  });

  it("declares each admin operation's security from its command's permission", async () => {
    const doc = (await document()) as unknown as {
      paths: Record<
        string,
        Record<string, { security: unknown; 'x-uis-permission': string; responses: object }>
      >;
    };
    const security = {
      admin: [{ adminToken: [] }],
      serving: [{}, { servingToken: [] }, { adminToken: [] }],
      public: [],
    };
    const routes = commandRoutes();
    expect(new Set(routes.map((r) => r.permission))).toEqual(new Set(['admin', 'serving']));
    for (const r of routes) {
      const op = doc.paths[r.path]?.[r.method.toLowerCase()];
      expect([r.name, op?.security, op?.['x-uis-permission']]).toEqual([
        r.name,
        security[r.permission],
        r.permission,
      ]);
      // Only an admin command can be refused to a valid (serving) token.
      expect([r.name, '403' in (op?.responses ?? {})]).toEqual([r.name, r.permission === 'admin']);
    }
  });

  it('renders /docs with Swagger UI served from the gateway itself', async () => {
    const page = await fetch(`${gw.url}/docs`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('/docs/swagger-ui-bundle.js');
    expect(html).not.toMatch(/https?:\/\//);
    const bundle = await fetch(`${gw.url}/docs/swagger-ui-bundle.js`);
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toContain('javascript');
    expect((await bundle.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
    const init = await (await fetch(`${gw.url}/docs/init.js`)).text();
    expect(init).toContain("url: '/openapi.json'");
  });
});
