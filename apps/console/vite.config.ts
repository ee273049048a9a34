import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// `pnpm dev` serves the console with hot reload and proxies the tRPC API (queries, mutations and the SSE
// subscription) to a running gateway (`uis demo` listens on UIS_PORT, 8080 by default).
const gateway = `http://127.0.0.1:${process.env.UIS_PORT ?? '8080'}`;

export default defineConfig({
  plugins: [react()],
  base: './',
  server: {
    host: '127.0.0.1',
    proxy: { '/trpc': { target: gateway, changeOrigin: true } },
  },
  preview: { host: '127.0.0.1', proxy: { '/trpc': { target: gateway, changeOrigin: true } } },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true, chunkSizeWarningLimit: 1500 },
});
