# The memstream image: `memstream worker` and `memstream serve` in docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# The project's metadata and packages only (.dockerignore keeps the rest out).
COPY pyproject.toml README.md ./
COPY memstream ./memstream
COPY models ./models
COPY projections ./projections
COPY streams ./streams
RUN pip install . && rm -rf /src

# Not root; the data directory is a volume, created here so it belongs to the user.
RUN useradd --create-home --uid 10001 memstream && mkdir /data && chown memstream /data
USER memstream
WORKDIR /home/memstream
ENV MEMSTREAM_DATA_DIR=/data

ENTRYPOINT ["memstream"]
CMD ["worker"]
