#!/usr/bin/env bats
# sbx-gc, what only the local backend has: sandboxes still being created
# (a directory in the store without meta.json), and no store at all. What
# every backend does is in conformance/sbx-gc.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
# Whatever a test left.
teardown() {
	if [ -e "$BATS_TEST_TMPDIR/holder" ]; then
		kill "$(cat "$BATS_TEST_TMPDIR/holder")" 2>/dev/null || true
	fi
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	rm -rf "${SBX_LOCAL_DIR:?}"/0123456789ab
	# The empty cgroups of sandboxes a test ended elsewhere.
	if [ -e "$BATS_TEST_TMPDIR/cgroup-ids" ]; then
		while read -r id; do
			find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d \
			    -path "*/sbx/$id" -exec rmdir {} + 2>/dev/null || true
		done <"$BATS_TEST_TMPDIR/cgroup-ids"
	fi
}

# The status sbx-ls gives sandbox $1 (empty when not listed).
ls_status() {
	sbx-ls -j | jq -r --arg id "$1" 'select(.id == $id) | .status'
}

@test "sbx-gc never kills a sandbox whose creation has not finished" {
	new_sandbox
	local id dir
	id=$(sid)
	dir=$(jq -r .ref.dir s.json)
	# Creation in progress: the directory and init exist, meta.json not yet.
	mv "$dir/meta.json" meta.json
	mkdir states
	run --separate-stderr sbx-gc -g 0 -o 0 -d states
	assert_success
	assert_output ""
	[ "$stderr" = "sbx-gc: 0 killed, 1 kept (grace), 1 checked" ]
	[ -d "$dir" ]
	mv meta.json "$dir/meta.json"
	[ "$(ls_status "$id")" = running ]
}

@test "sbx-gc takes a creation that died long ago for dead" {
	mkdir "$SBX_LOCAL_DIR/0123456789ab"
	touch -d '1 hour ago' "$SBX_LOCAL_DIR/0123456789ab"
	run --separate-stderr sbx-gc
	assert_success
	[ "$output" = '{"id":"0123456789ab","reason":"dead","action":"killed"}' ]
	[ ! -e "$SBX_LOCAL_DIR/0123456789ab" ]
}

# A process the create left (sbx-netd making its socket) writes in the
# directory after its birth: a later mtime (here set ahead, as a birth
# cannot be set back) does not make it younger.
@test "a sandbox being created is dated by its directory's birth, not by what is written there since" {
	local now
	mkdir "$SBX_LOCAL_DIR/0123456789ab"
	now=$(date +%s)
	touch -d '+1 hour' "$SBX_LOCAL_DIR/0123456789ab"
	run --separate-stderr sbx-ls -j
	assert_success
	jq_true --argjson now "$now" 'select(.id == "0123456789ab") |
	    .creating and .created_at_epoch >= $now - 5 and
	    .created_at_epoch <= $now + 5' <<<"$output"
}

@test "sbx-gc with no store yet exits 0 and creates nothing" {
	run --separate-stderr env SBX_LOCAL_DIR="$BATS_TEST_TMPDIR/none" sbx-gc -o 0
	assert_success
	assert_output ""
	[ "$stderr" = "sbx-gc: 0 killed, 0 kept (grace), 0 checked" ]
	[ ! -e "$BATS_TEST_TMPDIR/none" ]
}

@test "sbx-gc frees the uid slot and the name of a sandbox whose kill was killed after moving it to the trash" {
	local id slot
	new_sandbox --name trashed
	id=$(sid)
	slot=$(jq -r .slot "$SBX_LOCAL_DIR/$id/meta.json")
	[ "$(cat "$SBX_LOCAL_DIR/.slots/$slot")" = "$id" ]
	[ -L "$SBX_LOCAL_DIR/.names/trashed" ]
	# What sbx-kill killed after its rename leaves: processes gone,
	# the directory in the trash, its slot and name still taken.
	kill -9 "$(init_pid)"
	wait_status "$id" dead
	mkdir -p "$SBX_LOCAL_DIR/.trash"
	mv "$SBX_LOCAL_DIR/$id" "$SBX_LOCAL_DIR/.trash/$id.1"
	run --separate-stderr sbx-gc -g 0
	assert_success
	[ -z "$(ls -A "$SBX_LOCAL_DIR/.trash")" ]
	[ ! -e "$SBX_LOCAL_DIR/.slots/$slot" ]
	[ ! -e "$SBX_LOCAL_DIR/.names/trashed" ]
	! grep -rqx -- "$id" "$SBX_LOCAL_DIR/.slots" || fail "a slot still names $id"
}

@test "sbx-gc ends a sandbox whose kill was killed after its cgroup.kill and its move to the trash: no process, cgroup or slot left" {
	local id slot pid c
	new_sandbox
	id=$(sid)
	pid=$(init_pid)
	slot=$(jq -r .slot "$SBX_LOCAL_DIR/$id/meta.json")
	# The kill leaves the processes' end to the trash's remover: here
	# the remover never began, and the processes still run (as they
	# would in a kernel slow to end them).
	mkdir -p "$SBX_LOCAL_DIR/.trash"
	mv "$SBX_LOCAL_DIR/$id" "$SBX_LOCAL_DIR/.trash/$id.1"
	alive "$pid"
	run --separate-stderr sbx-gc -g 0
	assert_success
	[ -z "$(ls -A "$SBX_LOCAL_DIR/.trash")" ]
	dead "$pid"
	for c in /sys/fs/cgroup/*/sbx/"$id"; do
		[ ! -e "$c" ] || fail "cgroup left: $c"
	done
	[ ! -e "$SBX_LOCAL_DIR/.slots/$slot" ]
}

# The cgroups (every hierarchy's) of sandbox id $1.
cgroups_of() {
	find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d -path "*/sbx/$1"
}

