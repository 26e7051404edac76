# syntax=docker/dockerfile:1
# sexton image: the static binary alone, at /sexton.
#   docker build -t sexton .                        (~5 MB: with birth deps through the API)
#   docker build --target sexton-slim -t sexton:slim .   (~1 MB: tombstones only, no API client)
# On Alpine the host target is musl, whose Rust target links statically by default, so the
# same file builds a static binary on amd64 and arm64 builders.
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev gcc
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked \
 && cp target/release/sexton /sexton \
 && cargo build --release --locked --no-default-features \
 && cp target/release/sexton /sexton-slim \
 && /sexton --version && /sexton-slim --version \
 && ! ldd /sexton 2>/dev/null

FROM scratch AS sexton-slim
COPY --from=build /sexton-slim /sexton
ENTRYPOINT ["/sexton"]

# the default target comes last
FROM scratch AS sexton
COPY --from=build /sexton /sexton
ENTRYPOINT ["/sexton"]
