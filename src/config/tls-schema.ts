import { z } from 'zod';

/**
 * The `tls` blocks (DESIGN.md "TLS and HTTP/2 at the edge"): a listener's
 * certificates and client-certificate rules, and a route's trust for its https://
 * origins. File paths only; the files are read at start and on every reload.
 */

const file = z.string().min(1, 'must be a file path');

export const listenerTlsSchema = z
  .strictObject({
    /** One or more; picked by SNI (the certificate's names), the first is the default. */
    certificates: z
      .array(z.strictObject({ cert: file, key: file }))
      .min(1, 'needs at least one { cert, key }')
      .max(64),
    min_version: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2'),
    /** PEM of the CAs that sign client certificates (mTLS); null: none are asked for. */
    client_ca: file.nullable().default(null),
    client_auth: z.enum(['none', 'optional', 'required']).default('none'),
    /** Session-ticket keys shared by a fleet (48 bytes each); null: one set per process, rotated daily. */
    ticket_keys_file: file.nullable().default(null),
  })
  .superRefine((t, ctx) => {
    if (t.client_auth !== 'none' && t.client_ca === null)
      ctx.addIssue({
        code: 'custom',
        path: ['client_ca'],
        message: `client_auth: ${t.client_auth} needs client_ca, the PEM file of the CAs that sign client certificates`,
      });
  });

/** How an https:// origin is verified: the system CAs, or `ca`; `servername` for SNI and the name checked. */
export const originTlsSchema = z.strictObject({
  ca: file.nullable().default(null),
  servername: z.string().min(1).max(253).nullable().default(null),
  /** Tests only: the origin's certificate is not checked (a warning at start). */
  insecure_skip_verify: z.boolean().default(false),
});

export type ListenerTls = z.infer<typeof listenerTlsSchema>;
export type OriginTls = z.infer<typeof originTlsSchema>;
