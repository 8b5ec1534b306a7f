// The client of agentd's AgentService, over the Connect protocol on the origin that served
// the page, and the bearer token it sends (kept in sessionStorage, so it goes with the tab).

import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { AgentService } from "../../../gen/ts/agentd/v1/agent_service_pb.js";

const tokenKey = "agentd-console.token";

/** token returns the bearer token the user gave, or "". */
export function token(): string {
  return sessionStorage.getItem(tokenKey) ?? "";
}

/** setToken keeps t for the tab's later calls; "" forgets it. */
export function setToken(t: string): void {
  t = t.trim().replace(/^bearer\s+/i, "");
  if (t === "") sessionStorage.removeItem(tokenKey);
  else sessionStorage.setItem(tokenKey, t);
}

const bearer: Interceptor = (next) => (req) => {
  const t = token();
  if (t !== "") req.header.set("authorization", "Bearer " + t);
  return next(req);
};

/** client calls agentd. The RPCs are served at the root of the page's origin. */
export const client: Client<typeof AgentService> = createClient(
  AgentService,
  createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true, interceptors: [bearer] }),
);

/** RpcError is what the console shows of a failed call. */
export interface RpcError {
  /** code is the gRPC code name, such as NOT_FOUND. */
  code: string;
  message: string;
  /** reason is agentd's UPPER_SNAKE reason from google.rpc.ErrorInfo, or "". */
  reason: string;
  metadata: Record<string, string>;
}

/** describe turns anything a call threw into an RpcError. */
export function describe(err: unknown): RpcError {
  const e = ConnectError.from(err);
  const out: RpcError = {
    code: Code[e.code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase(),
    message: e.rawMessage,
    reason: "",
    metadata: {},
  };
  for (const d of e.details) {
    if ("type" in d && d.type === "google.rpc.ErrorInfo") {
      readErrorInfo(d.value, out);
    }
  }
  return out;
}

/** errorText is one line for people: "NOT_FOUND (RUN_NOT_FOUND): no such run". */
export function errorText(e: RpcError): string {
  return e.code + (e.reason !== "" && e.reason !== e.code ? ` (${e.reason})` : "") + ": " + e.message;
}

// readErrorInfo decodes google.rpc.ErrorInfo {reason = 1, domain = 2, metadata = 3}, the
// one detail the console reads, without the schema of google/rpc.
function readErrorInfo(b: Uint8Array, out: RpcError): void {
  try {
    const r = new BinaryReader(b);
    while (r.pos < r.len) {
      const [field, wt] = r.tag();
      if (field === 1 && wt === WireType.LengthDelimited) {
        out.reason = r.string();
      } else if (field === 3 && wt === WireType.LengthDelimited) {
        const entry = new BinaryReader(r.bytes());
        let k = "";
        let v = "";
        while (entry.pos < entry.len) {
          const [f, w] = entry.tag();
          if (f === 1 && w === WireType.LengthDelimited) k = entry.string();
          else if (f === 2 && w === WireType.LengthDelimited) v = entry.string();
          else entry.skip(w);
        }
        out.metadata[k] = v;
      } else {
        r.skip(wt);
      }
    }
  } catch {
    // A detail that does not decode adds nothing.
  }
}

/** isCode reports whether err is a call's error of code c. */
export function isCode(err: unknown, c: Code): boolean {
  return ConnectError.from(err).code === c;
}

export { Code };

/**
 * newKey returns a fresh client_key for SendRunInput: random, so that a retry of the same
 * input (same key) acts once and two inputs never share one. crypto.randomUUID needs a
 * secure context, which plain HTTP on another host is not; getRandomValues does not.
 */
export function newKey(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return "console-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}
