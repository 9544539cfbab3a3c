#!/usr/bin/env bash
# `make container-check`: build the container image and try it as an organisation would run it.
#
# No container registry is needed: the base image is a plain Debian bookworm made here by
# mmdebstrap from Debian's packages (the Containerfile installs Python 3.11 on it), and the
# build takes the rest from Debian, PyPI and npm. The image is then run with podman, with the
# privileges its sandbox needs (docs/deployment.md, "The sandbox's privileges"), and checked:
#
#   - without them it refuses to start, and says why: without `unmask=/proc/*`, and with it
#     but podman's default seccomp profile;
#   - with them, its HEALTHCHECK passes, the admin signs in, the UI and the embedded model are
#     there, and Python runs in bubblewrap inside the container and prints its output;
#   - a new container on the same volume keeps the data: the token still works (the secret
#     key), the conversation is listed and the run's variable is restored.
#
# It prints the image's size, the build time and the time from start to healthy, and exits
# non-zero with the reason on any failure. Its containers and volume are removed; the images
# are kept, so the next build reuses their layers (`podman rmi python-data-agent:check
# python-data-agent-base:bookworm` frees the space). As root it installs what it lacks from
# Debian (podman, mmdebstrap, uidmap, curl, python3; runc where crun cannot start containers).
#
# Settings (environment): IMAGE, BASE (the images' names), CHECK_PORT (the host port),
# REBUILD_BASE=1 (make the base again), NO_CACHE=1 (build every layer again).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-python-data-agent:check}
BASE=${BASE:-python-data-agent-base:bookworm}
PORT=${CHECK_PORT:-18007}
NAME=python-data-agent-check-$$
VOLUME=$NAME-data
SESSION=container-check
ADMIN_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
export ADMIN_PASSWORD  # to the container by name (`-e ADMIN_PASSWORD`), never on a command line
WORK=$(mktemp -d)
PODMAN=(podman)
RUN_OPTIONS=()  # found by choose_run_options: what this host's podman needs to start anything
BUILD_OPTIONS=()
UNMASK=(--security-opt 'unmask=/proc/*')  # bwrap mounts a /proc of its own
SECCOMP=(--security-opt "seccomp=$WORK/seccomp.json")  # and names its UTS namespace
CURRENT=""  # the running container, whose log a failure shows

say() { echo "container-check: $*"; }

fail() {
  echo "container-check: FAILED: $*" >&2
  if [ -n "$CURRENT" ]; then
    echo "--- the last lines of $CURRENT's log ---" >&2
    "${PODMAN[@]}" logs --tail 40 "$CURRENT" >&2 2>&1 || true
  fi
  exit 1
}

