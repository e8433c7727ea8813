#!/bin/sh
# Submits a job over the HTTP API and follows it to the end, the way another API
# would: POST /jobs, then the events stream (newline-delimited JSON) until the job
# finishes, then GET /jobs/:uuid for the results.
#   TERN_URL=http://127.0.0.1:8080 examples/client/submit.sh hello '{"who": "api"}'
set -eu
url=${TERN_URL:-http://127.0.0.1:8080}
auth=""
[ -n "${TERN_TOKEN:-}" ] && auth="Authorization: Bearer $TERN_TOKEN"
workflow=${1:-hello}
params=${2:-{\}}
job=$(curl -sf -H "Content-Type: application/json" ${auth:+-H "$auth"} \
    -d "{\"workflow\": \"$workflow\", \"params\": $params}" "$url/jobs")
uuid=$(printf '%s' "$job" | sed -n 's/.*"uuid":"\([0-9a-f-]*\)".*/\1/p' | head -n 1)
echo "job $uuid"
curl -sfN ${auth:+-H "$auth"} "$url/jobs/$uuid/events"
curl -sf ${auth:+-H "$auth"} "$url/jobs/$uuid"
echo
