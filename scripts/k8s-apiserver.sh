#!/usr/bin/env bash
# A real CRD-serving Kubernetes API server (the standalone apiextensions-apiserver plus etcd) on
# 127.0.0.1, so that Kueue, KAI Scheduler and Volcano objects can be checked with server-side dry
# run: structural schemas, defaulting and CEL x-kubernetes-validations rules (not the projects'
# webhooks, which do not run here).
#
#   scripts/k8s-apiserver.sh build          compile the server from Debian sid Go source packages
#                                           (~3 min on 2 cores, once; the binaries are cached)
#   scripts/k8s-apiserver.sh start          run etcd + the server, create every CRD, wait until served
#   scripts/k8s-apiserver.sh dry-run PATH.. POST each object of each YAML file (or of every *.yaml
#                                           under a folder) with ?dryRun=All, one line per object:
#                                           "ok   Kind/name", "FAIL Kind/name: why", "skip Kind/name: ..."
#   scripts/k8s-apiserver.sh stop           stop the recorded processes, remove the state folder
#   scripts/k8s-apiserver.sh check PATH..   build + start + dry-run + stop (stop always runs)
#
# Exit status: 0 fine; 1 a FAIL line or an error; 2 usage, or the server is not running (dry-run) or
# already running (start: this script never reuses a running server, run stop first);
# 3 the Debian packages could not be had (the real API server checks are unavailable: a loud
# message says why); 4 the packages were had but the compilation failed (sid moved under us).
# build is idempotent (a working cached binary means nothing is done); stop with nothing running is
# a no-op.
#
# Environment:
#   ALLOT_SHARED_DIR       folder holding crds/{kueue,kai-scheduler,volcano}/*.yaml
#                          (default: the folder "shared" next to the repository)
#   ALLOT_CACHE_DIR        cache root (default ~/.cache/allot); binaries in $ALLOT_CACHE_DIR/apiserver/bin
#   ALLOT_APISERVER_STATE  state folder: certs, kubeconfig, env, logs, etcd data, PIDs
#                          (default /tmp/allot-apiserver); "$STATE/env" can be sourced by tests
#   ALLOT_APISERVER_PORT   HTTPS port of the API server (default 26443)
#   ALLOT_ETCD_PORT, ALLOT_ETCD_PEER_PORT   etcd ports (default 22379, 22380)
#   ALLOT_APISERVER_TIMEOUT  seconds to wait for the server and for each CRD (default 120)
#   ALLOT_FIELD_VALIDATION   fieldValidation of the dry-run POSTs (default Strict: unknown fields fail)
#   ALLOT_DEBIAN_MIRROR, ALLOT_DEBIAN_SUITE  where the sources come from (default: the Debian
#                          archive this machine's apt is configured with, suite sid)
#   ALLOT_KEEP_BUILD_TREE=1  keep the ~3 GB build tree in the cache after a successful build
#   ALLOT_PYTHON           python3 to use (PyYAML is installed with pip into $CACHE/python if missing)
# The cache ($ALLOT_CACHE_DIR/apiserver, ~100 MB): bin/{apiextensions-apiserver,etcd}, VERSIONS, python/.
# check prints only dry-run's lines on standard output (build's and start's go to standard error).
#
# Quirks of this server: /readyz keeps failing on informer-sync (there is no core API for the
# Service informer) although requests are served, so readiness is judged by listing CRDs; there is
# no /apis discovery, so kubectl cannot talk to it: use plain HTTPS with the client certificate.
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO_ROOT="$(cd "$(dirname "$SELF")/.." && pwd)"
SHARED_DIR="${ALLOT_SHARED_DIR:-$REPO_ROOT/../shared}"
CACHE="${ALLOT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/allot}/apiserver"
STATE="${ALLOT_APISERVER_STATE:-/tmp/allot-apiserver}"
API_PORT="${ALLOT_APISERVER_PORT:-26443}"
ETCD_PORT="${ALLOT_ETCD_PORT:-22379}"
ETCD_PEER_PORT="${ALLOT_ETCD_PEER_PORT:-22380}"
TIMEOUT="${ALLOT_APISERVER_TIMEOUT:-120}"
# The Debian archive this machine already uses (the first `URIs:` or `deb` line ending in /debian).
system_mirror() {
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
        sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?//p' |
        awk '{print $1}' | { grep -E '/debian/?$' || true; } | awk 'NR == 1'
}
MIRROR="${ALLOT_DEBIAN_MIRROR:-$(system_mirror)}"
SUITE="${ALLOT_DEBIAN_SUITE:-sid}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PYTHON="${ALLOT_PYTHON:-python3}"
APISERVER_BIN="$CACHE/bin/apiextensions-apiserver"
ETCD_BIN="$CACHE/bin/etcd"
MARKER=".allot-apiserver-state"

