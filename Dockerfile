FROM python:3.11-slim AS build
# The wheel is built here and only the installed package leaves this stage: no source tree, build
# directory or wheel reaches a layer of the final image. No runtime dependencies, so nothing is
# fetched: the base image's setuptools and wheel build it offline (setuptools 79.0.1: 77 or later
# reads pyproject.toml's SPDX license and its license-files, LICENSE, which the wheel carries),
# into a venv of its own (the same path in the final stage) so the final stage copies one
# directory whatever the base interpreter's own install layout is.
WORKDIR /src
COPY pyproject.toml LICENSE setup.py MANIFEST.in README.md toolDefs.snapshot.json ./
COPY mcp_server ./mcp_server
RUN pip wheel --no-cache-dir --no-index --no-deps --no-build-isolation --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/fairwins-mcp \
    && pip --python /opt/fairwins-mcp/bin/python install --no-cache-dir --no-index --no-deps /wheels/*.whl

FROM python:3.11-slim
# The version is mcp_server.__version__ (python -m scripts.release check holds them equal); the
# release workflow adds the revision and the build's provenance.
LABEL org.opencontainers.image.title="fairwins-mcp" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="https://github.com/fairwins/fairwins-mcp"
# Hosted mode: Streamable HTTP on 0.0.0.0:$PORT (8790 unless the platform sets PORT, as Cloud Run
# does). The image holds no credential: every member's token arrives on their own request
# (Authorization: Bearer), so no FAIRWINS_API_TOKEN is set. Logs are JSON, one object per line
# with Cloud Logging's field names: a hosted platform's log collector reads them as structured
# entries, where text lines would each be one opaque string (`-e FAIRWINS_MCP_LOG_FORMAT=text`
# for a terminal).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PORT=8790 PATH=/opt/fairwins-mcp/bin:$PATH \
    FAIRWINS_MCP_LOG_FORMAT=json
COPY --from=build /opt/fairwins-mcp /opt/fairwins-mcp
RUN useradd --system --uid 10001 --no-create-home fairwins
USER fairwins
EXPOSE 8790
# http.client, not urllib: a proxy set in the environment must not carry the probe elsewhere.
HEALTHCHECK --interval=30s --timeout=3s --retries=3 CMD ["python", "-c", "import http.client, os, sys; c = http.client.HTTPConnection('127.0.0.1', int(os.environ['PORT']), timeout=2); c.request('GET', '/healthz'); sys.exit(c.getresponse().status != 200)"]
# exec: the server itself is PID 1 and receives SIGTERM (its workers drain, then it exits 0); it
# reaps its own children. --workers auto: one worker per CPU the container may use.
CMD ["sh", "-c", "exec fairwins-mcp --http \"$PORT\" --host 0.0.0.0 --workers auto"]
