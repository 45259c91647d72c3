import type { z } from 'zod';

/** What the OpenAPI document says of one route; kept beside the route's own schemas. */
export interface RouteDoc {
  method: string;
  /** fastify form: /v2/wakes/:wake_id */
  url: string;
  summary: string;
  /** More than a line: rendered below the summary in docs/api.md (OpenAPI `description`). */
  description?: string;
  scope: string | null;
  query?: z.ZodType;
  body?: z.ZodType;
  success: number;
  object?: string;
  errors: number[];
  /** Not in the OpenAPI document (the route that serves the document itself). */
  unlisted?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    doc?: Omit<RouteDoc, 'method' | 'url' | 'scope'>;
  }
}
