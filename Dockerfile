# syntax=docker/dockerfile:1
# sexton's images: each a static binary alone in FROM scratch. The images that ship
# (ghcr.io/sexton-dev/<name>:<version>, linux/amd64 and linux/arm64) are built without a
# Docker engine by scripts/images.sh, which checks that they have the entrypoint, user,
# ports, labels and files of the stages below (scripts/check-images.py): this file is for
# users who build their own with Docker.
#   docker build -t sexton:0.1.0 .                                        (~5 MB: with birth
#                                      deps through the API)
#   docker build --target sexton-slim -t sexton:0.1.0-slim .               (~1 MB: tombstones
#                                      only, no API client)
#   docker build --target sexton-quick-exit -t sexton-quick-exit:0.1.0 .   (the SidecarTerminator's
#                                      default replacement image: exits 0 whatever its arguments)
#   docker build --target kubectl-sexton -t kubectl-sexton:0.1.0 .         (the controllers and
#                                      the webhook: args ["controller", ...] or ["webhook", ...])
# Add --build-arg REVISION=$(git rev-parse HEAD) for the revision label.
# On Alpine the host target is musl, whose Rust target links statically by default, so the
# same file builds a static binary on amd64 and arm64 builders. Build the quick-exit image
# for every architecture your nodes have (docker buildx --platform linux/amd64,linux/arm64):
# a replacement that cannot execute fails the pod.
# The version label: the workspace's version (Cargo.toml; scripts/check-images.py checks it).
ARG VERSION=0.1.0
ARG REVISION=unknown

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

# (profile release-nolto, as scripts/images.sh builds it: Cargo.toml says why)
FROM build AS build-controller
RUN cargo build --profile release-nolto --locked -p kubectl-sexton \
 && cp target/release-nolto/kubectl-sexton /kubectl-sexton \
 && /kubectl-sexton --version \
 && ! ldd /kubectl-sexton 2>/dev/null

# The labels every image has (https://specs.opencontainers.org/image-spec/annotations/).
FROM scratch AS labelled
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.source="https://github.com/sexton-dev/sexton" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="sexton"

FROM labelled AS sexton-slim
COPY --from=build /sexton-slim /sexton
LABEL org.opencontainers.image.title="sexton" \
      org.opencontainers.image.description="sexton, the in-pod supervisor (slim: tombstones only, no Kubernetes API client)"
ENTRYPOINT ["/sexton"]

# Numeric non-root user: a swapped sidecar whose securityContext says runAsNonRoot (without
# runAsUser) must still be allowed to start the replacement.
FROM labelled AS sexton-quick-exit
COPY --from=build /sexton-slim /sexton
LABEL org.opencontainers.image.title="sexton-quick-exit" \
      org.opencontainers.image.description="sexton quick-exit: the SidecarTerminator's replacement image, exits 0 whatever its arguments"
USER 65532:65532
ENTRYPOINT ["/sexton", "quick-exit"]

# The controllers (args ["controller", ...]) and the admission webhook (args ["webhook", ...]):
# metrics on 8080, health on 8081, the webhook on 8443 (their defaults).
FROM labelled AS kubectl-sexton
COPY --from=build-controller /kubectl-sexton /kubectl-sexton
LABEL org.opencontainers.image.title="kubectl-sexton" \
      org.opencontainers.image.description="kubectl-sexton: sexton's controllers and admission webhook"
USER 65532:65532
EXPOSE 8080 8081 8443
ENTRYPOINT ["/kubectl-sexton"]

# the default target comes last
FROM labelled AS sexton
COPY --from=build /sexton /sexton
LABEL org.opencontainers.image.title="sexton" \
      org.opencontainers.image.description="sexton, the in-pod supervisor of sidecar lifecycles"
ENTRYPOINT ["/sexton"]
