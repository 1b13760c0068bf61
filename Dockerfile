# The mcp-gateway image: the static binary on an empty root, as a non-root
# user, with nothing written at runtime (runs with a read-only root
# filesystem). tools/image writes the same image without docker (CI);
# tools/image/image_test.go checks that this file and that tool agree on
# USER, ENTRYPOINT, CMD, ENV, EXPOSE and the labels.
#
#   docker build -t mcp-gateway .
#   docker run --rm -p 8080:8080 --read-only \
#     -v "$PWD/gateway.yaml:/etc/mcp-gateway/gateway.yaml:ro" mcp-gateway
#
# For upstreams started with npx, see Dockerfile.node.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/mcp-gateway ./cmd/mcp-gateway

FROM scratch
COPY --from=build /out/mcp-gateway /mcp-gateway
COPY tools/image/gateway.yaml /etc/mcp-gateway/gateway.yaml
LABEL org.opencontainers.image.source="https://github.com/mcp-gateway/mcp-gateway"
LABEL org.opencontainers.image.licenses="Apache-2.0"
LABEL org.opencontainers.image.title="mcp-gateway"
# The gateway listens on loopback by default, which a published port cannot
# reach; this overrides `listen` in any mounted gateway.yaml. The default
# auth is none: put auth in gateway.yaml before exposing the port.
ENV MCP_GATEWAY_LISTEN=0.0.0.0:8080
EXPOSE 8080
USER 65532:65532
ENTRYPOINT ["/mcp-gateway"]
CMD ["serve", "--config", "/etc/mcp-gateway/gateway.yaml"]