# A sandbox of another store, dead (its init killed: its cgroups empty),
# that store then removed (rm -rf) with it: its id on stdout.
dead_elsewhere() {
	local other id pid i
	other=$(mktemp -d /tmp/sbx-test.XXXXXX)
	chmod 711 "$other"
	SBX_LOCAL_DIR=$other sbx-create -s "$BATS_TEST_TMPDIR/$1.json" >/dev/null
	id=$(sid "$BATS_TEST_TMPDIR/$1.json")
	pid=$(init_pid "$BATS_TEST_TMPDIR/$1.json")
	echo "$id" >>"$BATS_TEST_TMPDIR/cgroup-ids"
	kill -KILL "$pid"
	for ((i = 0; i < 200; i++)); do
		! grep -qs "populated 1" $(cgroups_of "$id" | sed 's,$,/cgroup.events,') && break
		sleep 0.02
	done
	rm -rf "$other"
	echo "$id"
}

@test "sbx-gc removes the empty cgroups a sandbox of a removed store left, made over 10 minutes ago; not a live or young one's" {
	[ "$(id -u)" = 0 ] || skip "the sandboxes' cgroups are root's"
	local old young live c
	old=$(dead_elsewhere old)
	young=$(dead_elsewhere young)
	new_sandbox
	live=$(sid)
	[ -n "$(cgroups_of "$old")" ]
	[ -n "$(cgroups_of "$young")" ]
	cgroups_of "$old" | xargs touch -d '11 minutes ago'
	cgroups_of "$live" | xargs touch -d '1 hour ago'
	run --separate-stderr sbx-gc -g 0
	assert_success
	[ -z "$(cgroups_of "$old")" ]
	# Made just now: it may be a create's, its init not in it yet.
	[ -n "$(cgroups_of "$young")" ]
	[ -n "$(cgroups_of "$live")" ]
	[ "$(ls_status "$live")" = running ]
	run sx echo alive
	assert_output alive
	# A dry run removes nothing.
	cgroups_of "$young" | xargs touch -d '11 minutes ago'
	run --separate-stderr sbx-gc -n -g 0
	assert_success
	[ -n "$(cgroups_of "$young")" ]
	run --separate-stderr sbx-gc -g 0
	[ -z "$(cgroups_of "$young")" ]
}

@test "sbx-gc removes what a killed remover left in the trash" {
	local id holder c
	new_sandbox
	id=$(sid)
	# The kill's remover, killed before it began: the trash's lock is
	# held by a stand-in, which is then killed.
	holder=$(hold_trash)
	sbx-kill -q -s s.json >/dev/null
	# And one killed half-way: a tree partly removed.
	mkdir -p "$SBX_LOCAL_DIR/.trash/0123456789ab.1/upper/a/b"
	touch "$SBX_LOCAL_DIR/.trash/0123456789ab.1/upper/a/b/f"
	[ "$(ls "$SBX_LOCAL_DIR/.trash" | wc -l)" -eq 2 ]
	release_trash "$holder" KILL
	run --separate-stderr sbx-gc -g 0
	assert_success
	assert_output ""
	[ "$stderr" = "sbx-gc: 0 killed, 0 kept (grace), 0 checked" ]
	[ -z "$(ls -A "$SBX_LOCAL_DIR/.trash")" ]
	[ ! -e "$SBX_LOCAL_DIR/$id" ]
	for c in /sys/fs/cgroup/*/sbx/"$id"; do
		[ ! -e "$c" ] || fail "cgroup left: $c"
	done
}

@test "sbx-gc empties a trash of more entries than it has removers (each takes every 8th): all gone, their uid slots freed" {
	local i id
	mkdir -p "$SBX_LOCAL_DIR/.trash" "$SBX_LOCAL_DIR/.slots"
	for ((i = 1; i <= 21; i++)); do
		id=$(printf 'fee%09x' "$i")
		mkdir -p "$SBX_LOCAL_DIR/.trash/$id.$i/upper/a"
		touch "$SBX_LOCAL_DIR/.trash/$id.$i/upper/a/f" "$SBX_LOCAL_DIR/.trash/$id.$i/status"
		echo "$id" >"$SBX_LOCAL_DIR/.slots/$((60000 + i))"
	done
	run --separate-stderr sbx-gc -g 0
	assert_success
	[ -z "$(ls -A "$SBX_LOCAL_DIR/.trash")" ] ||
		fail "left in the trash: $(ls -A "$SBX_LOCAL_DIR/.trash")"
	[ -z "$(ls "$SBX_LOCAL_DIR/.slots" | grep '^600')" ] ||
		fail "slots left: $(ls "$SBX_LOCAL_DIR/.slots")"
}
