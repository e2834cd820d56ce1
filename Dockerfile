# A static gateway binary on a distroless base, run as a non-root user.
# The build command is the Makefile's (`make build`); cmd/gateway's
# dockerfile_test.go keeps the two in step.
#
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t modelgate/gateway .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gateway ./cmd/gateway \
 && mkdir -p /out/data

# distroless/static: CA certificates (for https providers), tzdata and the nonroot user; no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
# The store directory, owned by the nonroot user (65532); set store.path: /var/lib/gateway.
COPY --from=build --chown=65532:65532 /out/data /var/lib/gateway
USER 65532:65532
VOLUME /var/lib/gateway
# 9091 is the admin listener (/status, /metrics: key ids and their usage). 0.0.0.0 is the
# container's own interface; publish 9091 on a private address of the host only:
#   docker run -p 8080:8080 -p 127.0.0.1:9091:9091 ...  (docs/operations.md, Docker)
EXPOSE 8080 9091
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["-config", "/etc/gateway/gateway.yaml", "-listen", "0.0.0.0:8080", "-admin-listen", "0.0.0.0:9091", "-log-format", "json", "-access-log", "json"]
