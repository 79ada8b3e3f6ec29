# One image for all three pyextender processes (sidecar, controllers, webhook) and the
# chart's uninstall hook: `pyextender serve|controllers|webhook|release`.
#
#   docker build -t ghcr.io/pyextender/pyextender:0.1.0 .
#
# Not built in this repository's CI machines (no container engine there); kept plain.
# Stage 1 builds wheels and compiles the numba kernels' cache; stage 2 is the
# runtime, non-root, with a read-only-friendly layout (caches baked in).

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY pyextender ./pyextender
COPY controllers ./controllers
COPY webhook ./webhook
COPY devcluster ./devcluster
RUN python -m venv /opt/pyextender \
 && /opt/pyextender/bin/pip install . \
 && /opt/pyextender/bin/python -m compileall -q /opt/pyextender/lib
# numba caches compiled kernels next to a cache dir we choose; warm it now so a
# replica is ready in seconds instead of compiling on every start. At run time the
# folder is read-only (non-root user, read-only root filesystem): the sidecar copies
# it to the temporary directory and caches there (pyextender/kernels/jit.py).
ENV NUMBA_CACHE_DIR=/opt/pyextender/numba-cache
RUN /opt/pyextender/bin/python -c "from pyextender.plugins.defaults import load, plugins_of; \
from pyextender.framework.runtime import build_profile; \
from pyextender.server.warmup import warm_up; \
warm_up(build_profile(plugins_of(load(None)), lambda *a: None))"

FROM python:3.11-slim-bookworm
RUN groupadd --system --gid 65532 pyextender \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin pyextender
COPY --from=build /opt/pyextender /opt/pyextender
ENV PATH=/opt/pyextender/bin:$PATH \
    NUMBA_CACHE_DIR=/opt/pyextender/numba-cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["pyextender"]
CMD ["--help"]
