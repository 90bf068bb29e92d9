# syntax=docker/dockerfile:1.7
#
# Borda: one static binary in a distroless image.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t borda:dev .
#   docker run --rm borda:dev version
#
# The final image has no shell and no curl: the HEALTHCHECK runs
# `borda healthcheck`, which GETs http://127.0.0.1:8080/healthz with a 2 s
# timeout. Kubernetes ignores HEALTHCHECK; use the probes in deploy/kubernetes/.

ARG GO_VERSION=1.26.11

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first, so editing code does not re-download modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/borda ./cmd/borda \
 && /out/borda version

# distroless/static: CA certificates, tzdata, /etc/passwd with the nonroot
# user (65532), nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="borda" \
      org.opencontainers.image.description="Borda edge gateway: reverse proxy, rate limits, webhook ingress" \
      org.opencontainers.image.source="https://github.com/olp-edu/borda" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/borda /borda
COPY configs/*.yaml /etc/borda/
ENV BORDA_CONFIG=/etc/borda/production.yaml
USER 65532:65532
# 8080 public listener; 9091 admin listener (/metrics, /healthz, /readyz,
# /debug/pprof/) — set admin_listen: "0.0.0.0:9091" to reach it from
# outside the container, and never publish it to the internet.
EXPOSE 8080 9091
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/borda", "healthcheck", "--port", "8080", "--path", "/healthz"]
ENTRYPOINT ["/borda"]
CMD ["serve"]
