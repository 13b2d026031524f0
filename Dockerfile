# Runbook manager image: a static Go binary on a distroless, non-root base.
# Build: make docker-build IMG=<registry>/runbook-manager:<tag>
# (needs a Docker engine; `make build-static` builds the same binary without one).

# The base for the exec-probe scripts' interpreter: the default has no shell,
# so RebootPolicy exec probes need static executables, or an image built with
# --build-arg BASE_IMAGE=<a non-root image that has the interpreter>.
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot

FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace

# Modules first, so the download layer is cached while only sources change.
COPY go.mod go.sum ./
RUN go mod download

COPY cmd/ cmd/
COPY api/ api/
COPY internal/ internal/

# CGO disabled: a fully static binary that needs no libc in the base image.
# The flags are the Makefile's STATIC_BUILD_FLAGS (make build, make image):
# grpcnotrace drops grpc's unused golang.org/x/net/trace, -s -w the symbol
# table and DWARF.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -tags grpcnotrace -ldflags="-s -w" -o manager ./cmd

FROM ${BASE_IMAGE}
WORKDIR /
COPY --from=builder /workspace/manager /manager
# The distroless "nonroot" user; the Deployment also enforces runAsNonRoot.
USER 65532:65532
ENTRYPOINT ["/manager"]
