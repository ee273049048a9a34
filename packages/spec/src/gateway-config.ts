import { z } from 'zod';

/** The `gateway` block of the config file: where `uis serve` listens and who may call it. Tokens may also come
 * from the environment (`UIS_ADMIN_TOKEN`, `UIS_SERVING_TOKEN`) so a config file in git holds no secret. */
export const GatewayConfigSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65535).default(8080),
    /** Bearer token of the admin API and the console's actions. */
    admin_token: z.string().min(8).optional(),
    /** When set, discovery and serving also need `Authorization: Bearer <token>` (the RFC's open question 3:
     * external discovery is authenticated with a bearer token; the admin token is accepted too). */
    serving_token: z.string().min(8).optional(),
    /** Request body limit of the serving routes, in bytes. */
    max_body_bytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024 * 1024),
    /** SQLite file for events, operations, leases and deferred batches (`:memory:` keeps nothing). */
    db_path: z.string().min(1).default(':memory:'),
    /** Engine launcher of `uis serve`. */
    launcher: z.enum(['sim', 'local', 'external']).default('sim'),
    /** `external`: engine id -> URL of an engine started elsewhere. */
    external_urls: z.record(z.string(), z.string()).default({}),
  })
  .strict();
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;
