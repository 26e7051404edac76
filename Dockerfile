# syntax=docker/dockerfile:1
# sexton images: the static binary alone, at /sexton.
#   docker build -t sexton .                                   (~5 MB: with birth deps through the API)
#   docker build --target sexton-slim -t sexton:slim .         (~1 MB: tombstones only, no API client)
#   docker build --target quick-exit -t sexton-quick-exit:0.1.0 .        (the SidecarTerminator's
#                                      default replacement image: exits 0 whatever its arguments)
#   docker build --target controller -t sexton-controller:0.1.0 .        (`kubectl-sexton controller`)
# On Alpine the host target is musl, whose Rust target links statically by default, so the
# same file builds a static binary on amd64 and arm64 builders. Build the quick-exit image
# for every architecture your nodes have (docker buildx --platform linux/amd64,linux/arm64):
# a replacement that cannot execute fails the pod.
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev gcc
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY bench ./bench
# Each binary is built alone (-p): a workspace build would unify the crates' features and
# give the in-pod binary some of the controller's (see Cargo.toml).
RUN cargo build --release --locked -p sexton \
 && cp target/release/sexton /sexton \
 && cargo build --release --locked -p sexton --no-default-features \
 && cp target/release/sexton /sexton-slim \
 && /sexton --version && /sexton-slim --version \
 && /sexton-slim quick-exit --any args \
 && ! ldd /sexton 2>/dev/null

FROM build AS build-controller
RUN cargo build --release --locked -p kubectl-sexton \
 && cp target/release/kubectl-sexton /kubectl-sexton \
 && /kubectl-sexton --version \
 && ! ldd /kubectl-sexton 2>/dev/null

FROM scratch AS sexton-slim
COPY --from=build /sexton-slim /sexton
ENTRYPOINT ["/sexton"]

# Numeric non-root user: a swapped sidecar whose securityContext says runAsNonRoot (without
# runAsUser) must still be allowed to start the replacement.
FROM scratch AS quick-exit
COPY --from=build /sexton-slim /sexton
USER 65532:65532
ENTRYPOINT ["/sexton", "quick-exit"]

FROM scratch AS controller
COPY --from=build-controller /kubectl-sexton /kubectl-sexton
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/kubectl-sexton", "controller"]

# the default target comes last
FROM scratch AS sexton
COPY --from=build /sexton /sexton
ENTRYPOINT ["/sexton"]
