# registry.bash - a private OCI registry for the tests: Debian's
# docker-registry on a free port of 127.0.0.1, with its own storage, stopped
# by its pid.  Images are pushed into it with the registry's own upload API
# (curl), made by the tests from tar files: no engine, no internet.
#
#   load lib/helper
#   load lib/registry
#   setup_file()    { sbx_registry_start; }            # anonymous
#   setup_file()    { sbx_registry_start user secret; } # htpasswd (Basic)
#   teardown_file() { sbx_registry_stop; }
#
# sbx_registry_start exports SBX_TEST_REGISTRY (127.0.0.1:PORT),
# SBX_TEST_REGISTRY_DIR and SBX_TEST_REGISTRY_PID.
#
# sbx_registry_token [USER PASSWORD] restarts the registry, on the same port
# and storage, behind Docker's token auth: a token server of its own
# (tests/lib/token-server.py, a key and certificate made here) that gives a
# token to anyone, or only to USER:PASSWORD; its log of requests is
# $SBX_TEST_REGISTRY_DIR/token.log.  Push the images first: the helpers
# below push anonymously.

# curl at the test registry, with its credentials when it has some.
_sbx_reg_curl() {
	local auth=()
	[ -z "${SBX_TEST_REGISTRY_AUTH:-}" ] ||
		auth=(-u "$SBX_TEST_REGISTRY_AUTH")
	curl -sS --fail-with-body "${auth[@]}" "$@"
}

sbx_registry_start() {
	local dir=${SBX_TEST_REGISTRY_DIR:-} port=${SBX_TEST_REGISTRY_PORT:-}
	local i user=${1:-} pass=${2:-} auth=${SBX_TEST_REGISTRY_AUTHCONF:-}
	command -v docker-registry >/dev/null || {
		echo "docker-registry is not installed (scripts/install-deps)" >&2
		return 1
	}
	[ -n "$dir" ] || dir=$(mktemp -d /tmp/sbx-registry.XXXXXX) || return 1
	[ -n "$port" ] || port=$(python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || return 1
	if [ -n "$user" ]; then
		# bcrypt, the only hash the registry's htpasswd mode takes.
		python3 -c 'import crypt, sys
print(sys.argv[1] + ":" + crypt.crypt(sys.argv[2], crypt.mksalt(crypt.METHOD_BLOWFISH)))' \
		    "$user" "$pass" >"$dir/htpasswd" 2>/dev/null || return 1
		auth="auth:
  htpasswd:
    realm: sbx-test
    path: $dir/htpasswd"
		export SBX_TEST_REGISTRY_AUTH="$user:$pass"
	else
		unset SBX_TEST_REGISTRY_AUTH
	fi
	cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
$auth
EOF
	setsid docker-registry serve "$dir/config.yml" \
	    >>"$dir/log" 2>&1 </dev/null &
	export SBX_TEST_REGISTRY_PID=$! SBX_TEST_REGISTRY_DIR=$dir
	# For a stop from another process (teardown_file after a test's
	# restart).
	echo "$SBX_TEST_REGISTRY_PID" >"$dir/registry.pid"
	export SBX_TEST_REGISTRY=127.0.0.1:$port SBX_TEST_REGISTRY_PORT=$port
	for ((i = 0; i < 100; i++)); do
		# 200 anonymous, 401 with htpasswd: it answers.
		case $(curl -s -o /dev/null -w '%{http_code}' \
		    "http://$SBX_TEST_REGISTRY/v2/") in
		200 | 401) return 0 ;;
		esac
		kill -0 "$SBX_TEST_REGISTRY_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "the test registry did not start:" >&2
	cat "$dir/log" >&2
	sbx_registry_stop
	return 1
}

# Stop process $1 (by its pid) and wait for it to be gone.
_sbx_reg_kill() {
	local i
	[ -n "$1" ] && kill "$1" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$1" 2>/dev/null || true
}

# Stop the registry's process $1 (registry or token) as its pid file
# names it: a test may have started it again, in a process of its own.
_sbx_reg_stop_ours() {
	local dir=${SBX_TEST_REGISTRY_DIR:-} pid
	[ -n "$dir" ] && [ -s "$dir/$1.pid" ] || return 0
	pid=$(cat "$dir/$1.pid")
	# Still ours (its command line names our directory).
	grep -qF "$dir" "/proc/$pid/cmdline" 2>/dev/null && _sbx_reg_kill "$pid"
	rm -f "$dir/$1.pid"
}

# Start the registry again, on its port and storage, with the auth:
# section $1 of its config ('' for none).
sbx_registry_restart() {
	_sbx_reg_stop_ours registry
	_sbx_reg_stop_ours token
	SBX_TEST_REGISTRY_AUTHCONF=${1:-} sbx_registry_start
}

