# The worker image: a static binary on distroless, running as a non-root user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/kafkamirror-worker ./worker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kafkamirror-worker /usr/local/bin/kafkamirror-worker
USER nonroot:nonroot
EXPOSE 8080
ENV KAFKAMIRROR_API_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/kafkamirror-worker"]
CMD ["run"]
