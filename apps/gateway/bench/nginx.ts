/** nginx as the plain reverse-proxy baseline: a generated config, upstream keepalive, no buffering. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Proc, start } from './procs.ts';

/** The nginx binary, or why there is none. */
export function findNginx(): { bin: string } | { missing: string } {
  for (const bin of ['nginx', '/usr/sbin/nginx']) {
    const r = spawnSync(bin, ['-v'], { encoding: 'utf8' });
    if (r.status === 0) return { bin };
  }
  return { missing: 'nginx is not installed (apt-get install -y nginx)' };
}

export interface NginxConfig {
  port: number;
  engines: string[];
  role: string;
  workers: number;
  /** nice of the worker processes (nginx's `worker_priority`), when the bench raises the proxies' priority. */
  priority?: number;
}

export function nginxConfig(c: NginxConfig, prefix: string): string {
  const servers = c.engines.map((e) => `    server ${new URL(e).host};`).join('\n');
  return `worker_processes ${c.workers};
${
  c.priority === undefined
    ? ''
    : `worker_priority ${c.priority};
`
}daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 16384; multi_accept on; }
http {
  access_log off;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  upstream engines {
${servers}
    keepalive 1024;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${c.port} backlog=4096;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    client_max_body_size 64m;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_read_timeout 3600s;
    location = /${c.role}/generate { proxy_pass http://engines/generate; }
    location = /${c.role}/v1/chat/completions { proxy_pass http://engines/v1/chat/completions; }
  }
}
`;
}

export function startNginx(bin: string, c: NginxConfig): Proc {
  const prefix = mkdtempSync(join(tmpdir(), 'uis-bench-nginx-'));
  const conf = join(prefix, 'nginx.conf');
  writeFileSync(conf, nginxConfig(c, prefix));
  return start('nginx', bin, ['-p', prefix, '-c', conf]);
}