log() { echo "k8s-apiserver: $*" >&2; }
die() { log "error: $1"; exit "${2:-1}"; }

loud() {
    {
        echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
        echo '!!! THE REAL KUBERNETES API SERVER CHECKS ARE UNAVAILABLE ON THIS MACHINE'
        local line
        for line in "$@"; do echo "!!! $line"; done
        echo '!!! (objects were NOT checked against a real apiextensions-apiserver)'
        echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
    } >&2
}

# ---------------------------------------------------------------------------------------------
# build

binaries_work() {
    [ -x "$APISERVER_BIN" ] && [ -x "$ETCD_BIN" ] &&
        "$APISERVER_BIN" --help >/dev/null 2>&1 &&
        "$ETCD_BIN" --version >/dev/null 2>&1
}

unavailable() { # why... -> exit 3
    loud "$@"
    exit 3
}

do_build() {
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.build.lock"
    flock 9
    if binaries_work; then
        echo "apiserver: cached in $CACHE/bin ($(head -1 "$CACHE/VERSIONS" 2>/dev/null || echo 'versions unknown'))"
        return 0
    fi
    local started=$SECONDS w="$CACHE/build"
    rm -rf "$w"
    mkdir -p "$w/apt/lists/partial" "$w/apt/cache/archives/partial" "$w/debs" "$w/root"
    : >"$w/apt/status"
    [ -n "$MIRROR" ] || unavailable "no Debian archive found in this machine's apt sources; set ALLOT_DEBIAN_MIRROR"
    [ -r "$KEYRING" ] || unavailable "the Debian archive keyring $KEYRING is missing (apt-get install debian-archive-keyring)"
    if ! { command -v apt-get && command -v dpkg; } >/dev/null; then
        unavailable "apt-get/dpkg are not available on this machine"
    fi
    echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main" >"$w/apt/sources.list"
    # A private view of sid: the system's sources, lists, status and preferences are not touched.
    local apt_opts=(
        -o "Dir::Etc::SourceList=$w/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$w/apt/lists" -o "Dir::State::status=$w/apt/status"
        -o "Dir::Cache=$w/apt/cache" -o Dir::Etc::Preferences=/dev/null
        -o Dir::Etc::PreferencesParts=/dev/null -o APT::Sandbox::User=root
        -o Acquire::Languages=none -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
        -o Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false
        -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false
        -o Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false
        -o APT::Update::Post-Invoke-Success::= -o Acquire::Retries=3
    )
    log "apt-get update (private $SUITE view in $w/apt)"
    if ! apt-get "${apt_opts[@]}" update >"$w/apt-update.log" 2>&1 ||
        grep -qE '^(W|E): .*(Failed to fetch|not signed|NO_PUBKEY|Could not resolve)' "$w/apt-update.log"; then
        tail -5 "$w/apt-update.log" >&2
        unavailable "apt-get update of Debian $SUITE from $MIRROR failed (see $w/apt-update.log)"
    fi
    # Resolve the closure by name every time: sid package names and versions move.
    local want="$w/want" gov
    if ! apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances golang-k8s-apiextensions-apiserver-dev \
        >"$w/closure.txt" 2>"$w/closure.err"; then
        cat "$w/closure.err" >&2
        unavailable "Debian $SUITE has no package golang-k8s-apiextensions-apiserver-dev (or its closure cannot be resolved)"
    fi
    grep -E '^golang-' "$w/closure.txt" | sort -u >"$want" || true
    gov=$(apt-cache "${apt_opts[@]}" depends golang-go 2>/dev/null |
        sed -n 's/^ *Depends: \(golang-1\.[0-9]*-go\)$/\1/p' | head -1)
    [ -n "$gov" ] || unavailable "cannot tell which Go toolchain golang-go depends on in Debian $SUITE"
    if ! apt-cache "${apt_opts[@]}" show etcd-server >/dev/null 2>&1; then
        unavailable "Debian $SUITE has no package etcd-server"
    fi
    printf '%s\n' "$gov" "${gov%-go}-src" etcd-server >>"$want"
    sort -u -o "$want" "$want"
    log "downloading $(wc -l <"$want") packages (Go source closure, $gov, etcd-server)"
    if ! (cd "$w/debs" && xargs -a "$want" apt-get "${apt_opts[@]}" download) >"$w/download.log" 2>&1; then
        tail -5 "$w/download.log" >&2
        unavailable "downloading the packages from $MIRROR failed (see $w/download.log)"
    fi
    log "unpacking $(find "$w/debs" -name '*.deb' | wc -l) packages ($(du -sh "$w/debs" | cut -f1))"
    local deb
    for deb in "$w"/debs/*.deb; do
        dpkg -x "$deb" "$w/root" || unavailable "cannot unpack $deb"
    done
    local goroot="$w/root/usr/lib/go-${gov#golang-}"
    goroot="${goroot%-go}"
    [ -x "$goroot/bin/go" ] || die "no Go toolchain at $goroot after unpacking" 4
    local version
    version="apiextensions-apiserver $(dpkg-deb -f "$w"/debs/golang-k8s-apiextensions-apiserver-dev_*.deb Version)"
    version+=", $gov $(dpkg-deb -f "$w"/debs/"$gov"_*.deb Version)"
    version+=", etcd-server $(dpkg-deb -f "$w"/debs/etcd-server_*.deb Version)"
    log "compiling $version in GOPATH mode (2-3 minutes measured on 2 cores; log: $w/go-build.log)"
    if ! env GOROOT="$goroot" GOPATH="$w/root/usr/share/gocode" GO111MODULE=off GOTOOLCHAIN=local \
        GOPROXY=off GOFLAGS= GOENV=off CGO_ENABLED=0 GOCACHE="$w/gocache" GOTELEMETRY=off \
        PATH="$goroot/bin:$PATH" \
        go build -trimpath -ldflags='-s -w' -o "$w/apiextensions-apiserver" k8s.io/apiextensions-apiserver \
        >"$w/go-build.log" 2>&1; then
        tail -20 "$w/go-build.log" >&2
        loud "compiling $version failed (Debian $SUITE moved?); see $w/go-build.log"
        exit 4
    fi
    mkdir -p "$CACHE/bin"
    cp "$w/apiextensions-apiserver" "$APISERVER_BIN.new"
    cp "$w/root/usr/bin/etcd" "$ETCD_BIN.new"
    mv -f "$APISERVER_BIN.new" "$APISERVER_BIN"
    mv -f "$ETCD_BIN.new" "$ETCD_BIN"
    echo "$version" >"$CACHE/VERSIONS"
    binaries_work || die "the built binaries do not run (see $CACHE/bin)" 4
    [ "${ALLOT_KEEP_BUILD_TREE:-0}" = 1 ] || rm -rf "$w"
    echo "apiserver: built $version in $((SECONDS - started)) s into $CACHE/bin"
}

# ---------------------------------------------------------------------------------------------
# Python helper (YAML -> JSON, dry run); PyYAML comes from the system or a private folder.

ensure_pyyaml() {
    command -v "$PYTHON" >/dev/null || die "python3 is needed"
    "$PYTHON" -c 'import yaml' 2>/dev/null && return 0
    local dir="$CACHE/python"
    export PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}"
    "$PYTHON" -c 'import yaml' 2>/dev/null && return 0
    log "PyYAML is not importable: installing it into $dir"
    PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$dir" pyyaml >&2 ||
        die "cannot install PyYAML (pip install --target $dir pyyaml failed)"
    "$PYTHON" -c 'import yaml' || die "PyYAML still not importable from $dir"
}

read -r -d '' PY_HELPER <<'PY' || true
import json, os, subprocess, sys
import yaml

class Loader(yaml.SafeLoader):
    pass
# Keep timestamps as strings, as Kubernetes does (JSON has no date type).
Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != 'tag:yaml.org,2002:timestamp']
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

def load_docs(path):
    with open(path, encoding='utf-8') as f:
        return [d for d in yaml.load_all(f, Loader=Loader) if d is not None]

def crds(crd_dir, out_dir):
    """Write each CRD as JSON; print: json-file TAB name TAB served-list-paths (space separated)."""
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(crd_dir) for f in fs
                   if f.endswith(('.yaml', '.yml')))
    n = 0
    for path in files:
        for doc in load_docs(path):
            if not isinstance(doc, dict) or doc.get('kind') != 'CustomResourceDefinition':
                continue
            n += 1
            spec = doc['spec']
            out = os.path.join(out_dir, '%s.json' % doc['metadata']['name'])
            with open(out, 'w') as f:
                json.dump(doc, f)
            paths = ['/apis/%s/%s/%s' % (spec['group'], v['name'], spec['names']['plural'])
                     for v in spec['versions'] if v.get('served')]
            print('%s\t%s\t%s' % (out, doc['metadata']['name'], ' '.join(paths)))
    if n == 0:
        sys.exit('no CustomResourceDefinition found under %s' % crd_dir)

class Server:
    def __init__(self, env):
        self.url, self.ca, self.cert, self.key = (env['K8S_URL'], env['K8S_CA'],
                                                  env['K8S_CLIENT_CERT'], env['K8S_CLIENT_KEY'])

    def call(self, method, path, body=None):
        cmd = ['curl', '-sS', '--max-time', '60', '--cacert', self.ca, '--cert', self.cert,
               '--key', self.key, '-X', method, '-H', 'Accept: application/json',
               '-w', '\n%{http_code}']
        if body is not None:
            cmd += ['-H', 'Content-Type: application/json', '--data-binary', '@-']
        p = subprocess.run(cmd + [self.url + path], input=body, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError('curl: ' + (p.stderr.strip() or 'exit %d' % p.returncode))
        text, _, code = p.stdout.rpartition('\n')
        return int(code), text

def one_line(s):
    return ' '.join(str(s).split())

def dry_run(env_file, field_validation, paths):
    env = {}
    with open(env_file) as f:
        for line in f:
            if '=' in line:
                k, v = line.rstrip('\n').split('=', 1)
                env[k] = v.strip("'")
    srv = Server(env)
    code, text = srv.call('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions')
    if code != 200:
        sys.stderr.write('cannot list CRDs: HTTP %d %s\n' % (code, one_line(text)[:300]))
        return 2
    served = {}  # (apiVersion, kind) -> (plural, namespaced)
    for crd in json.loads(text)['items']:
        spec = crd['spec']
        for v in spec['versions']:
            if v.get('served'):
                served[('%s/%s' % (spec['group'], v['name']), spec['names']['kind'])] = (
                    spec['names']['plural'], spec['scope'] == 'Namespaced')
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(r, f) for r, _, fs in os.walk(p) for f in fs
                            if f.endswith('.yaml'))
        else:
            files.append(p)
    failed = False
    query = '?dryRun=All' + ('&fieldValidation=' + field_validation if field_validation else '')
    for path in files:
        try:
            docs = load_docs(path)
        except (OSError, yaml.YAMLError) as e:
            print('FAIL %s: %s' % (path, one_line(e)))
            failed = True
            continue
        for doc in docs:
            if not isinstance(doc, dict):
                print('FAIL %s: a YAML document that is not an object' % path)
                failed = True
                continue
            kind = doc.get('kind') or '<no kind>'
            meta = doc.get('metadata') or {}
            name = meta.get('name') or (meta.get('generateName', '') + '*' if meta.get('generateName') else '<no name>')
            what = '%s/%s' % (kind, name)
            target = served.get((doc.get('apiVersion'), kind))
            if target is None:
                print('skip %s: not a served custom resource' % what)
                continue
            plural, namespaced = target
            ns = '/namespaces/%s' % (meta.get('namespace') or 'default') if namespaced else ''
            group_version = doc['apiVersion']
            try:
                code, text = srv.call('POST', '/apis/%s%s/%s%s' % (group_version, ns, plural, query),
                                      json.dumps(doc))
            except RuntimeError as e:
                print('FAIL %s: %s' % (what, one_line(e)))
                failed = True
                continue
            if 200 <= code < 300:
                print('ok   %s' % what)
                continue
            failed = True
            try:
                status = json.loads(text)
                msg = status.get('message') or one_line(text)
                causes = (status.get('details') or {}).get('causes') or []
                extra = [c.get('message', '') for c in causes if c.get('message', '') not in msg]
                if extra:
                    msg += ' (' + '; '.join(extra) + ')'
            except ValueError:
                msg = one_line(text)[:500]
            print('FAIL %s: HTTP %d: %s' % (what, code, one_line(msg)))
        sys.stdout.flush()
    return 1 if failed else 0

if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'crds':
        crds(sys.argv[2], sys.argv[3])
    elif cmd == 'dry-run':
        sys.exit(dry_run(sys.argv[2], sys.argv[3], sys.argv[4:]))
    else:
        sys.exit('unknown helper command ' + cmd)
PY

py() { "$PYTHON" -c "$PY_HELPER" "$@"; }

# ---------------------------------------------------------------------------------------------
# start / stop

# Is the recorded process (file: "PID BINARY") still that binary?
recorded_alive() {
    local pid bin
    read -r pid bin <"$1" 2>/dev/null || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
        [ "$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1)" = "$bin" ]
}

any_alive() {
    local f
    for f in "$STATE"/*.pid; do
        [ -e "$f" ] && recorded_alive "$f" && return 0
    done
    return 1
}

kcurl() { # PATH [curl args...] -> prints the body, then a line with the HTTP code
    local path=$1
    shift
    curl -sS --max-time 20 --cacert "$STATE/ca.crt" --cert "$STATE/admin.crt" --key "$STATE/admin.key" \
        -H 'Accept: application/json' -w '\n%{http_code}' "$@" "https://127.0.0.1:$API_PORT$path"
}

http_code() { kcurl "$@" 2>/dev/null | tail -1; }

start_failed() {
    log "error: $*"
    local f
    for f in "$STATE"/etcd.log "$STATE"/apiserver.log; do
        [ -e "$f" ] && { log "--- last lines of $f"; tail -15 "$f" >&2; }
    done
    do_stop >/dev/null
    exit 1
}

make_certs() {
    local d=$STATE
    (
        cd "$d"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
            -keyout ca.key -out ca.crt -subj /CN=allot-test-ca
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >serving.ext
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout serving.key -out serving.csr -subj /CN=127.0.0.1
        openssl x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
            -extfile serving.ext -out serving.crt
        # O=system:masters is always authorised by the delegated authorizer.
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout admin.key -out admin.csr -subj '/O=system:masters/CN=allot-admin'
        openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
            -extfile client.ext -out admin.crt
    ) >"$d/openssl.log" 2>&1 || start_failed "openssl failed (see $d/openssl.log)"
    cat >"$d/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: allot
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $d/ca.crt
users:
- name: admin
  user:
    client-certificate: $d/admin.crt
    client-key: $d/admin.key
contexts:
- name: allot
  context: {cluster: allot, user: admin}
current-context: allot
EOF
    cat >"$d/env" <<EOF
K8S_URL='https://127.0.0.1:$API_PORT'
K8S_CA='$d/ca.crt'
K8S_CLIENT_CERT='$d/admin.crt'
K8S_CLIENT_KEY='$d/admin.key'
K8S_KUBECONFIG='$d/kubeconfig'
EOF
}

do_start() {
    local started=$SECONDS
    binaries_work || die "no working binaries in $CACHE/bin: run '$0 build' first"
    [ -d "$SHARED_DIR/crds" ] || die "no CRD folder $SHARED_DIR/crds (set ALLOT_SHARED_DIR)"
    if [ -d "$STATE" ]; then
        if [ -e "$STATE/$MARKER" ]; then
            any_alive && die "already running (state in $STATE): run '$0 stop' first" 2
            log "removing stale state $STATE"
            rm -rf "$STATE"
        elif [ -n "$(ls -A "$STATE")" ]; then
            die "$STATE exists, is not empty and is not a state folder of this script"
        fi
    fi
    mkdir -p "$STATE"
    touch "$STATE/$MARKER"
    ensure_pyyaml
    make_certs

    "$ETCD_BIN" --name allot --data-dir "$STATE/etcd" --unsafe-no-fsync \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "allot=http://127.0.0.1:$ETCD_PEER_PORT" --log-level warn \
        </dev/null >"$STATE/etcd.log" 2>&1 9>&- &
    echo "$! $ETCD_BIN" >"$STATE/etcd.pid"
    local deadline=$((SECONDS + TIMEOUT))
    until curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; do
        recorded_alive "$STATE/etcd.pid" || start_failed "etcd exited (port $ETCD_PORT or $ETCD_PEER_PORT in use?)"
        [ "$SECONDS" -lt "$deadline" ] || start_failed "etcd not healthy after $TIMEOUT s"
        sleep 0.3
    done

    "$APISERVER_BIN" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
        --bind-address=127.0.0.1 --secure-port="$API_PORT" \
        --tls-cert-file="$STATE/serving.crt" --tls-private-key-file="$STATE/serving.key" \
        --client-ca-file="$STATE/ca.crt" --authentication-skip-lookup \
        --authentication-kubeconfig="$STATE/kubeconfig" --authorization-kubeconfig="$STATE/kubeconfig" \
        --kubeconfig="$STATE/kubeconfig" \
        --disable-admission-plugins=NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy \
        --enable-priority-and-fairness=false \
        </dev/null >"$STATE/apiserver.log" 2>&1 9>&- &
    echo "$! $APISERVER_BIN" >"$STATE/apiserver.pid"
    # /readyz never turns ok here (informer-sync); listing CRDs proves requests are served.
    until [ "$(http_code /apis/apiextensions.k8s.io/v1/customresourcedefinitions)" = 200 ]; do
        recorded_alive "$STATE/apiserver.pid" || start_failed "the API server exited"
        [ "$SECONDS" -lt "$deadline" ] || start_failed "the API server did not answer within $TIMEOUT s"
        sleep 0.5
    done
    log "API server answers on https://127.0.0.1:$API_PORT after $((SECONDS - started)) s; creating CRDs"

    mkdir -p "$STATE/crds"
    py crds "$SHARED_DIR/crds" "$STATE/crds" >"$STATE/crds.tsv" || start_failed "cannot read the CRDs"
    local json name paths code p n=0
    while IFS=$'\t' read -r json name paths; do
        code=$(http_code /apis/apiextensions.k8s.io/v1/customresourcedefinitions \
            -H 'Content-Type: application/json' --data-binary "@$json")
        [ "$code" = 201 ] || [ "$code" = 409 ] ||
            start_failed "creating CRD $name: HTTP $code: $(kcurl /apis/apiextensions.k8s.io/v1/customresourcedefinitions \
                -H 'Content-Type: application/json' --data-binary "@$json" | head -c 600)"
        n=$((n + 1))
    done <"$STATE/crds.tsv"
    deadline=$((SECONDS + TIMEOUT))
    while IFS=$'\t' read -r json name paths; do
        for p in $paths; do
            until [ "$(http_code "$p")" = 200 ]; do
                [ "$SECONDS" -lt "$deadline" ] || start_failed "CRD $name is not served at $p after $TIMEOUT s"
                sleep 0.3
            done
        done
    done <"$STATE/crds.tsv"
    echo "apiserver: running on https://127.0.0.1:$API_PORT with $n CRDs, started in $((SECONDS - started)) s (state: $STATE; env: $STATE/env)"
}

do_stop() {
    if [ ! -e "$STATE/$MARKER" ]; then
        echo "apiserver: not running (no state in $STATE)"
        return 0
    fi
    local f pid bin
    # The API server first, then etcd.
    for f in "$STATE/apiserver.pid" "$STATE/etcd.pid"; do
        [ -e "$f" ] || continue
        recorded_alive "$f" || continue
        read -r pid bin <"$f"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$(basename "$bin") ($pid) ignored SIGTERM for 10 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        fi
    done
    rm -rf "$STATE"
    echo "apiserver: stopped"
}

# ---------------------------------------------------------------------------------------------

do_dry_run() {
    [ $# -gt 0 ] || die "usage: $0 dry-run PATH..." 2
    if ! { [ -e "$STATE/$MARKER" ] && [ -e "$STATE/env" ] && any_alive; }; then
        die "the API server is not running (no live state in $STATE): run '$0 start'" 2
    fi
    ensure_pyyaml
    py dry-run "$STATE/env" "${ALLOT_FIELD_VALIDATION-Strict}" "$@"
}

do_check() {
    [ $# -gt 0 ] || die "usage: $0 check PATH..." 2
    local rc=0
    # Only dry-run's lines go to standard output; build's and start's go to standard error.
    "$SELF" build >&2 || rc=$?
    if [ "$rc" = 3 ]; then
        loud "check: the Debian packages for the API server could not be had; nothing was checked"
        exit 3
    fi
    [ "$rc" = 0 ] || exit "$rc"
    # Never stop a server that this check did not start.
    if [ -e "$STATE/$MARKER" ] && any_alive; then
        die "a server is already running (state in $STATE): stop it, or use another ALLOT_APISERVER_STATE and ports" 2
    fi
    trap '"$SELF" stop >&2' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$SELF" start >&2
    rc=0
    "$SELF" dry-run "$@" || rc=$?
    exit "$rc"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
    build) do_build ;;
    start) do_start ;;
    stop) do_stop ;;
    dry-run) do_dry_run "$@" ;;
    check) do_check "$@" ;;
    *)
        sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
