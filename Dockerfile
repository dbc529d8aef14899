# syntax=docker/dockerfile:1
# The control-plane image: the release binary on a distroless, non-root runtime.
#
#   docker build -t control-plane .
#   docker run --rm -p 8080:8080 -v "$PWD/examples/world:/world:ro" control-plane \
#     serve --manifests /world --data-dir /var/lib/control-plane --auth mock
#
# Without arguments it runs `serve --data-dir /var/lib/control-plane` (kube source, jwt mode: set
# CP_SECURITY_TRUSTED_ISSUERS). The Helm chart (charts/control-plane) passes its own arguments.
#
# The binary links only glibc, libm and libgcc_s (see `ldd target/release/control-plane`), which
# gcr.io/distroless/cc-debian12 provides, together with CA certificates for the JWKS issuers.

FROM rust:1.95-bookworm AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release -p control-plane --locked \
    && install -D -m 0755 target/release/control-plane /out/control-plane \
    && mkdir -p /out/data

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/control-plane /usr/local/bin/control-plane
# The data directory (readmodel.redb and search/), owned by the nonroot user (65532).
COPY --from=builder --chown=65532:65532 /out/data /var/lib/control-plane
USER 65532:65532
# No CP_* environment here: the environment overrides the config file the chart mounts.
VOLUME ["/var/lib/control-plane"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/control-plane"]
CMD ["serve", "--data-dir", "/var/lib/control-plane"]
