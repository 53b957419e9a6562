# kubedash: a small, non-root image of the same `manage.py serve` the embedded setup runs.
#   docker build -t kubedash .
# Dependencies come from requirements.lock (pinned, hashed; compiled from pyproject.toml,
# docs/OPERATIONS.md says how to refresh it). The source runs from /app (templates and static
# files are found beside the package), not installed into site-packages.
# tests/test_deploy.py runs this file's commands on the test machine: the lock into a fresh venv,
# collectstatic, and the CMD and HEALTHCHECK as a non-root user.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a venv with the locked dependencies, and the collected static files ---------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
COPY requirements.lock /tmp/requirements.lock
RUN /opt/venv/bin/pip install --no-deps --require-hashes -r /tmp/requirements.lock
WORKDIR /app
COPY manage.py pyproject.toml ./
COPY dashboard ./dashboard
COPY templates ./templates
COPY static ./static
# Hashed, compressed copies for WhiteNoise, inside the image (not in the data volume, so a new
# image brings its own). The throwaway data dir and key only let settings load.
RUN KUBEDASH_DATA_DIR=/tmp/build-data DJANGO_SECRET_KEY=collectstatic-only \
    KUBEDASH_STATIC_ROOT=/app/staticfiles \
    /opt/venv/bin/python manage.py collectstatic --noinput -v0 \
 && /opt/venv/bin/python -m compileall -q dashboard \
 && rm -rf /tmp/build-data

# --- runtime: the venv and the app, no compilers, no pip cache, a numeric non-root user --------
FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 kubedash \
 && useradd --system --uid 10001 --gid kubedash --home-dir /data --shell /usr/sbin/nologin kubedash \
 && mkdir -p /data /tmp/prometheus && chown kubedash:kubedash /data /tmp/prometheus
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    KUBEDASH_DATA_DIR=/data \
    KUBEDASH_STATIC_ROOT=/app/staticfiles \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus \
    KUBEDASH_WORKERS=2
WORKDIR /app
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/livez', timeout=4).status != 200)"]
# Which build this is: /version's gitCommit and buildDate and kubedash_build_info (its release is
# pyproject.toml's version). Last, so a new commit rebuilds no other layer:
#   docker build --build-arg KUBEDASH_GIT_COMMIT="$(git rev-parse HEAD)" \
#       --build-arg KUBEDASH_BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -t kubedash:0.9.0 .
ARG KUBEDASH_GIT_COMMIT=""
ARG KUBEDASH_BUILD_DATE=""
ENV KUBEDASH_GIT_COMMIT=${KUBEDASH_GIT_COMMIT} KUBEDASH_BUILD_DATE=${KUBEDASH_BUILD_DATE}
# Plain HTTP behind the proxy, which terminates TLS (deploy/nginx, the Ingress) and sends
# X-Forwarded-*. Workers: KUBEDASH_WORKERS (one per core the container may use).
CMD ["sh", "-c", "exec python manage.py serve --host 0.0.0.0 --port 8000 --no-tls --proxy-headers --workers \"${KUBEDASH_WORKERS}\""]
