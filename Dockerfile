# tidemark: one static binary (the CLI: run, gen, demo, ...).
#
#   docker build -t tidemark .
#   docker run --rm tidemark demo --duration 30s
#
# The build stage's Go only needs to be recent enough to fetch the toolchain
# go.mod asks for; GOTOOLCHAIN pins it (generic methods need Go 1.27).
FROM golang:1.25-bookworm AS build
ENV GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download && go version
COPY . .
RUN go build -trimpath -ldflags="-s -w" -o /out/tidemark ./cmd/tidemark && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tidemark /usr/local/bin/tidemark
# State lives here; mount a volume to keep it across restarts. The directory
# is the nonroot user's, so a fresh named volume inherits a writable owner.
COPY --from=build --chown=65532:65532 /out/state /var/lib/tidemark
WORKDIR /var/lib/tidemark
USER nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/tidemark"]
CMD ["--help"]
