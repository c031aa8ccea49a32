# Switchyard in a small runtime image, running as a non-root user.
#   docker build -t switchyard .
#   docker run -p 8080:8080 switchyard            # the offline demo
FROM rust:1.94-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p switchyard

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/switchyard --create-home switchyard
COPY --from=build /src/target/release/switchyard /usr/local/bin/switchyard
USER switchyard
WORKDIR /var/lib/switchyard
EXPOSE 8080
ENTRYPOINT ["switchyard"]
CMD ["serve", "--listen", "0.0.0.0:8080"]
