// A gRPC client under retrylab's exec route: @grpc/grpc-js with a
// service-config retry policy.
//
// Run by `retrylab run examples/scenarios/grpc-pushback.yaml --subject
// "exec:node examples/grpc/node/client.mjs"` once `npm ci --prefix
// examples/grpc/node` has installed @grpc/grpc-js. Each simulated client is
// one process: it dials the stub's HOST:PORT from $RETRYLAB_BASE_URL, calls
// retrylab.v1.Stub/Call (examples/grpc/retrylab.proto; the message is an
// empty google.protobuf.Empty, so no generated code is needed) once per
// logical request with its identity in the metadata x-retrylab-path
// (/c/{client}/r/{n}), and prints `ok PATH` or `fail PATH REASON`.
//
// The good policy is gRPC's A6 retryPolicy in the service config: grpc-js
// retries UNAVAILABLE and RESOURCE_EXHAUSTED with full-jitter backoff and
// honours the server's grpc-retry-pushback-ms. --mistake no-retry-policy
// leaves the service config out, the common belief that gRPC retries by
// itself: it retries nothing that reached the server.
import * as grpc from "@grpc/grpc-js";

const METHOD = "/retrylab.v1.Stub/Call";

const SERVICE_CONFIG = {
  methodConfig: [{
    name: [{ service: "retrylab.v1.Stub" }],
    retryPolicy: {
      maxAttempts: 5,
      initialBackoff: "0.25s",
      maxBackoff: "4s",
      backoffMultiplier: 2,
      retryableStatusCodes: ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
    },
  }],
};

const MISTAKES = new Set(["no-retry-policy"]);

function parseArgs(argv) {
  let mistake = "";
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--mistake" && i + 1 < argv.length) {
      mistake = argv[++i];
    } else if (argv[i].startsWith("--mistake=")) {
      mistake = argv[i].slice("--mistake=".length);
    } else {
      throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  if (mistake !== "" && !MISTAKES.has(mistake)) {
    throw new Error(`--mistake ${mistake}: want one of ${[...MISTAKES].join(", ")}`);
  }
  return { mistake };
}

// channelOptions is the channel's service config with its retry policy,
// or (the mistake) none.
function channelOptions(mistake) {
  const opts = { "grpc.enable_retries": 1 };
  if (mistake !== "no-retry-policy") {
    opts["grpc.service_config"] = JSON.stringify(SERVICE_CONFIG);
  }
  return opts;
}

const identity = (b) => b;

function call(client, path) {
  return new Promise((resolve) => {
    const md = new grpc.Metadata();
    md.set("x-retrylab-path", path);
    const deadline = new Date(Date.now() + 15000);
    client.makeUnaryRequest(METHOD, identity, identity, Buffer.alloc(0), md, { deadline }, (err) => {
      resolve(err ? `fail ${path} ${grpc.status[err.code] ?? err.code}` : `ok ${path}`);
    });
  });
}

async function main() {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`client.mjs: ${e.message}`);
    process.exit(2);
  }
  const base = new URL(process.env.RETRYLAB_BASE_URL); // http://HOST:PORT/c/{client}/
  const prefix = base.pathname.replace(/\/+$/, "");
  const n = Number(process.env.RETRYLAB_REQUESTS ?? "1");
  const client = new grpc.Client(base.host, grpc.credentials.createInsecure(), channelOptions(args.mistake));
  console.log("ready");
  for (let i = 0; i < n; i++) {
    console.log(await call(client, `${prefix}/r/${i}`));
  }
  client.close();
}

main();
