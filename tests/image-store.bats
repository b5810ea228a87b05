#!/usr/bin/env bats
# sbx-image pull, ls, inspect, rm, prune and sbx-create --image REF on the
# local backend, against a real registry on loopback (Debian's
# docker-registry, tests/lib/registry.bash): anonymous, Basic (htpasswd)
# and Docker's token auth; images the tests push themselves, made of
# directories (whiteouts, an opaque directory, owners, hard links).
load lib/helper
load lib/registry

setup_file() {
	sbx_setup_file
	sbx_registry_start || return 1
	local w=$BATS_FILE_TMPDIR/layers r
	# A busybox root (the sandbox needs /bin/sh), and a layer over it.
	r=$w/base
	sbx_busybox_root "$r" || return 1
	mkdir -p "$r"/app/opq "$r"/gone "$r"/bin2
	echo keep >"$r/app/keep"
	echo del >"$r/app/del"
	echo old >"$r/app/opq/old"
	echo g >"$r/gone/f"
	echo tool >"$r/bin2/tool"
	ln "$r/bin2/tool" "$r/bin2/tool2"
	chmod 4750 "$r/bin2/tool"
	chown 1234:5678 "$r/app/keep"
	r=$w/top
	mkdir -p "$r/app/opq"
	touch "$r/app/.wh.del" "$r/.wh.gone" "$r/app/opq/.wh..wh..opq"
	echo new >"$r/app/opq/new"
	echo top >"$r/app/top"
	IMG_V1=$(sbx_registry_push_image t/app v1 \
	    '{"Env":["PATH=/usr/bin:/bin","FOO=from-image","BAR=image"]}' \
	    "$w/base" "$w/top") || return 1
	# The same layers under another tag, and a second platform.
	IMG_ARM=$(SBX_TEST_PLATFORM=linux/arm64 sbx_registry_push_image \
	    t/app arm '{}' "$w/base") || return 1
	sbx_registry_push_index t/app multi "$IMG_V1=linux/amd64" \
	    "$IMG_ARM=linux/arm64" >/dev/null || return 1
	# Three layers: files, then whiteouts of them; a symlink out of the
	# tree, then a directory of that name with a file in it.
	r=$w/mid
	mkdir -p "$r/opt/m" "$r/opt/d"
	echo m >"$r/opt/m/f"
	echo gone >"$r/opt/gone"
	echo d >"$r/opt/d/f"
	ln -s "$BATS_FILE_TMPDIR/outside" "$r/esc"
	r=$w/last
	mkdir -p "$r/opt/d" "$r/esc"
	touch "$r/opt/.wh.gone" "$r/opt/d/.wh..wh..opq"
	echo last >"$r/opt/d/g"
	echo pwned >"$r/esc/pwned"
	mkdir -p "$BATS_FILE_TMPDIR/outside"
	IMG_3=$(sbx_registry_push_image t/three v1 '{}' "$w/base" "$w/mid" \
	    "$w/last") || return 1
	# Users: a layer with an app user (and a group listing it), images
	# whose User is a uid:gid, a name, and a name the image lacks.
	r=$w/users
	mkdir -p "$r/etc" "$r/home/app"
	mkdir -m 1777 "$r/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n' \
	    >"$r/etc/passwd"
	printf 'root:x:0:\napp:x:1000:\nstaff:x:50:app\n' >"$r/etc/group"
	chown 1000:1000 "$r/home/app"
	sbx_registry_push_image t/user ids '{"User":"1000:1000"}' \
	    "$w/base" "$r" >/dev/null || return 1
	sbx_registry_push_image t/user name '{"User":"app","Cmd":["sleep","600"]}' \
	    "$w/base" "$r" >/dev/null || return 1
	sbx_registry_push_image t/user nosuch '{"User":"nosuch"}' \
	    "$w/base" "$r" >/dev/null || return 1
	# Layers made as tars, each doing to the layers below what a layer
	# unpacked in a directory of its own cannot do there: hard links to
	# their files, paths through their symlinks, a new owner, mode and
	# attribute on their directory, whiteouts of a directory and of a
	# hard-linked file, an opaque directory.
	python3 - "$w" <<'PY' || return 1
import io, sys, tarfile
D, F, L, H = tarfile.DIRTYPE, tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
def layer(path, *entries):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for name, typ, data, mode, owner, link, pax in entries:
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode, ti.mtime, ti.linkname = typ, mode, 1000, link
            ti.uid, ti.gid = owner
            ti.pax_headers = pax
            ti.size = len(data) if typ == F else 0
            t.addfile(ti, io.BytesIO(data) if typ == F else None)
def e(name, typ=F, data=b"", mode=None, owner=(0, 0), link="", pax={}):
    mode = mode or (0o755 if typ == D else 0o644)
    return (name, typ, data, mode, owner, link, pax)
w = sys.argv[1]
layer(w + "/x0.tar", e("d", D, mode=0o755, pax={"SCHILY.xattr.user.low": "1"}),
      e("d/a", data=b"a"), e("hl", D, mode=0o755),
      e("hl/target", data=b"T", mode=0o640, owner=(7, 8)),
      e("s", L, link="d"), e("abs", L, link="/d"), e("e", D, mode=0o700),
      e("e/in", data=b"e"), e("x", data=b"x"), e("y", D, mode=0o711),
      e("y/f", data=b"f"), e("z", D), e("z/keep", data=b"k"))
layer(w + "/x1.tar",
      e("d", D, mode=0o750, owner=(1234, 5678), pax={"SCHILY.xattr.user.up": "2"}),
      e("d/b", data=b"b"), e("up/link", H, link="hl/target"),
      e("s/viaimplicit", data=b"si"), e("abs/viaabs", data=b"sa"),
      e(".wh.x"), e("y/.wh..wh..opq"), e("y/g", data=b"g"),
      e("z/new", data=b"n"))
layer(w + "/x2.tar", e(".wh.e"), e("l2", H, link="d/b"), e("x", data=b"x2"),
      e("hl/.wh.target"))
PY
	IMG_X=$(sbx_registry_push_image t/across v1 '{}' "$w/x0.tar" \
	    "$w/x1.tar" "$w/x2.tar") || return 1
	export IMG_V1 IMG_ARM IMG_3 IMG_X
}

