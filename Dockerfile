# A static retrylab image: `docker build -t retrylab .` (or podman/buildah).
# The binary is built without cgo, so the final image holds nothing but it
# and the CA roots (for a --target or --upstream over HTTPS).
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags="-s -w" -o /out/retrylab ./cmd/retrylab

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/retrylab /retrylab
USER 65532:65532
ENTRYPOINT ["/retrylab"]