sbx_registry_stop() {
	_sbx_reg_kill "${SBX_TEST_REGISTRY_PID:-}"
	_sbx_reg_kill "${SBX_TEST_TOKEN_PID:-}"
	_sbx_reg_stop_ours registry
	_sbx_reg_stop_ours token
	[ -z "${SBX_TEST_REGISTRY_DIR:-}" ] || rm -rf "$SBX_TEST_REGISTRY_DIR"
	unset SBX_TEST_REGISTRY SBX_TEST_REGISTRY_PID SBX_TEST_REGISTRY_DIR \
	    SBX_TEST_REGISTRY_PORT SBX_TEST_TOKEN_PID SBX_TEST_REGISTRY_AUTH
	return 0
}

sbx_registry_token() {
	local dir=$SBX_TEST_REGISTRY_DIR i tport here
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	_sbx_reg_stop_ours registry
	_sbx_reg_stop_ours token
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=sbx-test \
	    -keyout "$dir/token.key" -out "$dir/token.crt" \
	    >/dev/null 2>&1 || return 1
	rm -f "$dir/token.port"
	setsid python3 "$here/token-server.py" \
	    "$dir/token.port" "$dir/token.key" "$dir/token.crt" sbx-test \
	    "$dir/token.log" "$@" >>"$dir/log" 2>&1 </dev/null &
	export SBX_TEST_TOKEN_PID=$!
	echo "$SBX_TEST_TOKEN_PID" >"$dir/token.pid"
	for ((i = 0; i < 100; i++)); do
		[ -s "$dir/token.port" ] && break
		sleep 0.05
	done
	tport=$(cat "$dir/token.port") || return 1
	SBX_TEST_REGISTRY_AUTHCONF="auth:
  token:
    realm: http://127.0.0.1:$tport/token
    service: sbx-test-registry
    issuer: sbx-test
    rootcertbundle: $dir/token.crt" sbx_registry_start
}

# The sha256 digest of a file: sha256:HEX.
sbx_digest() { echo "sha256:$(sha256sum <"$1" | cut -d' ' -f1)"; }

# Push file $2 as a blob of repository $1; prints its digest.
sbx_registry_push_blob() {
	local repo=$1 file=$2 digest loc
	digest=$(sbx_digest "$file")
	loc=$(_sbx_reg_curl -X POST -D - -o /dev/null \
	    "http://$SBX_TEST_REGISTRY/v2/$repo/blobs/uploads/" |
	    tr -d '\r' | sed -n 's/^[Ll]ocation: //p') || return 1
	[ -n "$loc" ] || return 1
	case $loc in
	http*) ;;
	*) loc=http://$SBX_TEST_REGISTRY$loc ;;
	esac
	case $loc in
	*\?*) loc="$loc&digest=$digest" ;;
	*) loc="$loc?digest=$digest" ;;
	esac
	_sbx_reg_curl -X PUT -o /dev/null \
	    -H 'Content-Type: application/octet-stream' \
	    --data-binary "@$file" "$loc" || return 1
	echo "$digest"
}

# Push manifest file $3 (media type $4) as repository $1's reference $2
# (a tag or a digest); prints its digest.
sbx_registry_push_manifest() {
	local repo=$1 ref=$2 file=$3 type=$4
	_sbx_reg_curl -X PUT -o /dev/null -H "Content-Type: $type" \
	    --data-binary "@$file" \
	    "http://$SBX_TEST_REGISTRY/v2/$repo/manifests/$ref" || return 1
	sbx_digest "$file"
}

