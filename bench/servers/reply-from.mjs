// fastify with @fastify/reply-from (undici underneath).
import replyFrom from '@fastify/reply-from';
import Fastify from 'fastify';

const app = Fastify({ logger: false, keepAliveTimeout: 60_000 });
await app.register(replyFrom, { base: process.env.TARGET, undici: { connections: 256, pipelining: 1 } });
app.all('/*', (req, reply) => reply.from(req.url));
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.send?.('ready');
