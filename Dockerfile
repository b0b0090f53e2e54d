# One image, two commands: `streamcube operator` and `streamcube receiver`.
# BASE_IMAGE is any Node.js 24 image with npm and a `node` user (uid 1000); the test environment,
# which reaches no container registry, builds one from Debian packages (test/env/node/images.ts).
ARG BASE_IMAGE=node:24-bookworm-slim
FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=optional --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --omit=optional

FROM ${BASE_IMAGE}
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["--help"]