# An image of the directories $4... (each a layer, the first at the
# bottom; a file is a layer's tar as it is), pushed as repository $1, tag $2; $3 is a JSON object merged into
# the image config's "config" (Env, WorkingDir, Cmd...: '{}' for none).
# Platform: SBX_TEST_PLATFORM (os/arch, default linux/amd64).  Prints the
# manifest's digest.  Layers are gzip'd tars made with --numeric-owner, so
# whiteouts (.wh.NAME) and owners in the directories go as they are;
# SBX_TEST_LAYER_GZIP, when set, is a command that makes a layer's blob of
# its tar (stdin to stdout) instead of gzip (its diff_id stays the tar's).
sbx_registry_push_image() {
	local repo=$1 tag=$2 cfg=$3 d tmp n=0 layers='[]' diffs='[]' dig
	local gz size os arch
	shift 3
	os=${SBX_TEST_PLATFORM:-linux/amd64}
	arch=${os#*/}
	os=${os%%/*}
	tmp=$(mktemp -d) || return 1
	for d; do
		if [ -f "$d" ]; then
			cp "$d" "$tmp/l$n.tar" || return 1
		else
			tar -C "$d" --numeric-owner -cf "$tmp/l$n.tar" . ||
			    return 1
		fi
		${SBX_TEST_LAYER_GZIP:-gzip -n -c} <"$tmp/l$n.tar" \
		    >"$tmp/l$n.tgz" || return 1
		diffs=$(jq -c --arg d "$(sbx_digest "$tmp/l$n.tar")" \
		    '. + [$d]' <<<"$diffs")
		dig=$(sbx_registry_push_blob "$repo" "$tmp/l$n.tgz") || return 1
		size=$(stat -c %s "$tmp/l$n.tgz")
		layers=$(jq -c --arg d "$dig" --argjson s "$size" '. + [{
		    mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
		    digest: $d, size: $s}]' <<<"$layers")
		n=$((n + 1))
	done
	jq -cn --argjson c "$cfg" --argjson diffs "$diffs" --arg os "$os" \
	    --arg arch "$arch" '{architecture: $arch, os: $os, config: $c,
	    rootfs: {type: "layers", diff_ids: $diffs}}' >"$tmp/config.json"
	dig=$(sbx_registry_push_blob "$repo" "$tmp/config.json") || return 1
	jq -cn --arg d "$dig" --argjson s "$(stat -c %s "$tmp/config.json")" \
	    --argjson l "$layers" '{schemaVersion: 2,
	    mediaType: "application/vnd.oci.image.manifest.v1+json",
	    config: {mediaType: "application/vnd.oci.image.config.v1+json",
	    digest: $d, size: $s}, layers: $l}' >"$tmp/manifest.json"
	sbx_registry_push_manifest "$repo" "$tag" "$tmp/manifest.json" \
	    application/vnd.oci.image.manifest.v1+json
	rm -rf "$tmp"
}

# An image index of tag $2 in repository $1 over the manifests given as
# DIGEST=OS/ARCH...; prints its digest.
sbx_registry_push_index() {
	local repo=$1 tag=$2 m list='[]' tmp size
	shift 2
	tmp=$(mktemp) || return 1
	for m; do
		size=$(curl -sS ${SBX_TEST_REGISTRY_AUTH:+-u "$SBX_TEST_REGISTRY_AUTH"} \
		    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
		    "http://$SBX_TEST_REGISTRY/v2/$repo/manifests/${m%%=*}" |
		    wc -c)
		list=$(jq -c --arg d "${m%%=*}" --arg p "${m#*=}" \
		    --argjson s "$size" '. + [{
		    mediaType: "application/vnd.oci.image.manifest.v1+json",
		    digest: $d, size: $s, platform: {os: ($p | split("/")[0]),
		    architecture: ($p | split("/")[1])}}]' <<<"$list")
	done
	jq -cn --argjson m "$list" '{schemaVersion: 2,
	    mediaType: "application/vnd.oci.image.index.v1+json",
	    manifests: $m}' >"$tmp"
	sbx_registry_push_manifest "$repo" "$tag" "$tmp" \
	    application/vnd.oci.image.index.v1+json
	rm -f "$tmp"
}

# A busybox root filesystem in directory $1, for the images the tests push:
# /usr/bin with busybox and its applets (/bin a link to it, as merged-/usr
# systems have), /etc/passwd with root, /root and /tmp (1777). The caller
# adds what its image needs.
sbx_busybox_root() {
	local r=$1
	mkdir -p "$r"/usr/bin "$r"/etc "$r"/root || return 1
	mkdir -p -m 1777 "$r"/tmp || return 1
	ln -s usr/bin "$r/bin" || return 1
	/bin/busybox --install -s "$r/usr/bin" || return 1
	rm -f "$r/usr/bin/busybox"
	cp /bin/busybox "$r/usr/bin/busybox" || return 1
	echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
}

# The host's PROGRAM... (dynamic, as Debian has them) into root $1, each
# over its busybox applet, with the shared libraries ldd names at their
# paths: GNU find and sha256sum for an export of a snapshot that compares
# two sandboxes (lib/snapdiff.c).
sbx_root_add_host_programs() {
	local r=$1 p lib
	shift
	for p in "$@"; do
		p=$(command -v "$p") || return 1
		rm -f "$r/usr/bin/${p##*/}"
		cp "$p" "$r/usr/bin/${p##*/}" || return 1
		for lib in $(ldd "$p" | grep -o '/[^ ]*'); do
			[ -e "$r$lib" ] && continue
			mkdir -p "$r${lib%/*}" && cp -L "$lib" "$r$lib" || return 1
		done
	done
}
