# sbxd.bash - start and stop a private sbxd for a test file: on loopback,
# a free port, a throwaway API key, its own store; stopped by its pid.

# A free TCP port on 127.0.0.1.
sbxd_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# sbxd_start [sbxd options...]: sets SBXD_PID, SBXD_URL, SBXD_KEY (and
# SBXD_KEY2 a second line of the key file, when set on entry),
# SBXD_DIR (key file, store, log at $SBXD_DIR/log), SBXD_CONFIG_HOME (the
# XDG_CONFIG_HOME sbxd runs with: its secret store is under it, never the
# user's).
sbxd_start() {
	local i
	SBXD_DIR=${SBXD_DIR:-$(mktemp -d /tmp/sbxd-test.XXXXXX)}
	SBXD_KEY=e2b_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	(umask 077; printf '%s\n' "$SBXD_KEY" ${SBXD_KEY2:+"$SBXD_KEY2"} >"$SBXD_DIR/key")
	SBXD_PORT=$(sbxd_free_port)
	SBXD_URL=http://127.0.0.1:$SBXD_PORT
	SBXD_CONFIG_HOME=${SBXD_CONFIG_HOME:-$SBXD_DIR/config}
	# Its sandboxes, snapshots, volumes and images in stores of the
	# test's, never the machine's (a caller may have set its own).
	SBXD_LOCAL_DIR=
	if [ -z "${SBX_LOCAL_DIR:-}" ]; then
		# Searchable by the sandboxes' users on the way to their
		# roots (the key inside stays 0600).
		chmod 711 "$SBXD_DIR"
		mkdir -p -m 711 "$SBXD_DIR/local"
		SBXD_LOCAL_DIR=$SBXD_DIR/local
	fi
	SBX_LOCAL_DIR=${SBX_LOCAL_DIR:-$SBXD_LOCAL_DIR} \
	SBX_IMAGE_DIR=${SBX_IMAGE_DIR:-$SBXD_DIR/images} \
	XDG_CONFIG_HOME=$SBXD_CONFIG_HOME sbxd -l "127.0.0.1:$SBXD_PORT" \
		-k "$SBXD_DIR/key" -S "$SBXD_DIR/store" \
		"$@" >>"$SBXD_DIR/log" 2>&1 &
	SBXD_PID=$!
	export SBXD_PID SBXD_URL SBXD_KEY SBXD_DIR SBXD_PORT SBXD_CONFIG_HOME \
		SBXD_LOCAL_DIR
	for ((i = 0; i < 100; i++)); do
		curl -s -o /dev/null "$SBXD_URL/health" && return 0
		kill -0 "$SBXD_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "sbxd did not start:" >&2
	cat "$SBXD_DIR/log" >&2
	return 1
}

# Wait (5 s at most) for a line of sbxd's log matching the grep pattern
# $1: it answers before it has logged what it says at start.
sbxd_log_wait() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q -- "$1" "$SBXD_DIR/log" && return 0
		sleep 0.05
	done
	return 1
}

# Stop it (SIGTERM, then SIGKILL after 10 s), by pid.
sbxd_stop() {
	local i
	[ -n "${SBXD_PID:-}" ] || return 0
	kill -TERM "$SBXD_PID" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		kill -0 "$SBXD_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$SBXD_PID" 2>/dev/null || true
	wait "$SBXD_PID" 2>/dev/null || true
	SBXD_PID=
}

# curl against the control plane with the key: sbxd_api METHOD PATH [JSON]
sbxd_api() {
	local m=$1 p=$2
	shift 2
	curl -s -X "$m" -H "X-API-Key: $SBXD_KEY" ${1:+-H 'Content-Type: application/json' -d "$1"} "$SBXD_URL$p"
}

# curl against Daytona's API (or its toolbox) with the key, as Daytona's
# clients send it: dapi METHOD PATH [JSON]
dapi() {
	local m=$1 p=$2
	shift 2
	curl -s -X "$m" -H "Authorization: Bearer $SBXD_KEY" ${1:+-H 'Content-Type: application/json' -d "$1"} "$SBXD_URL$p"
}

# A sandbox through the API: prints its Sandbox JSON. [JSON body]
sbxd_create() {
	sbxd_api POST /sandboxes "${1:-{\"templateID\":\"base\",\"timeout\":300,\"secure\":true\}}"
}

# curl against a sandbox's envd: sbxd_envd ID TOKEN PATH [curl args...]
sbxd_envd() {
	local id=$1 tok=$2 p=$3
	shift 3
	curl -s -H "E2b-Sandbox-Id: $id" -H 'E2b-Sandbox-Port: 49983' \
		${tok:+-H "X-Access-Token: $tok"} "$@" "$SBXD_URL$p"
}

# A Connect envelope of JSON $1 on stdout (flags ${2:-0}).
sbxd_frame() {
	python3 -c 'import sys,struct; d=sys.argv[1].encode(); f=int(sys.argv[2]); sys.stdout.buffer.write(bytes([f])+struct.pack(">I",len(d))+d)' "$1" "${2:-0}"
}

# The envelopes of a Connect stream on stdin, one JSON line each
# (the end-of-stream one prefixed "END ").
sbxd_unframe() {
	python3 -c '
import sys,struct
d=sys.stdin.buffer.read()
i=0
while i+5<=len(d):
    f=d[i]; n=struct.unpack(">I",d[i+1:i+5])[0]; p=d[i+5:i+5+n].decode()
    print(("END " if f&2 else "")+p); i+=5+n
if i!=len(d): print("TRUNCATED")
'
}