cleanup() {
  local name
  for name in "$NAME" "$NAME-no-unmask" "$NAME-no-seccomp" "$NAME-restarted"; do
    "${PODMAN[@]}" rm --force --time 5 "$name" >/dev/null 2>&1 || true
  done
  "${PODMAN[@]}" volume rm --force "$VOLUME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
seconds_since() { local ms=$(($(now_ms) - $1)); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

install_missing() {
  local missing=() package
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    fail "missing Debian packages: ${missing[*]}; run: sudo apt-get install -y ${missing[*]}"
  fi
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# A plain Debian bookworm: minbase, without manuals, docs and translations (as Debian's own
# slim images). On a bookworm host it uses the host's apt sources, so the host's mirror.
build_base() {
  if "${PODMAN[@]}" image exists "$BASE" && [ -z "${REBUILD_BASE:-}" ]; then
    say "base image $BASE: reused (REBUILD_BASE=1 makes it again)"
    BASE_FIGURE="reused"
    return
  fi
  local sources=() file started
  # shellcheck source=/dev/null
  if [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ]; then
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
      /etc/apt/sources.list.d/*.sources; do
      [ -f "$file" ] && grep -q '^[^#[:space:]]' "$file" && sources+=("$file")
    done
  fi
  say "making the base image $BASE with mmdebstrap"
  started=$(now_ms)
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm - "${sources[@]}" |
    "${PODMAN[@]}" import --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null ||
    fail "mmdebstrap could not make the base image (its messages are above)"
  BASE_FIGURE="$(seconds_since "$started") s"
}

# What this host's podman needs to start a container: crun cannot use a cgroup v1/v2 hybrid
# (then runc), and root without CAP_SYS_RESOURCE cannot give a container podman's default
# rlimits (then the host's own). The first set of options that starts one is kept.
choose_run_options() {
  local files procs pid_max
  files=$(ulimit -Hn)
  procs=$(ulimit -Hu)
  pid_max=$(cat /proc/sys/kernel/pid_max)
  [ "$procs" = unlimited ] || [ "$procs" -gt "$pid_max" ] && procs=$pid_max
  [ "$files" = unlimited ] && files=1048576
  local host_limits=(--ulimit "nofile=$files:$files" --ulimit "nproc=$procs:$procs")
  local runtime limits said
  for runtime in default runc; do
    if [ "$runtime" = runc ]; then
      command -v runc >/dev/null || install_missing runc
      PODMAN=(podman --runtime runc "${PODMAN[@]:1}")
    fi
    for limits in default host; do
      RUN_OPTIONS=()
      [ "$limits" = host ] && RUN_OPTIONS=("${host_limits[@]}")
      if said=$("${PODMAN[@]}" run --rm "${RUN_OPTIONS[@]}" -p "127.0.0.1:$PORT:8007" \
        "$BASE" true 2>&1); then
        BUILD_OPTIONS=("${RUN_OPTIONS[@]}")
        say "podman: runtime $runtime, rlimits $limits"
        return
      fi
      echo "  (runtime $runtime, rlimits $limits: ${said##*$'\n'})"
    done
  done
  fail "podman cannot start a container here (each attempt's error is above)"
}

# A JSON value from stdin: json_get 'expression in d' (d: the parsed document).
json_get() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

api() {  # api METHOD PATH [TOKEN] [JSON BODY]: the response body; fails on a non-2xx
  local method=$1 path=$2 token=${3:-} body=${4:-}
  local args=(--silent --show-error --fail-with-body --max-time 120 -X "$method")
  [ -n "$token" ] && args+=(-H "Authorization: Bearer $token")
  [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary @-)
  curl "${args[@]}" "http://127.0.0.1:$PORT$path" <<<"$body" ||
    fail "$method $path did not answer 2xx"
}

quietly() {  # quietly COMMAND...: its output only if it fails (without systemd, podman says
  local said  # on every start, stop and removal that it cannot time health checks)
  said=$("$@" 2>&1) || fail "$* failed: $said"
}

start_server() {  # start_server NAME: a container on the volume, with the sandbox's privileges
  CURRENT=$1  # and none other: no capabilities, no new privileges
  quietly "${PODMAN[@]}" run --detach --name "$1" "${RUN_OPTIONS[@]}" "${UNMASK[@]}" \
    "${SECCOMP[@]}" --cap-drop ALL --security-opt no-new-privileges \
    -p "127.0.0.1:$PORT:8007" -v "$VOLUME:/data" \
    -e ADMIN_USERNAME=admin -e ADMIN_PASSWORD "$IMAGE"
}

refused() {  # refused NAME WORDS OPTIONS...: the server must exit non-zero, saying WORDS
  local name=$1 words=$2 said status=0
  shift 2
  said=$(timeout 180 "${PODMAN[@]}" run --rm --name "$name" "${RUN_OPTIONS[@]}" "$@" "$IMAGE" \
    2>&1) || status=$?
  [ $status -ne 0 ] || fail "it started and exited 0 without the privilege"
  [ $status -ne 124 ] || fail "it did not refuse to start within 180 s"
  said=$(grep -Eo "$words.*" <<<"$said" | head -1) ||
    fail "it exited with $status but did not say '$words'"
  say "refused (exit $status): ${said:0:170}…"
}

wait_healthy() {  # wait_healthy NAME: the image's own HEALTHCHECK, run until it passes
  local deadline=$((SECONDS + 300)) said
  until said=$("${PODMAN[@]}" healthcheck run "$1" 2>&1); do
    case $said in
      *"no defined healthcheck"*) fail "the image has no HEALTHCHECK: $said" ;;
    esac
    [ "$("${PODMAN[@]}" inspect --format '{{.State.Running}}' "$1")" = true ] ||
      fail "the container stopped before it was healthy"
    [ $SECONDS -lt $deadline ] || fail "not healthy within 300 s"
    sleep 0.5
  done
}

sign_in() {
  api POST /api/auth/login "" "{\"username\": \"admin\", \"password\": \"$ADMIN_PASSWORD\"}" |
    json_get 'd["access_token"]'
}

run_code() {  # run_code TOKEN CODE: the run's stdout, after checking that it succeeded
  local body answer
  body=$(python3 -c 'import json, sys; print(json.dumps({"session_id": sys.argv[1], "code": sys.argv[2]}))' \
    "$SESSION" "$2")
  answer=$(api POST /api/tools/python_coder "$1" "$body")
  [ "$(json_get 'd["success"]' <<<"$answer")" = True ] || fail "the run failed: $answer"
  json_get 'd["data"]["stdout"].strip()' <<<"$answer"
}

[ -f Containerfile ] || fail "run it from the repository (no Containerfile here)"
install_missing podman mmdebstrap uidmap curl python3
[ -d /run/systemd/system ] || PODMAN+=(--cgroup-manager=cgroupfs --events-backend=file)

build_base
choose_run_options

# Behind a TLS-inspecting proxy the build must trust what this host trusts (pip, npm).
CA=/etc/ssl/certs/ca-certificates.crt
if [ -f "$CA" ]; then
  BUILD_OPTIONS+=(-v "$CA:/run/build-ca.crt:ro" --build-arg PIP_CERT=/run/build-ca.crt
    --build-arg NODE_EXTRA_CA_CERTS=/run/build-ca.crt)
fi
[ -n "${NO_CACHE:-}" ] && BUILD_OPTIONS+=(--no-cache)
say "building $IMAGE on $BASE (llama.cpp compiles on the first build: many minutes)"
started=$(now_ms)
# The docker format keeps HEALTHCHECK (the OCI format has no field for it).
"${PODMAN[@]}" build --format docker --pull=never --build-arg "BASE_IMAGE=$BASE" \
  "${BUILD_OPTIONS[@]}" -t "$IMAGE" -f Containerfile . ||
  fail "the image did not build (the build's output is above)"
BUILD_SECONDS=$(seconds_since "$started")
IMAGE_SIZE=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")

python3 scripts/sandbox_seccomp.py >"$WORK/seccomp.json" ||
  fail "no seccomp profile for the sandbox (scripts/sandbox_seccomp.py)"
say "without unmask=/proc/*, the server must refuse to start"
refused "$NAME-no-unmask" "bwrap is required but" "${SECCOMP[@]}"
say "with it but podman's default seccomp profile, too (bwrap cannot name the sandbox)"
refused "$NAME-no-seccomp" "SANDBOX_REQUIRED=true, but" "${UNMASK[@]}"

"${PODMAN[@]}" volume create "$VOLUME" >/dev/null
say "starting it on an empty volume"
started=$(now_ms)
start_server "$NAME"
wait_healthy "$NAME"
FIRST_HEALTHY=$(seconds_since "$started")
say "healthy after $FIRST_HEALTHY s"

[ "$(api GET /health | json_get 'd["status"]')" = ok ] || fail "/health is not ok"
TOKEN=$(sign_in)
[ -n "$TOKEN" ] || fail "signing in as admin gave no token"
health=$(api GET /health "$TOKEN")
[ "$(json_get 'd["sandbox"]["mode"], d["sandbox"]["state"]' <<<"$health")" = "('bwrap', 'ok')" ] ||
  fail "the sandbox is not bubblewrap, checked ok: $health"
[ "$(json_get 'd["llm"]["backend"]' <<<"$health")" = embedded ] ||
  fail "the embedded model is not the LLM backend: $health"
page=$(api GET /)
grep -q '<script type="module"' <<<"$page" || fail "the UI's page is not served at /"
api GET /assets/vendor/markdown-it.mjs >/dev/null
say "signed in; the UI, its libraries and the embedded model are there"

# In bubblewrap: the workspace is /workspace and the host name is the sandbox's own.
printed=$(run_code "$TOKEN" 'from pathlib import Path
answer = 6 * 7
print(Path.cwd(), Path("/proc/sys/kernel/hostname").read_text().strip(), answer)')
[ "$printed" = "/workspace sandbox 42" ] || fail "the sandboxed run printed '$printed'"
say "a run in the sandbox printed: $printed"

say "stopping it, and starting a new container on the same volume"
quietly "${PODMAN[@]}" stop --time 30 "$NAME"
quietly "${PODMAN[@]}" rm "$NAME"
started=$(now_ms)
start_server "$NAME-restarted"
wait_healthy "$NAME-restarted"
RESTART_HEALTHY=$(seconds_since "$started")
say "healthy after $RESTART_HEALTHY s"

conversations=$(api GET /api/conversations "$TOKEN")
grep -q "\"Session $SESSION\"" <<<"$conversations" || fail "the conversation is gone: $conversations"
printed=$(run_code "$TOKEN" 'print(answer + 1)')
[ "$printed" = 43 ] || fail "the run's variable was not restored: it printed '$printed'"
[ -n "$(sign_in)" ] || fail "signing in after the restart failed"
say "kept: the secret key (the old token works), the conversation and the variable"

size_mb=$((IMAGE_SIZE / 1000000))
cat <<EOF
container-check: PASSED
  base image (mmdebstrap):  $BASE_FIGURE
  image build:              $BUILD_SECONDS s
  image size:               $size_mb MB ($IMAGE)
  start to healthy:         $FIRST_HEALTHY s (empty volume), $RESTART_HEALTHY s (restart)
  podman:                   ${PODMAN[*]:1} ${RUN_OPTIONS[*]} ${UNMASK[*]}
                            --security-opt seccomp=(scripts/sandbox_seccomp.py's profile)
                            --cap-drop ALL --security-opt no-new-privileges
EOF