teardown() {
	[ -z "${PROXY_PID:-}" ] || kill "$PROXY_PID" 2>/dev/null || true
	[ -z "${NONROOT_DIR:-}" ] || rm -rf "$NONROOT_DIR"
}

teardown_file() {
	sbx_registry_stop
	sbx_teardown_file
}

setup() {
	sbx_setup
	unset SBX_BACKEND
	export SBX_IMAGE_DIR=$BATS_TEST_TMPDIR/store
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config HOME=$BATS_TEST_TMPDIR
	R=$SBX_TEST_REGISTRY
}

@test "pull by tag: one line of what was stored, every blob checked and named by its digest" {
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_success
	[ -z "$stderr" ]
	jq_true ".image == \"$R/t/app:v1\" and .digest == \"$IMG_V1\" and
	    (.layers | length) == 2 and .fetched == 3 and
	    .platform == \"linux/amd64\"" <<<"$output"
	# Every blob's name is the sha256 of what it holds.
	n=0
	for f in "$SBX_IMAGE_DIR"/blobs/sha256/*; do
		[ "$(sha256sum <"$f" | cut -d' ' -f1)" = "${f##*/}" ]
		n=$((n + 1))
	done
	[ "$n" -eq 4 ] # the manifest, the config, two layers (fetched: 3)
	# Again: nothing fetched.
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_success
	jq_true '.fetched == 0' <<<"$output"
}

@test "pull by digest; an index gives the host's platform, or --platform's" {
	run --separate-stderr sbx-image pull "$R/t/app@$IMG_V1"
	assert_success
	jq_true ".digest == \"$IMG_V1\"" <<<"$output"
	run --separate-stderr sbx-image pull "$R/t/app:multi"
	assert_success
	jq_true ".digest == \"$IMG_V1\" and .platform == \"linux/amd64\"" \
	    <<<"$output"
	run --separate-stderr sbx-image pull --platform linux/arm64 \
	    "$R/t/app:multi"
	assert_success
	jq_true ".digest == \"$IMG_ARM\" and .platform == \"linux/arm64\"" \
	    <<<"$output"
	run --separate-stderr sbx-image pull --platform linux/s390x \
	    "$R/t/app:multi"
	assert_failure 3
	assert_equal "$stderr" "sbx-image: image '$R/t/app:multi' has no linux/s390x variant"
}

@test "the layers applied: whiteouts, an opaque directory, owners, modes and hard links" {
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_success
	root=$(jq_str .rootfs <<<"$output")
	[ -d "$root/usr/bin" ]
	[ -f "$root/app/keep" ]
	[ ! -e "$root/app/del" ]     # .wh.del
	[ ! -e "$root/gone" ]        # .wh.gone, a directory
	[ -f "$root/app/opq/new" ]   # written by the opaque layer itself
	[ ! -e "$root/app/opq/old" ] # hidden by .wh..wh..opq
	[ ! -e "$root/app/.wh.del" ]
	[ ! -e "$root/app/opq/.wh..wh..opq" ]
	assert_equal "$(stat -c '%u:%g' "$root/app/keep")" 1234:5678
	assert_equal "$(stat -c '%a %h' "$root/bin2/tool")" "4750 2"
	assert_equal "$(stat -c %i "$root/bin2/tool")" \
	    "$(stat -c %i "$root/bin2/tool2")"
}

@test "a sandbox of a pulled image: its files, its Env before --env, its name in sbx-ls; stopped and started again" {
	sbx-image pull "$R/t/app:v1" >/dev/null
	run --separate-stderr sbx-create -s s.json --image "$R/t/app:v1" \
	    -e BAR=mine
	assert_success
	run --separate-stderr sbx-exec -s s.json -- sh -c \
	    'cat /app/keep /app/top; echo "$FOO $BAR $PATH"; ls /app/opq'
	assert_success
	assert_output "keep
top
from-image mine /usr/bin:/bin
new"
	run --separate-stderr sbx-ls -j
	jq_true "select(.image == \"$R/t/app:v1\")" <<<"$output"
	sbx-pause -m stop -s s.json >/dev/null
	sbx-pause --resume -s s.json >/dev/null
	run --separate-stderr sbx-exec -s s.json -- sh -c 'echo "$FOO"'
	assert_success
	assert_output from-image
	# What a sandbox writes stays in its own layer.
	sbx-exec -s s.json -- sh -c 'echo x >/app/top'
	root=$(sbx-image inspect "$R/t/app:v1" | jq_str .rootfs)
	assert_equal "$(cat "$root/app/top")" top
	sbx-kill -s s.json >/dev/null
}

