#!/bin/sh
# Creates the Temporal databases in PostgreSQL and brings their schemas to the version the
# server image expects. The temporalio/server image does none of this itself (the old
# temporalio/auto-setup image did, and is deprecated), so docker-compose.yml runs this once in
# temporalio/admin-tools before the server starts.
#
# Every step is idempotent: `create` accepts an existing database, `setup-schema` skips a database
# that already has a newer version, and `update-schema` applies only the versions it lacks. So the
# same script upgrades an existing volume in place after the image tags are bumped.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS must name the PostgreSQL host}"
: "${POSTGRES_USER:?POSTGRES_USER must be set}"
: "${SQL_PASSWORD:?SQL_PASSWORD must be set (temporal-sql-tool reads the password from it)}"
port="${DB_PORT:-5432}"
# Where the admin-tools image keeps the schema files; `npm run test:cluster` points it at the files of
# the same server release built from source.
schemas="${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema/postgresql/v12}"

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$port" -u "$POSTGRES_USER" "$@"
}

# depends_on waits for pg_isready, but keep a bounded wait of our own so the script also works
# when run by hand.
attempt=1
until nc -z -w 5 "$POSTGRES_SEEDS" "$port"; do
  if [ "$attempt" -ge 30 ]; then
    echo "PostgreSQL at $POSTGRES_SEEDS:$port is not reachable after $attempt attempts" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 2
done

for pair in temporal:temporal temporal_visibility:visibility; do
  db="${pair%%:*}"
  dir="$schemas/${pair#*:}/versioned"
  echo "schema: $db"
  sql --db "$db" create
  sql --db "$db" setup-schema -v 0.0
  sql --db "$db" update-schema -d "$dir"
done
echo 'schema: done'
