# syntax=docker/dockerfile:1
FROM node:26-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY console ./console
COPY scripts ./scripts
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM node:26-slim
ENV NODE_ENV=production DATA_DIR=/data HOST=0.0.0.0 OPS_HOST=0.0.0.0
WORKDIR /app
RUN groupadd --system wakegate && useradd --system --gid wakegate --home /app wakegate \
  && mkdir -p /data && chown wakegate:wakegate /data
COPY --from=build --chown=wakegate:wakegate /app/node_modules ./node_modules
COPY --from=build --chown=wakegate:wakegate /app/dist ./dist
COPY --chown=wakegate:wakegate package.json ./
COPY --chown=wakegate:wakegate config ./config
USER wakegate
VOLUME ["/data"]
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.OPS_PORT||8081)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "dist/main.js", "serve"]
