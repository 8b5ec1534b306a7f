#!/usr/bin/env bash
# Checks the dependency direction docs/development.md's layout table gives, on direct
# imports (go list's .Imports, not -deps: gen carries the gRPC stubs, so every package
# using a message type reaches gRPC through it). Each rule names packages and the
# imports they must not have. Run from the repository's root; CI runs it.
set -euo pipefail
m=github.com/agentd/agentd

# package patterns | forbidden imports (an extended regexp on the import path) | why
rules=(
  "./runtime/...|^google\.golang\.org/grpc|^$m/gen/|the loop knows nothing of gRPC or protobuf"
  "./service/runs/journal/...|^$m/runtime(/|$)|^$m/service$|^$m/service/runs$|^google\.golang\.org/grpc|the journal knows frames and the store, not the runtime or the engine"
  "./service/continuation/...|^$m/runtime(/|$)|^$m/service$|^$m/service/runs$|^$m/internal/wire$|^google\.golang\.org/grpc|continuations are gen message types, signed"
  "./internal/wire/...|^$m/service|^google\.golang\.org/grpc|wire maps runtime to gen, for whoever needs it"
  "./runtime/internal/schemacost/...|^$m/|the schema cost analysis stands alone"
  "./service/runs/...|^$m/service$|^google\.golang\.org/grpc/(codes|status)$|the engine is not the wire: it never makes gRPC statuses"
  "./service|^$m/service/store|the wire reaches the store through the engine alone"
  "./service/agents/...|^$m/service$|the agents file makes the engine's agents"
)

# Only the daemon and the test kits import service: everything else reaches the engine.
importers=$(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | grep -E " $m/service( |\$)" | cut -d' ' -f1 |
  grep -vE "^$m/cmd/|^$m/service/servicetest$" || true)
if [ -n "$importers" ]; then
  echo "only cmd/ and test kits may import service, but these do: $importers" >&2
  fail=1
fi

fail=${fail:-0}
for rule in "${rules[@]}"; do
  IFS='|' read -r -a parts <<<"$rule"
  pkgs=${parts[0]}
  why=${parts[${#parts[@]}-1]}
  forbidden=$(IFS='|'; echo "${parts[*]:1:${#parts[@]}-2}")
  while read -r pkg imports; do
    bad=$(tr ' ' '\n' <<<"$imports" | grep -E "$forbidden" || true)
    if [ -n "$bad" ]; then
      echo "$pkg must not import $(echo $bad) ($why)" >&2
      fail=1
    fi
  done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' "$pkgs")
done
exit $fail
