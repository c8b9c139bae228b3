# syntax=docker/dockerfile:1
# The prober image. Stage one builds the package as a wheel and installs it, with the pinned
# requirement set, into a virtual environment; stage two copies that environment onto a clean
# base, runs as a non-root numeric user and needs no shell: the entrypoint is exec form.
#
# No Docker engine on our machines: `make test` (tests/deploy/test_dockerfile.py) runs these
# build-stage steps into a fresh venv, runs the result, and lints this file with hadolint.
# Pin the base by digest where a registry is reachable:
#   docker buildx imagetools inspect python:3.11.13-slim-bookworm  ->  PYTHON_IMAGE=...@sha256:...
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm
ARG VENV=/opt/prober

FROM ${PYTHON_IMAGE} AS build
ARG VENV
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first: their layer survives changes to the prober's own code.
COPY deploy/image/requirements.txt ./
RUN python -m venv "$VENV" \
    && "$VENV/bin/pip" install --no-cache-dir --no-deps -r requirements.txt
COPY pyproject.toml README.md ./
COPY prober/ ./prober/
# --no-deps everywhere and `pip check` last: the image holds exactly the pinned set, and the
# build fails if that set no longer satisfies pyproject.toml.
RUN "$VENV/bin/pip" wheel --no-cache-dir --no-deps --wheel-dir dist . \
    && "$VENV/bin/pip" install --no-cache-dir --no-deps dist/prober-*.whl \
    && "$VENV/bin/pip" check

FROM ${PYTHON_IMAGE}
ARG VENV
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="prober" \
      org.opencontainers.image.description="Measures how the load balancers in front of kube-apiserver react when an apiserver shuts down" \
      org.opencontainers.image.source="https://github.com/example/prober" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# The root filesystem is read-only in the pods: no bytecode written at run time.
ENV PATH="${VENV}/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build ${VENV} ${VENV}
# Numeric, so the kubelet can enforce runAsNonRoot; OpenShift's restricted SCC replaces it
# with a UID of the namespace's range, which works too: the image writes nowhere.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["prober"]
CMD ["--help"]
