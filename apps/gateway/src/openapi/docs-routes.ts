import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Hono } from 'hono';
import { buildOpenApiDocument, type OpenApiOptions } from './openapi-document.ts';

/** Swagger UI's files, from the `swagger-ui-dist` package on disk: the page works without internet. */
const SWAGGER_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>uis API reference</title>
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
  <link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
  <div id="docs"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>`;

const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#docs',
  deepLinking: true,
  docExpansion: 'list',
  defaultModelsExpandDepth: 0,
  tryItOutEnabled: false,
});`;

/** `GET /openapi.json` (built once, on first use) and `GET /docs` (Swagger UI, served from our own files). */
export function mountDocs(app: Hono, options: () => OpenApiOptions): void {
  let doc: Record<string, unknown> | undefined;
  app.get('/openapi.json', (c) => {
    doc ??= buildOpenApiDocument(options());
    return c.json(doc);
  });
  const html = { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' };
  app.get('/docs', (c) => c.body(PAGE, 200, html));
  app.get('/docs/init.js', (c) => c.body(INIT, 200, { 'content-type': 'text/javascript; charset=utf-8' }));
  for (const [file, type] of Object.entries(ASSETS)) {
    app.get(`/docs/${file}`, (c) =>
      c.body(readFileSync(join(SWAGGER_DIR, file)), 200, {
        'content-type': type,
        'cache-control': 'public, max-age=86400',
      }),
    );
  }
}