@test "the image's User runs its commands: a uid:gid as it is, a name through its /etc/passwd and /etc/group" {
	sbx-image pull "$R/t/user:ids" >/dev/null
	run --separate-stderr sbx-create -s s.json --image "$R/t/user:ids"
	assert_success
	run --separate-stderr sbx-exec -s s.json -- id -u
	assert_success
	assert_output 1000
	run --separate-stderr sbx-exec -s s.json -- id -g
	assert_output 1000
	sbx-kill -s s.json >/dev/null
	# A name: its uid, group, the groups that list it, its home; the
	# start command (the image's Cmd) runs as it too.
	sbx-image pull "$R/t/user:name" >/dev/null
	run --separate-stderr sbx-create -s s.json --image "$R/t/user:name"
	assert_success
	run --separate-stderr sbx-exec -s s.json -- sh -c \
	    'id -u; id -g; id -G; echo "$HOME"; ps -o user,args |
	    grep -cx "app *sleep 600"'
	assert_success
	assert_output "1000
1000
1000 50
/home/app
1"
	# A shell session (sbx-shell) is the image's user's too.
	run --separate-stderr sbx-shell -s s.json 'id -u; echo "$HOME"'
	assert_success
	assert_equal "$(jq -r .output <<<"$output")" $'1000\n/home/app'
	sbx-kill -s s.json >/dev/null
}

@test "an image whose User it does not know is refused at create: exit 2, nothing made" {
	sbx-image pull "$R/t/user:nosuch" >/dev/null
	before=$(sbx-ls -j | wc -l)
	run --separate-stderr sbx-create -s s.json --image "$R/t/user:nosuch"
	assert_failure 2
	assert_equal "$stderr" "sbx-create: no user 'nosuch' in the image's /etc/passwd"
	[ ! -e s.json ]
	assert_equal "$(sbx-ls -j | wc -l)" "$before"
}

@test "the image's WorkingDir is the sandbox's and the state's (sbx-sync pushes there, no trailing slash); -w wins" {
	r=$BATS_TEST_TMPDIR/wd
	mkdir -p "$r/srv/app"
	echo here >"$r/srv/app/marker"
	base=$(sbx-image pull "$R/t/app:v1" | jq_str .digest)
	# The same layers and a WorkingDir (with a trailing slash, as a
	# Dockerfile's WORKDIR may leave it), as another tag.
	d=$(sbx_registry_push_image t/wd v1 \
	    '{"Env":["PATH=/usr/bin:/bin"],"WorkingDir":"/srv/app/"}' \
	    "$(jq -r '.rootfs' <<<"$(sbx-image inspect "$R/t/app:v1")")" "$r")
	[ -n "$d" ] && [ -n "$base" ]
	sbx-image pull "$R/t/wd:v1" >/dev/null
	sbx-create -s s.json --image "$R/t/wd:v1" >/dev/null
	assert_equal "$(jq -r .workdir s.json)" /srv/app
	run --separate-stderr sbx-exec -s s.json -- sh -c 'pwd; cat marker'
	assert_success
	assert_output "/srv/app
here"
	mkdir proj
	echo pushed >proj/f
	sbx-sync push -s s.json proj >/dev/null
	run sbx-exec -s s.json -- cat /srv/app/f
	assert_output pushed
	sbx-kill -s s.json >/dev/null
	sbx-create -s t.json --image "$R/t/wd:v1" -w /elsewhere >/dev/null
	run --separate-stderr sbx-exec -s t.json -- pwd
	assert_output /elsewhere
	sbx-kill -s t.json >/dev/null
}

@test "two sandboxes of one image share its tree; rm keeps it while one uses it" {
	sbx-image pull "$R/t/app:v1" >/dev/null
	sbx-create -s a.json --image "$R/t/app:v1" >/dev/null
	sbx-create -s b.json --image "$R/t/app:v1" >/dev/null
	[ "$(ls "$SBX_IMAGE_DIR/rootfs" | wc -l)" -eq 1 ]
	run --separate-stderr sbx-image rm "$R/t/app:v1"
	assert_success
	jq_true '.removed and .in_use_by != null' <<<"$output"
	# The name is gone; the files the sandboxes stand on are not.
	run --separate-stderr sbx-image ls
	assert_success
	assert_output ''
	[ "$(ls "$SBX_IMAGE_DIR/rootfs" | wc -l)" -eq 1 ]
	run sbx-exec -s a.json -- cat /app/top
	assert_success
	assert_output top
	sbx-kill -s a.json >/dev/null
	sbx-kill -s b.json >/dev/null
	# Nothing uses them now: prune frees them all.
	run --separate-stderr sbx-image prune
	assert_success
	jq_true '.freed > 0' <<<"$output"
	# the trees and their marks
	[ -z "$(ls -A "$SBX_IMAGE_DIR/rootfs")" ]
	[ -z "$(ls -A "$SBX_IMAGE_DIR/unsynced")" ]
	[ -z "$(ls "$SBX_IMAGE_DIR/blobs/sha256")" ]
}

