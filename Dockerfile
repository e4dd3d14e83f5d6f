# The container image the Kubernetes profile names (profiles/kubernetes/config.yaml, container-image):
# this repository's environment, installed by `make venv` exactly as on a workstation
# (requirements.txt with constraints.txt, then the package itself, then the embedded model's check).
#   make image IMAGE=<registry>/aura-eval:<tag> && docker push <registry>/aura-eval:<tag>
# Python 3.11.7, a fixed patch release: the one every pin in constraints.txt was resolved on. Debian's
# compilers and cmake build llama-cpp-python from source (the Makefile's CMAKE_ARGS keep it portable).
FROM python:3.11.7-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake git make \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/aura-eval
# .dockerignore keeps out results, caches, logs and local environments (and any .env file).
COPY . .
RUN make venv VENV=/opt/venv PYTHON=python3 && rm -rf /root/.cache/pip

ENV PATH=/opt/venv/bin:$PATH \
    LITELLM_LOCAL_MODEL_COST_MAP=True
