FROM python:3.11-slim
# Hosted mode: Streamable HTTP on 0.0.0.0:8790. The image holds no credential: every member's
# token arrives on their own request (Authorization: Bearer), so no FAIRWINS_API_TOKEN is set.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md toolDefs.snapshot.json ./
COPY mcp_server ./mcp_server
# No runtime dependencies, so nothing is fetched: the base image's setuptools builds it offline.
RUN pip install --no-cache-dir --no-index --no-deps --no-build-isolation . \
    && rm -rf /src \
    && useradd --system --uid 10001 --no-create-home fairwins
WORKDIR /
USER fairwins
EXPOSE 8790
HEALTHCHECK --interval=30s --timeout=3s --retries=3 CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8790/healthz', timeout=2).status != 200)"]
CMD ["fairwins-mcp", "--http", "8790", "--host", "0.0.0.0", "--workers", "auto"]