# Run a command through Start: sbxd_run ID TOKEN JSON-of-StartRequest
sbxd_run() {
	sbxd_frame "$3" | sbxd_envd "$1" "$2" /process.Process/Start \
		-H 'Content-Type: application/connect+json' --data-binary @- |
		sbxd_unframe
}

# The same as user $1 (Authorization: Basic base64("$1:")):
# sbxd_run_as USER ID TOKEN JSON
sbxd_run_as() {
	local auth
	auth=$(printf '%s:' "$1" | base64)
	sbxd_frame "$4" | sbxd_envd "$2" "$3" /process.Process/Start \
		-H 'Content-Type: application/connect+json' \
		-H "Authorization: Basic $auth" --data-binary @- |
		sbxd_unframe
}

# For `run bash -c` pipelines.
export -f sbxd_envd sbxd_frame sbxd_unframe sbxd_api

# The official E2B JavaScript SDK (sbxd-sdk.bats, sbxd-template.bats): it is
# installed with the machine's npm into a cache directory kept between runs
# and never committed, ${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/e2b-VERSION.
# The SDK version these tests are pinned to (it wants node >= 20.18.1).
E2B_SDK_VERSION=2.51.0

# npm_cache_install DIR PACKAGE VERSION: PACKAGE@VERSION installed with npm
# into DIR (under the cache) unless it is there; node checked first.
npm_cache_install() {
	local dir=$1 pkg=$2 ver=$3 cache tmp have
	command -v node >/dev/null ||
		{ echo "sbxd.bash: node not found (run scripts/install-deps)" >&2; return 1; }
	command -v npm >/dev/null ||
		{ echo "sbxd.bash: npm not found (run scripts/install-deps)" >&2; return 1; }
	node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=18)?0:1)' ||
		{ echo "sbxd.bash: node $(node --version) is too old for $pkg $ver (wants >= 20.18.1)" >&2; return 1; }
	have=$(jq -r .version "$dir/node_modules/$pkg/package.json" 2>/dev/null || true)
	[ "$have" = "$ver" ] && return 0
	cache=$(dirname "$dir")
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.e2b.XXXXXX")
	printf '{"private":true}\n' >"$tmp/package.json"
	if ! (cd "$tmp" && npm install --no-audit --no-fund --save-exact \
		"$pkg@$ver") >"$tmp.log" 2>&1; then
		echo "sbxd.bash: npm install $pkg@$ver failed:" >&2
		cat "$tmp.log" >&2
		rm -rf "$tmp" "$tmp.log"
		return 1
	fi
	rm -rf "$dir" "$tmp.log"
	mv -T "$tmp" "$dir"
}

# Install the SDK into the cache unless it is there; sets E2B_SDK_DIR.
sdk_install() {
	E2B_SDK_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/e2b-$E2B_SDK_VERSION
	export E2B_SDK_DIR
	npm_cache_install "$E2B_SDK_DIR" e2b "$E2B_SDK_VERSION"
}

# E2B's CLI (npm package @e2b/cli, sbxd-cli.bats), the same way, into
# ${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/e2b-cli-VERSION.
E2B_CLI_VERSION=2.19.0

# Install the CLI into the cache unless it is there; sets E2B_CLI_DIR.
cli_install() {
	E2B_CLI_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/e2b-cli-$E2B_CLI_VERSION
	export E2B_CLI_DIR
	npm_cache_install "$E2B_CLI_DIR" @e2b/cli "$E2B_CLI_VERSION"
}

# sdk SCRIPT [args]: run tests/sbxd/sdk/SCRIPT.mjs (SBX_SDK_TIMEOUT seconds
# at most, a minute by default). Its stdout is JSON; its stderr is shown
# only when it fails.
sdk() {
	local s=$1 rc=0
	shift
	timeout "${SBX_SDK_TIMEOUT:-60}" node "$BATS_TEST_DIRNAME/sdk/$s.mjs" "$@" 2>"$BATS_TEST_TMPDIR/sdk.err" || rc=$?
	((rc == 0)) || cat "$BATS_TEST_TMPDIR/sdk.err"
	return "$rc"
}

# sbxd_bash_image: a root of sbxd_bash_root pushed to the test registry (started by the
# caller) as t/busybox:1, the image of Daytona's builds and snapshots in
# the tests; BASE names it.
sbxd_bash_image() {
	local r=$BATS_FILE_TMPDIR/bbroot
	sbxd_bash_root "$r" || return 1
	sbx_registry_push_image t/busybox 1 '{"Env":["PATH=/usr/bin:/bin"]}' \
	    "$r" >/dev/null || return 1
	BASE=$SBX_TEST_REGISTRY/t/busybox:1
	export BASE
}

# sbxd_bash_root DIR: a busybox root (tests/lib/registry.bash) with the
# users root and user (1000) and the host's bash and its libraries: the
# SDKs run their commands with /bin/bash.
sbxd_bash_root() {
	local r=$1 lib
	sbx_busybox_root "$r" || return 1
	mkdir -p "$r"/home/user
	printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' >"$r/etc/passwd"
	printf 'root:x:0:\nuser:x:1000:\n' >"$r/etc/group"
	chown 1000:1000 "$r/home/user"
	cp /bin/bash "$r/usr/bin/bash"
	for lib in $(ldd /bin/bash | grep -o '/[^ ]*'); do
		mkdir -p "$r$(dirname "$lib")"
		cp -L "$lib" "$r$lib"
	done
}