# A tree is not synced at pull (its blobs are): its mark holds the boot
# it was made in. After another boot (here: a mark of another boot id),
# the tree may have lost what the crash caught unwritten (here: a file
# cut short), so the first sandbox of it makes it again from the blobs.
@test "a tree made before the last boot, maybe torn by a crash, is made again from its blobs at the next create, then synced and no longer marked" {
	local hex tree mark
	sbx-image pull "$R/t/app:v1" >/dev/null
	hex=$(sbx-image inspect "$R/t/app:v1" | jq -r '.digest | ltrimstr("sha256:")')
	tree=$SBX_IMAGE_DIR/rootfs/$hex
	mark=$SBX_IMAGE_DIR/unsynced/$hex
	assert_equal "$(cat "$mark")" "$(cat /proc/sys/kernel/random/boot_id)"
	# In this boot it is used as it is.
	: >"$tree/app/top"
	sbx-create -s a.json --image "$R/t/app:v1" >/dev/null
	run sbx-exec -s a.json -- cat /app/top
	assert_output ''
	sbx-kill -s a.json >/dev/null
	# After another boot it is made again.
	echo 00000000-0000-4000-8000-000000000000 >"$mark"
	sbx-create -s b.json --image "$R/t/app:v1" >/dev/null
	run sbx-exec -s b.json -- cat /app/top /app/keep
	assert_success
	assert_output $'top\nkeep'
	[ ! -e "$mark" ]
	[ -z "$(find "$SBX_IMAGE_DIR/rootfs" -mindepth 1 -maxdepth 1 -name '.tmp-*')" ]
	sbx-kill -s b.json >/dev/null
}

