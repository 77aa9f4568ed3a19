#!/bin/sh
# Prepares the namespace the workers use: creates it if it is missing and registers the custom
# search attributes the workflow writes, given as NAME=TYPE arguments (docker-compose.yml passes
# the ones declared in src/contract.ts; test/deploy checks that they match).
#
# Idempotent: an existing namespace is left alone, and with SQL visibility the server skips a
# search attribute that is already registered. A name registered with another type fails at once,
# because the workflow's upserts would fail later anyway.
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS must be host:port of the Temporal frontend}"
: "${TEMPORAL_NAMESPACE:?TEMPORAL_NAMESPACE must be set}"
if [ "$#" -eq 0 ]; then
  echo 'usage: temporal-init.sh NAME=TYPE...' >&2
  exit 2
fi

# The server answers on its port a little before it serves requests, and a new namespace takes a
# few seconds to reach every frontend; retry each step a bounded number of times.
retry() {
  attempt=1
  until "$@"; do
    if [ "$attempt" -ge 30 ]; then
      echo "gave up after $attempt attempts: $*" >&2
      return 1
    fi
    attempt=$((attempt + 1))
    sleep 2
  done
}

retry temporal operator cluster health --address "$TEMPORAL_ADDRESS"

if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" --namespace "$TEMPORAL_NAMESPACE" >/dev/null 2>&1; then
  echo "namespace $TEMPORAL_NAMESPACE exists"
else
  retry temporal operator namespace create --address "$TEMPORAL_ADDRESS" --namespace "$TEMPORAL_NAMESPACE"
fi

# Build one `create` call with a --name/--type pair per argument.
pairs="$*"
set --
for pair in $pairs; do
  set -- "$@" --name "${pair%%=*}" --type "${pair#*=}"
done
# Retried like the steps above, except for a name already registered with another type: no retry
# can fix that, so it fails at once.
attempt=1
until output=$(temporal operator search-attribute create --address "$TEMPORAL_ADDRESS" --namespace "$TEMPORAL_NAMESPACE" "$@" 2>&1); do
  echo "$output" >&2
  case "$output" in
    *'different type'*) exit 1 ;;
  esac
  if [ "$attempt" -ge 30 ]; then
    echo "gave up registering search attributes after $attempt attempts" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 2
done
echo "$output"
temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" --namespace "$TEMPORAL_NAMESPACE"
