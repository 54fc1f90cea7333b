# mmgate container image. Not built on the development machine (no Docker engine there);
# kept simple enough to check by reading.

# --- build ---
# The shipped binary is the profile-guided build of tools/pgo.sh: an instrumented build runs
# examples/pgo_train (loopback only, in the build container) in front of examples/fake_vllm,
# then the release build is optimised with those counts (about a fifth fewer instructions
# per proxied request; BENCHMARKS.md). It needs rustup's llvm-tools component, which the
# script adds, and `kill` (procps, part of this image).
FROM rust:1.95-bookworm AS build
WORKDIR /src
# The dependencies are downloaded in a layer of their own (against stub targets), kept until
# Cargo.toml or Cargo.lock change. They are compiled below with the sources: the two PGO
# builds compile everything with their own flags, so a stub build would not be reused.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src benches \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && echo 'fn main() {}' > benches/inspect.rs \
    && cargo fetch --locked \
    && rm -r src benches
COPY src src
COPY benches benches
COPY examples examples
COPY tools/pgo.sh tools/pgo.sh
RUN bash tools/pgo.sh

# --- runtime ---
# distroless cc: glibc and CA certificates (for https:// upstreams), no shell, no package
# manager. 65532 is its "nonroot" user.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/pgo/mmgate /usr/local/bin/mmgate
COPY policies/ /etc/mmgate/
USER 65532:65532
# Data plane and admin (metrics, health). The shipped policies bind the admin listener to
# 127.0.0.1; set listen.admin = "0.0.0.0:9464" in a mounted policy to scrape from outside.
EXPOSE 8080 9464
# No curl in the image: the binary asks its own admin listener (127.0.0.1:9464 unless the
# policy moves it; then use `mmgate health --policy FILE`).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["mmgate", "health", "--admin", "127.0.0.1:9464"]
ENTRYPOINT ["mmgate"]
CMD ["serve", "--policy", "/etc/mmgate/shadow.toml"]