@test "ls and inspect say what is stored; rm of one name keeps the blobs another uses" {
	sbx-image pull "$R/t/app:v1" >/dev/null
	sbx-image pull "$R/t/app@$IMG_V1" >/dev/null
	run --separate-stderr sbx-image ls
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	jq_true -s "map(select(.image == \"$R/t/app:v1\")) | length == 1 and
	    (.[0] | .layers == 2 and .size > 0 and (.pulled_at | test(\"Z$\")))" \
	    <<<"$output"
	run --separate-stderr sbx-image inspect "$R/t/app:v1"
	assert_success
	jq_true '.config.Env[1] == "FOO=from-image" and .os == "linux" and
	    .architecture == "amd64" and (.layers | length) == 2' <<<"$output"
	sbx-image rm "$R/t/app:v1" >/dev/null
	[ "$(ls "$SBX_IMAGE_DIR/blobs/sha256" | wc -l)" -eq 4 ]
	run --separate-stderr sbx-image rm "$R/t/app:v1"
	assert_failure 3
	assert_equal "$stderr" "sbx-image: no image '$R/t/app:v1' in the store (sbx-image pull $R/t/app:v1)"
}

@test "a corrupt blob is refused and nothing is named; the next pull is whole" {
	# Corrupt a layer in the registry's own storage (it serves it as is).
	dir=$SBX_TEST_REGISTRY_DIR/storage/docker/registry/v2/blobs/sha256
	top=$(sbx-image pull "$R/t/app:v1" | jq -r '.layers[1]')
	rm -rf "$SBX_IMAGE_DIR"
	f=$dir/${top:7:2}/${top#sha256:}/data
	cp "$f" "$BATS_TEST_TMPDIR/good"
	printf X | dd of="$f" bs=1 seek=30 conv=notrunc 2>/dev/null
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	cp "$BATS_TEST_TMPDIR/good" "$f"
	assert_failure 6
	[[ $stderr == "sbx-image: blob $top of 't/app' is corrupt: what came has digest sha256:"* ]]
	[ ! -e "$SBX_IMAGE_DIR/blobs/sha256/${top#sha256:}" ]
	[ -z "$(ls -A "$SBX_IMAGE_DIR/rootfs" 2>/dev/null)" ]
	run --separate-stderr sbx-image ls
	assert_output ''
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_success
}

@test "three layers: each blob named by its digest, later layers' whiteouts applied, nothing written out of the tree" {
	run --separate-stderr sbx-image pull "$R/t/three:v1"
	assert_success
	jq_true ".digest == \"$IMG_3\" and (.layers | length) == 3 and
	    .fetched == 4" <<<"$output"
	for f in "$SBX_IMAGE_DIR"/blobs/sha256/*; do
		assert_equal "$(sha256sum <"$f" | cut -d' ' -f1)" "${f##*/}"
	done
	assert_equal "$(ls -A "$SBX_IMAGE_DIR/blobs/sha256" | wc -l)" 5
	root=$(jq_str .rootfs <<<"$output")
	assert_equal "$(cat "$root/opt/m/f")" m
	[ ! -e "$root/opt/gone" ]
	[ ! -e "$root/opt/d/f" ]
	assert_equal "$(cat "$root/opt/d/g")" last
	[ -L "$root/bin" ] # the base layer's link to usr/bin
	[ -x "$root/bin/sh" ]
	# The symlink out of the tree was replaced by the directory.
	[ -d "$root/esc" ]
	[ ! -L "$root/esc" ]
	assert_equal "$(cat "$root/esc/pwned")" pwned
	[ -z "$(ls -A "$BATS_FILE_TMPDIR/outside")" ]
	[ -z "$(ls -A "$SBX_IMAGE_DIR/rootfs" | grep -v "^${IMG_3#sha256:}\$")" ]
}

@test "layers across each other: hard links and paths to the files below, a directory's owner, mode and attributes from above, whiteouts" {
	run --separate-stderr sbx-image pull "$R/t/across:v1"
	assert_success
	root=$(jq_str .rootfs <<<"$output")
	# Through the symlinks below (relative, absolute: inside the tree),
	# which stay.
	[ -L "$root/s" ]
	[ -L "$root/abs" ]
	assert_equal "$(cat "$root/d/viaimplicit")" si
	assert_equal "$(cat "$root/d/viaabs")" sa
	assert_equal "$(cat "$root/d/a")" a
	# The directory below, its owner, mode and attributes from above.
	assert_equal "$(stat -c '%a %u:%g' "$root/d")" "750 1234:5678"
	assert_equal "$(python3 -c 'import os, sys
print(sorted(os.listxattr(sys.argv[1])))' "$root/d")" "['user.low', 'user.up']"
	# Hard links to a file of the layer below, and of the one below that;
	# the linked file whited out, its other name stays.
	assert_equal "$(stat -c '%a %u:%g %h' "$root/up/link")" "640 7:8 1"
	assert_equal "$(cat "$root/up/link")" T
	[ ! -e "$root/hl/target" ]
	assert_equal "$(stat -c %i "$root/l2")" "$(stat -c %i "$root/d/b")"
	assert_equal "$(stat -c %h "$root/d/b")" 2
	# A directory below whited out; a file whited out, then made again.
	[ ! -e "$root/e" ]
	assert_equal "$(cat "$root/x")" x2
	# Opaque: only what the layer put there; not opaque: both.
	[ ! -e "$root/y/f" ]
	assert_equal "$(cat "$root/y/g")" g
	assert_equal "$(cat "$root/z/keep")$(cat "$root/z/new")" kn
	assert_equal "$(find "$root" -name '.wh.*')" ''
	assert_equal "$(ls -A "$SBX_IMAGE_DIR/rootfs")" "${IMG_X#sha256:}"
}

@test "not root: the same layers give the same tree but its owners; a path through a lower layer's symlink goes where it leads" {
	command -v setpriv >/dev/null || skip "no setpriv"
	d=$(mktemp -d /tmp/sbx-nonroot.XXXXXX)
	NONROOT_DIR=$d
	chmod 755 "$d"
	chown 65534:65534 "$d"
	run --separate-stderr setpriv --reuid=65534 --regid=65534 \
	    --clear-groups env HOME="$d" XDG_CONFIG_HOME="$d/config" \
	    SBX_IMAGE_DIR="$d/store" sbx-image pull "$R/t/across:v1"
	assert_success
	root=$(jq_str .rootfs <<<"$output")
	[ -L "$root/s" ]
	[ -L "$root/abs" ]
	assert_equal "$(cat "$root/d/viaimplicit")$(cat "$root/d/viaabs")" sisa
	assert_equal "$(stat -c '%a %u' "$root/d")" "750 65534"
	assert_equal "$(stat -c %i "$root/l2")" "$(stat -c %i "$root/d/b")"
	assert_equal "$(cat "$root/up/link")" T
	[ ! -e "$root/e" ]
	[ ! -e "$root/y/f" ]
	[ ! -e "$root/hl/target" ]
	assert_equal "$(find "$d/store/rootfs" -mindepth 1 -maxdepth 1 | wc -l)" 1
}

# tests/lib/slow-proxy.py before the registry, holding blob $1 (at most
# 10 s; $2: its WATCH glob): PROXY_PID, its port in port, its log in log.
slow_proxy() {
	log=$BATS_TEST_TMPDIR/proxy.log
	python3 "$BATS_TEST_DIRNAME/lib/slow-proxy.py" "$BATS_TEST_TMPDIR/port" \
	    "$R" "$log" "$1" 10 ${2:+"$2"} >/dev/null 2>&1 3>&- &
	PROXY_PID=$!
	for ((i = 0; i < 100; i++)); do
		[ -s "$BATS_TEST_TMPDIR/port" ] && break
		sleep 0.05
	done
	port=$(cat "$BATS_TEST_TMPDIR/port")
}

@test "layers are unpacked as their blobs come: the top one is in while the bottom one's blob has not come" {
	first=$(sbx-image pull "$R/t/three:v1" | jq -r '.layers[0]')
	[ -n "$first" ]
	rm -rf "$SBX_IMAGE_DIR"
	# The bottom layer's blob held until the top layer's file is in the
	# store's temporary tree (its directory, 2), or 10 s.
	slow_proxy "$first" "$SBX_IMAGE_DIR/rootfs/.tmp-*/2/opt/d/g"
	run --separate-stderr sbx-image pull "127.0.0.1:$port/t/three:v1"
	assert_success
	jq_true ".digest == \"$IMG_3\"" <<<"$output"
	root=$(jq_str .rootfs <<<"$output")
	run grep -x -e seen -e timeout "$log"
	assert_output seen
	assert_equal "$(cat "$root/opt/d/g")" last
	[ ! -e "$root/opt/d/f" ]
	assert_equal "$(ls -A "$SBX_IMAGE_DIR/rootfs")" "${IMG_3#sha256:}"
}

@test "a corrupt layer of three: exit 6, no blob, no tree, no temporary file, no name" {
	dir=$SBX_TEST_REGISTRY_DIR/storage/docker/registry/v2/blobs/sha256
	mid=$(sbx-image pull "$R/t/three:v1" | jq -r '.layers[1]')
	[ -n "$mid" ]
	rm -rf "$SBX_IMAGE_DIR"
	f=$dir/${mid:7:2}/${mid#sha256:}/data
	cp "$f" "$BATS_TEST_TMPDIR/good"
	printf X | dd of="$f" bs=1 seek=30 conv=notrunc 2>/dev/null
	run --separate-stderr sbx-image pull "$R/t/three:v1"
	cp "$BATS_TEST_TMPDIR/good" "$f"
	assert_failure 6
	[[ $stderr == "sbx-image: blob $mid of 't/three' is corrupt: what came has digest sha256:"* ]]
	# Nothing: not the config nor the layers that came whole.
	assert_equal "$(ls -A "$SBX_IMAGE_DIR/blobs/sha256")" ''
	assert_equal "$(ls -A "$SBX_IMAGE_DIR/rootfs" 2>/dev/null)" ''
	assert_equal "$(find "$SBX_IMAGE_DIR" -mindepth 1 -not -name .lock \
	    -not -path '*/blobs' -not -path '*/blobs/sha256' \
	    -not -path '*/rootfs')" ''
	run --separate-stderr sbx-image ls
	assert_success
	assert_output ''
	run --separate-stderr sbx-image pull "$R/t/three:v1"
	assert_success
}

# A layer's gzip in two members, the tar cut between them (as pigz -i or
# a concatenation writes it); and one cut short or damaged after its
# header, under a digest that is right (a registry serves what it was
# given).
gz_members() {
	local f
	f=$(mktemp) && cat >"$f" || return 1
	head -c 3000 "$f" | gzip -n -c
	tail -c +3001 "$f" | gzip -n -c
	rm -f "$f"
}
gz_short() { gzip -n -c | head -c 1500; }
gz_bad() {
	local f
	f=$(mktemp) && gzip -n -c >"$f" || return 1
	printf 'XXXXXXXX' | dd of="$f" bs=1 seek=600 conv=notrunc 2>/dev/null
	cat "$f"
	rm -f "$f"
}

@test "a layer's gzip: members one after another are one tar; cut short or damaged is exit 6, nothing named" {
	local w=$BATS_TEST_TMPDIR/gz
	mkdir -p "$w/data"
	seq 1 4000 >"$w/data/lines"
	head -c 20000 /dev/urandom >"$w/data/noise"
	SBX_TEST_LAYER_GZIP=gz_members sbx_registry_push_image t/gz members \
	    '{}' "$BATS_FILE_TMPDIR/layers/base" "$w" >/dev/null
	run --separate-stderr sbx-image pull "$R/t/gz:members"
	assert_success
	root=$(jq_str .rootfs <<<"$output")
	cmp "$w/data/lines" "$root/data/lines"
	cmp "$w/data/noise" "$root/data/noise"
	[ -x "$root/bin/sh" ]
	for how in short bad; do
		rm -rf "$SBX_IMAGE_DIR"
		SBX_TEST_LAYER_GZIP=gz_$how sbx_registry_push_image t/gz $how \
		    '{}' "$w" >/dev/null
		run --separate-stderr sbx-image pull "$R/t/gz:$how"
		assert_failure 6
		[[ $stderr == "sbx-image: layer sha256:"*": "* ]]
		[[ $stderr == *gzip* ]]
		assert_equal "${#lines[@]}" 0
		assert_equal "$(ls -A "$SBX_IMAGE_DIR/blobs/sha256")" ''
		assert_equal "$(ls -A "$SBX_IMAGE_DIR/rootfs" 2>/dev/null)" ''
		run --separate-stderr sbx-image ls
		assert_output ''
	done
}

# A layer's blob as a plain tar, or zstd, whatever its media type says;
# and a tar followed by more than the unpack's buffer of zeros.
layer_plain() { cat; }
layer_zstd() { zstd -q -c; }
layer_padded() { cat; head -c 3000000 /dev/zero; }

@test "a layer's blob as gzip, a plain tar or zstd, larger than the unpack's buffer, or with zeros after its tar: every byte in place" {
	local w=$BATS_TEST_TMPDIR/big how
	mkdir -p "$w/data"
	head -c 3000000 /dev/urandom >"$w/data/noise"
	seq 1 400000 >"$w/data/lines"
	for how in gzip plain zstd padded; do
		rm -rf "$SBX_IMAGE_DIR"
		if [ "$how" = gzip ]; then
			sbx_registry_push_image t/big $how '{}' \
			    "$BATS_FILE_TMPDIR/layers/base" "$w" >/dev/null
		else
			SBX_TEST_LAYER_GZIP=layer_$how sbx_registry_push_image \
			    t/big $how '{}' "$BATS_FILE_TMPDIR/layers/base" \
			    "$w" >/dev/null
		fi
		run --separate-stderr sbx-image pull -q "$R/t/big:$how"
		assert_success
		root=$(jq_str .rootfs <<<"$output")
		cmp "$w/data/noise" "$root/data/noise"
		cmp "$w/data/lines" "$root/data/lines"
		[ -x "$root/bin/sh" ]
	done
}

@test "layers are fetched at once: another blob is asked for while the first layer's is held" {
	first=$(sbx-image pull "$R/t/three:v1" | jq -r '.layers[0]')
	[ -n "$first" ]
	rm -rf "$SBX_IMAGE_DIR"
	slow_proxy "$first"
	run --separate-stderr sbx-image pull "127.0.0.1:$port/t/three:v1"
	assert_success
	jq_true ".digest == \"$IMG_3\"" <<<"$output"
	# Some other blob was opened while the held one was open.
	run awk -v f="$first" '$2 == f && $1 == "open" { held = 1 }
	    held && $2 != f && $1 == "open" { o = 1 }
	    $2 == f && $1 == "done" { print (o ? "parallel" : "one at a time"); exit }' "$log"
	assert_output parallel
}

@test "pull on a terminal: a line of the blobs and bytes that came on stderr; none with -q" {
	run script -qec "sbx-image pull '$R/t/three:v1' 2>&1 >/dev/null" /dev/null
	assert_success
	assert_output --partial "sbx-image: 4/4 files, "
	assert_output --partial "100%"
	rm -rf "$SBX_IMAGE_DIR"
	run script -qec "sbx-image pull -q '$R/t/three:v1' 2>&1 >/dev/null" /dev/null
	assert_success
	assert_output ''
}

@test "bad input: a bad reference, a missing tag, an unknown image for sbx-create" {
	run --separate-stderr sbx-image pull 'Not A Ref'
	assert_failure 2
	assert_equal "$stderr" "sbx-image: invalid image reference 'Not A Ref'"
	run --separate-stderr sbx-image pull "$R/t/app:nope"
	assert_failure 3
	assert_equal "$stderr" "sbx-image: no image '$R/t/app' tagged 'nope' in the registry"
	run --separate-stderr sbx-create -s s.json --image "$R/t/app:nope"
	assert_failure 2
	assert_equal "$stderr" "sbx-create: image '$R/t/app:nope' is neither a directory nor an image of the store
hint: sbx-image pull $R/t/app:nope"
	[ ! -e s.json ]
	run --separate-stderr sbx-image pull --platform amd64 "$R/t/app:multi"
	assert_failure 2
}

@test "sbx-create --image: an unreadable store index is said as it is, not as a missing image" {
	mkdir -p "$SBX_IMAGE_DIR"
	echo '{"images": {' >"$SBX_IMAGE_DIR/images.json"
	run --separate-stderr sbx-create -s s.json --image "$R/t/app:v1"
	assert_failure 6
	[[ $stderr == "sbx-create: '$SBX_IMAGE_DIR/images.json' is not valid JSON"* ]]
	[ ! -e s.json ]
	run --separate-stderr sbx-create -s s.json --image 'Not A Ref'
	assert_failure 6
	echo '{"images": {}}' >"$SBX_IMAGE_DIR/images.json"
	run --separate-stderr sbx-create -s s.json --image 'Not:A:Ref'
	assert_failure 2
	assert_equal "$stderr" "sbx-create: invalid image reference 'Not:A:Ref'"
	[ ! -e s.json ]
}

@test "a registry that wants a password: none is exit 5; the credentials file's is used, never shown" {
	local conf="auth:
  htpasswd:
    realm: sbx-test
    path: $SBX_TEST_REGISTRY_DIR/htpasswd"
	python3 -c 'import crypt, sys
print("u:" + crypt.crypt("s3cret-pw", crypt.mksalt(crypt.METHOD_BLOWFISH)))' \
	    >"$SBX_TEST_REGISTRY_DIR/htpasswd" 2>/dev/null
	sbx_registry_restart "$conf"
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_failure 5
	assert_equal "$stderr" "sbx-image: registry '$R' wants credentials (a 0600 file credentials/registry-$R holding user:password, or docker login)"
	mkdir -p "$XDG_CONFIG_HOME/sbx/credentials"
	(umask 077 && echo u:wrong >"$XDG_CONFIG_HOME/sbx/credentials/registry-$R")
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_failure 5
	(umask 077 && echo u:s3cret-pw >"$XDG_CONFIG_HOME/sbx/credentials/registry-$R")
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_success
	# Docker's config.json works too.
	rm "$XDG_CONFIG_HOME/sbx/credentials/registry-$R"
	rm -rf "$SBX_IMAGE_DIR"
	mkdir -p "$HOME/.docker"
	jq -n --arg r "$R" --arg a "$(printf u:s3cret-pw | base64)" \
	    '{auths: {($r): {auth: $a}}}' >"$HOME/.docker/config.json"
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_success
	! grep -rq s3cret-pw "$SBX_IMAGE_DIR"
	sbx_registry_restart ''
}

@test "Docker's token auth: a Bearer token from the registry's realm, with the user's credentials when it asks" {
	sbx_registry_token u tok-pw
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_failure 5
	assert_equal "$stderr" "sbx-image: registry '$R' refused an anonymous token: HTTP 401"
	mkdir -p "$XDG_CONFIG_HOME/sbx/credentials"
	(umask 077 && echo u:tok-pw >"$XDG_CONFIG_HOME/sbx/credentials/registry-$R")
	run --separate-stderr sbx-image pull "$R/t/app:v1"
	assert_success
	jq_true '.fetched == 3' <<<"$output"
	# The token server was asked for this repository's pull scope, with
	# the credentials.
	run jq -s -c 'map(select(.granted)) | .[0] | [.basic, .scope[0], .service]' \
	    "$SBX_TEST_REGISTRY_DIR/token.log"
	assert_output '[true,"repository:t/app:pull","sbx-test-registry"]'
	sbx_registry_restart ''
}

# --- import and export ------------------------------------------------

# Nothing of an import left: no name, no blob, no tree, no stage.
store_empty() {
	run --separate-stderr sbx-image ls
	assert_output ''
	[ -z "$(ls -A "$SBX_IMAGE_DIR/blobs/sha256" 2>/dev/null)" ]
	[ -z "$(ls -A "$SBX_IMAGE_DIR/rootfs" 2>/dev/null)" ]
}

@test "export, rm, import: the same manifest digest, and a sandbox runs from it" {
	sbx-image pull "$R/t/app:v1" >/dev/null
	run sbx-image export -o app.tar "$R/t/app:v1"
	assert_success
	assert_output ''
	tar tf app.tar >names
	grep -qx oci-layout names
	grep -qx index.json names
	grep -qx manifest.json names
	grep -qx "blobs/sha256/${IMG_V1#sha256:}" names
	sbx-image rm "$R/t/app:v1" >/dev/null
	store_empty
	run --separate-stderr sbx-image import app.tar
	assert_success
	jq_true ".image == \"$R/t/app:v1\" and .digest == \"$IMG_V1\" and
	    .format == \"oci\" and (.layers | length) == 2" <<<"$output"
	run --separate-stderr sbx-create -s s.json --image "$R/t/app:v1"
	assert_success
	run --separate-stderr sbx-exec -s s.json -- sh -c 'cat /app/top; echo $FOO'
	assert_success
	assert_output "top
from-image"
	sbx-kill -s s.json >/dev/null
	# Through a pipe, under another name (-t).
	run --separate-stderr sh -c "sbx-image export '$R/t/app:v1' |
	    sbx-image import -t other:v2 -"
	assert_success
	jq_true ".image == \"docker.io/library/other:v2\" and
	    .digest == \"$IMG_V1\"" <<<"$output"
}

@test "export refuses a terminal and an unknown image, writing nothing" {
	run --separate-stderr script -qec "sbx-image export '$R/t/app:v1'" /dev/null
	assert_failure 2
	[[ $output == *"sbx-image: refusing to write a tar to a terminal"* ]]
	run --separate-stderr sbx-image export -o x.tar "$R/t/app:nope"
	assert_failure 3
	assert_equal "$stderr" "sbx-image: no image '$R/t/app:nope' in the store (sbx-image pull $R/t/app:nope)"
	[ -z "$(ls -d x.tar* 2>/dev/null)" ]
}

@test "import of a root filesystem, a directory, a tar and a gzip'd tar on stdin: one layer, a sandbox runs from it" {
	base=$BATS_FILE_TMPDIR/layers/base
	run --separate-stderr sbx-image import -t rootdir "$base"
	assert_success
	jq_true '.image == "docker.io/library/rootdir:latest" and
	    .format == "rootfs" and (.layers | length) == 1' <<<"$output"
	tar -C "$base" --numeric-owner -cf root.tar .
	run --separate-stderr sbx-image import -t roottar:1 root.tar
	assert_success
	jq_true '.image == "docker.io/library/roottar:1"' <<<"$output"
	gzip -c root.tar >root.tgz
	run --separate-stderr sh -c 'sbx-image import -t rootgz - <root.tgz'
	assert_success
	dg=$(jq_str .digest <<<"$output")
	# The tar decompressed is the layer: the same image either way.
	assert_equal "$(sbx-image inspect roottar:1 | jq_str .digest)" "$dg"
	for img in rootdir roottar:1 rootgz; do
		run --separate-stderr sbx-create -s s.json --image "$img"
		assert_success
		run --separate-stderr sbx-exec -s s.json -- sh -c \
		    'cat /app/keep; stat -c %u:%g /app/keep; echo $PATH'
		assert_success
		assert_output "keep
1234:5678
/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		sbx-kill -s s.json >/dev/null
	done
}

@test "import of bad input: one line, exit 2 (6 for a digest mismatch), nothing stored" {
	sbx-image pull "$R/t/app:v1" >/dev/null
	sbx-image export -o app.tar "$R/t/app:v1"
	rm -rf "$SBX_IMAGE_DIR"
	top=$(tar tf app.tar | grep blobs/ | tail -1)
	# Truncated.
	head -c $(($(stat -c %s app.tar) / 2)) app.tar >half.tar
	run --separate-stderr sbx-image import half.tar
	assert_failure 2
	[[ $stderr == "sbx-image: 'half.tar' is not a whole tar archive: "* ]]
	[ "${#stderr_lines[@]}" -eq 1 ]
	store_empty
	# Not a tar at all.
	head -c 4096 /dev/urandom >junk.tar
	run --separate-stderr sbx-image import -t x junk.tar
	assert_failure 2
	[[ $stderr == "sbx-image: 'junk.tar' is not a tar archive: "* ]]
	store_empty
	# A blob whose bytes are not its name's.
	mkdir x
	tar -C x -xf app.tar
	printf X | dd of="x/$top" bs=1 seek=100 conv=notrunc 2>/dev/null
	tar -C x -cf bad.tar .
	run --separate-stderr sbx-image import bad.tar
	assert_failure 6
	[[ $stderr == "sbx-image: blob sha256:${top##*/} of 'bad.tar' is corrupt: what it holds has digest sha256:"* ]]
	store_empty
	# A blob missing.
	rm "x/$top"
	tar -C x -cf miss.tar .
	run --separate-stderr sbx-image import miss.tar
	assert_failure 2
	assert_equal "$stderr" "sbx-image: blob sha256:${top##*/} is missing from 'miss.tar'"
	store_empty
	# No name: a root filesystem has none of its own.
	run --separate-stderr sbx-image import "$BATS_FILE_TMPDIR/layers/base"
	assert_failure 2
	assert_equal "$stderr" "sbx-image: '$BATS_FILE_TMPDIR/layers/base' names no image: give it one with -t NAME"
	run --separate-stderr sbx-image import -t 'Bad Name' app.tar
	assert_failure 2
	run --separate-stderr sbx-image import -t x app.tar extra
	assert_failure 2
	store_empty
}

@test "a layer's owners are its numeric ids, not the host's ids for the names it also carries" {
	base=$BATS_FILE_TMPDIR/layers/base
	tar -C "$base" --owner=nobody:1234 --group=nogroup:5678 -cf named.tar .
	sbx-image import -t named named.tar >/dev/null
	root=$(sbx-image inspect named | jq_str .rootfs)
	assert_equal "$(stat -c %u:%g "$root/app/del")" 1234:5678
}
