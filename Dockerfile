# syntax=docker/dockerfile:1
# sexton image: the static binary alone, at /sexton.
#   docker build -t sexton .
# On Alpine the host target is musl, whose Rust target links statically by default, so the
# same file builds a static binary on amd64 and arm64 builders.
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN cargo build --release --locked \
 && cp target/release/sexton /sexton \
 && /sexton --version \
 && ! ldd /sexton 2>/dev/null

FROM scratch AS sexton
COPY --from=build /sexton /sexton
ENTRYPOINT ["/sexton"]
