# uis: the control plane (gateways, managers, coordinator, console) as one image whose entrypoint is the compiled
# `uis` CLI. Multi-stage: the build stage compiles the packages, the CLI and the console; the runtime stage has
# Node, Python with Ray (the Ray launcher's bridge) and the deployed gateway package, and runs as a non-root user.
# See docs/container.md for running it beside an existing Ray cluster.
# REGISTRY: a mirror prefix ending in "/" when the default registry is not reachable.
ARG REGISTRY=

FROM ${REGISTRY}node:20-bookworm AS build
ENV CI=true
WORKDIR /src
RUN npm install -g pnpm@10.34.9
COPY . .
# better-sqlite3 compiles here (python3, make and g++ are in the full Debian image).
RUN pnpm install --frozen-lockfile \
 && pnpm exec turbo run build --filter=@uis/gateway --filter=@uis/console \
 && pnpm --filter @uis/gateway deploy --prod --legacy /out/gateway \
 && cp -r apps/console/dist /out/console-dist

FROM ${REGISTRY}node:20-bookworm-slim AS runtime
ARG RAY_VERSION=2.60.0
# Python + Ray: the Ray launcher talks to the cluster through a Python bridge (gateway.ray.python).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv tini \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/ray \
 && /opt/ray/bin/pip install --no-cache-dir "ray==${RAY_VERSION}"
ENV PATH=/opt/ray/bin:$PATH \
    NODE_ENV=production
WORKDIR /app
# The gateway finds the console at ../console/dist from its package root (apps/ layout of the repo).
COPY --from=build /out/gateway /app/gateway
COPY --from=build /out/console-dist /app/console/dist
RUN useradd --system --uid 10001 --home-dir /var/lib/uis --create-home uis \
 && ln -s /app/gateway/bin/uis.mjs /usr/local/bin/uis
USER uis
WORKDIR /var/lib/uis
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/gateway/bin/uis.mjs"]
CMD ["serve", "--config", "/etc/uis/config.yaml", "--host", "0.0.0.0"]
