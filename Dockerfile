# syntax=docker/dockerfile:1
# One image for every Operon process in cluster mode: `operon api-server`, `operon operator`,
# and the `operon stage-in` / `operon stage-out` helpers of step pods. Production
# dependencies only; runs as a non-root user and works with a read-only root filesystem
# (it writes only to /tmp, mounted as an emptyDir by the chart).
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# 1. Compile TypeScript to dist/ (dev dependencies live only in this stage).
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY core core
COPY plots plots
COPY adapters adapters
COPY engine engine
COPY media media
COPY services services
COPY wiring wiring
COPY assistant assistant
COPY operator operator
COPY api-server api-server
COPY cli cli
RUN npx tsc -p tsconfig.build.json

# 2. Production dependencies only.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

# 3. The runtime image.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true \
    OPERON_MODE=cluster
WORKDIR /app
# samtools, bcftools and tabix index and convert files for viewer links and coverage charts;
# DejaVu is the one font charts are measured and drawn with, in SVG and PNG (api-server only).
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends samtools bcftools tabix fonts-dejavu-core \
 && rm -rf /var/lib/apt/lists/*
COPY --from=deps /app/node_modules node_modules
COPY --from=build /src/dist dist
COPY package.json ./
COPY pipelines pipelines
COPY web web
COPY data data
COPY crds crds
RUN chmod 0755 dist/cli/main.js && ln -s /app/dist/cli/main.js /usr/local/bin/operon \
 && groupadd --system --gid 10001 operon && useradd --system --uid 10001 --gid operon --no-create-home operon
USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT ["operon"]
CMD ["--help"]
