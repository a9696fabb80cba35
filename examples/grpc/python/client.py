#!/usr/bin/env python3
"""A gRPC client under retrylab's exec route: grpcio with a service-config retry policy.

Run by `retrylab run examples/scenarios/grpc-pushback.yaml --subject
"exec:/usr/bin/python3 examples/grpc/python/client.py"` (Debian's
python3-grpcio: `apt-get install python3-grpcio`). Each simulated client
is one process: it dials the stub's HOST:PORT from $RETRYLAB_BASE_URL,
calls retrylab.v1.Stub/Call (examples/grpc/retrylab.proto; the message is
an empty google.protobuf.Empty, so no generated code is needed) once per
logical request with its identity in the metadata x-retrylab-path
(/c/{client}/r/{n}, the path an HTTP client would have requested), and
prints `ok PATH` or `fail PATH REASON`.

The good policy is gRPC's A6 retryPolicy in the service config: grpcio
retries UNAVAILABLE and RESOURCE_EXHAUSTED with full-jitter backoff and
honours the server's grpc-retry-pushback-ms. --mistake no-retry-policy
leaves the service config out, the common belief that gRPC retries by
itself: it retries nothing that reached the server.
"""

import argparse
import json
import os
import sys
from urllib.parse import urlparse

import grpc

METHOD = "/retrylab.v1.Stub/Call"

SERVICE_CONFIG = {
    "methodConfig": [{
        "name": [{"service": "retrylab.v1.Stub"}],
        "retryPolicy": {
            "maxAttempts": 5,
            "initialBackoff": "0.25s",
            "maxBackoff": "4s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
        },
    }]
}

MISTAKES = {"no-retry-policy"}


def channel_options(mistake):
    """The channel's options: the service config with its retry policy,
    or (the mistake) none."""
    if mistake == "no-retry-policy":
        return [("grpc.enable_retries", 1)]
    return [("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(SERVICE_CONFIG))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mistake", choices=sorted(MISTAKES), help="run with this mistake")
    args = ap.parse_args(argv)
    base = urlparse(os.environ["RETRYLAB_BASE_URL"])  # http://HOST:PORT/c/{client}/
    prefix = base.path.rstrip("/")
    n = int(os.environ.get("RETRYLAB_REQUESTS", "1"))
    with grpc.insecure_channel(base.netloc, options=channel_options(args.mistake)) as ch:
        call = ch.unary_unary(METHOD)  # bytes in, bytes out: b"" is an empty message
        print("ready", flush=True)
        for i in range(n):
            path = f"{prefix}/r/{i}"
            try:
                call(b"", metadata=[("x-retrylab-path", path)], timeout=15)
                print(f"ok {path}", flush=True)
            except grpc.RpcError as e:
                print(f"fail {path} {e.code().name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
