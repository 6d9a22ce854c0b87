# Inside the Transformer: a CPU-only image that serves the shipped checkpoint on port 8000.
#
#   docker build -t inside-transformer .
#   docker run --rm -p 8000:8000 inside-transformer          # then open http://localhost:8000
#
# Settings are ITT_* environment variables (see app/settings.py), e.g. -e ITT_WORKERS=2 (default:
# one worker per CPU core the container may use, at most 4).
#
# A pretrained Hugging Face Marian model (e.g. Helsinki-NLP/opus-mt-en-zh) instead: build with the
# optional packages, then mount the model folder and point ITT_MODEL at it (docs/marian.md):
#   docker build --build-arg WITH_HF=1 -t inside-transformer:hf .
#   docker run --rm -p 8000:8000 -v "$PWD/opus-mt-en-zh:/models/opus-mt-en-zh:ro" \
#       -e ITT_MODEL=/models/opus-mt-en-zh inside-transformer:hf
FROM python:3.11-slim
# 1: also install transformers + sentencepiece (the "hf" extra), at the dev lock's versions
ARG WITH_HF=0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/inside-transformer
# every package exactly as locked (hashes checked), the same install line as the README's: the lock
# names PyTorch's CPU wheel index itself, for torch's CPU-only build (no CUDA libraries). Its own
# layer, so that code changes do not download torch again.
COPY requirements.lock requirements-dev.lock ./
RUN pip install --retries 1 --require-hashes -r requirements.lock \
    && if [ "$WITH_HF" = "1" ]; then \
         pip install -c requirements-dev.lock transformers sentencepiece; \
       fi
COPY pyproject.toml README.md ./
COPY model/ model/
COPY app/ app/
COPY templates/ templates/
COPY static/ static/
# Editable: the app reads templates/ and static/ next to its package, as in a checkout.
RUN pip install --no-deps -e . \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin app

USER app
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
CMD ["python", "-m", "app", "--host", "0.0.0.0", "--port", "8000"]
