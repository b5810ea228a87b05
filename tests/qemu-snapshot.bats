#!/usr/bin/env bats
# The qemu backend's snapshots (lib/qemu/snapshot.c): a VM's disk overlay
# copied while QEMU is stopped, its guest synced first; the VM runs on
# (or stays paused); a snapshot a sandbox or another snapshot stands on
# is not removed; sbx-snapshot killed mid-copy leaves the VM running and
# nothing a retry does not clean. Two VMs under TCG: the source and one
# made from its snapshot. What every backend does is in
# conformance/sbx-snapshot.bats (make check-qemu).
load lib/helper
load lib/registry
load lib/qemu

setup_file() {
	sbx_qemu_setup_file || return 1
	local r=$BATS_FILE_TMPDIR/root
	sbx_busybox_root "$r" || return 1
	# GNU find and sha256sum: an export lists and hashes with them.
	sbx_root_add_host_programs "$r" find sha256sum || return 1
	sbx-image import -q -t t/bb "$r" >/dev/null || return 1
	sbx-create -b qemu --image t/bb --memory 160M --name src \
	    -s "$BATS_FILE_TMPDIR/src.json" >/dev/null
}

teardown_file() {
	sbx-ls -b qemu -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	sbx_teardown_file
}

setup() {
	sbx_setup
	A=$BATS_FILE_TMPDIR/src.json
	SNAPS=$SBX_QEMU_DIR/.snapshots
}

# The QEMU pid of state file $1's VM.
qpid() {
	local qp
	read -r _ _ qp _ <"$(jq -r .ref.dir "$1")/keeper.pid"
	echo "$qp"
}
# File $2 of snapshot $1's disk, read on the host: its qcow2 chain made
# into a raw ext4, read by debugfs (no mount, no VM).
snap_cat() {
	local raw=$BATS_TEST_TMPDIR/raw.img
	qemu-img convert -U -O raw "$SNAPS/$1/disk.qcow2" "$raw" &&
		debugfs -R "cat $2" "$raw" 2>/dev/null
	rm -f "$raw"
}

@test "qemu: a snapshot holds what a command wrote just before it; the VM runs on, the same QEMU" {
	qp=$(qpid "$A")
	sbx-exec -s "$A" -- sh -c 'echo just-written >/root/f'
	img=$(ls_line "$(sid "$A")" | jq -r .image)
	[[ "$img" == *t/bb* ]]
	run --separate-stderr sbx-snapshot -s "$A" -n first
	assert_success
	jq_true --arg i "$img" '.backend == "qemu" and .name == "first" and
	    .memory == false and (.snapshot | test("^snp-[0-9a-f]{12}$")) and
	    .image == $i and (.layers | length == 1) and .pause_ms >= 0' <<<"$output"
	id=$(jq_str .snapshot <<<"$output")
	# Written to the disk by the guest's sync: read there, not in a VM.
	run snap_cat "$id" /root/f
	assert_output just-written
	# Read-only, and nothing of the copy left.
	[ "$(stat -c %a "$SNAPS/$id/disk.qcow2")" = 400 ]
	run ls -A "$SNAPS"
	refute_output --partial .snp-
	assert_equal "$(qpid "$A")" "$qp"
	run sbx-exec -s "$A" -- cat /root/f
	assert_success
	assert_output just-written
	jq_true '.status == "running"' <<<"$(ls_line "$(sid "$A")")"
	sbx-snapshot rm -b qemu first
}

@test "qemu: a snapshot of a suspended VM leaves it suspended" {
	sbx-pause -s "$A" >/dev/null
	run --separate-stderr sbx-snapshot -s "$A"
	assert_success
	id=$(jq_str .snapshot <<<"$output")
	jq_true '.status == "paused"' <<<"$(ls_line "$(sid "$A")")"
	sbx-pause -r -s "$A" >/dev/null
	run sbx-exec -s "$A" -- echo up
	assert_output up
	sbx-snapshot rm -b qemu "$id"
}

@test "qemu: rm of a snapshot fails (1) while a sandbox or a snapshot stands on it; --from has its files" {
	t=$BATS_TEST_TMPDIR/t.json
	n=$(sbx-snapshot ls -j -b qemu | wc -l)
	sbx-exec -s "$A" -- sh -c 'echo just-written >/root/f'
	first=$(sbx-snapshot -s "$A" -n base | jq -r .snapshot)
	[ -n "$first" ]
	tid=$(sbx-create -b qemu --from base -s "$t" | jq -r .id)
	[ -n "$tid" ] && [ "$tid" != null ]
	run sbx-exec -s "$t" -- cat /root/f
	assert_output just-written
	run --separate-stderr sbx-snapshot rm -b qemu base
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-snapshot: snapshot '$first' is in use by $tid" ]
	# A snapshot of it stands on first too (a qcow2 chain).
	sbx-exec -s "$t" -- sh -c 'echo second >/root/g'
	second=$(sbx-snapshot -s "$t" | jq -r .snapshot)
	jq_true --arg a "$second" --arg b "$first" '.layers == [$a, $b]' <"$SNAPS/$second/meta.json"
	sbx-kill -s "$t" >/dev/null
	run --separate-stderr sbx-snapshot rm -b qemu base
	assert_failure 1
	[ "$stderr" = "sbx-snapshot: snapshot '$first' is in use by $second" ]
	run snap_cat "$second" /root/g
	assert_output second
	run snap_cat "$second" /root/f
	assert_output just-written
	run sbx-snapshot rm -b qemu "$second" base
	assert_success
	[ "$(sbx-snapshot ls -j -b qemu | wc -l)" -eq "$n" ]
	[ ! -e "$SNAPS/$first" ] && [ ! -e "$SNAPS/$second" ]
	[ ! -e "$SNAPS/.names/base" ]
}

@test "qemu: sbx-snapshot killed mid-copy: the VM runs on, nothing listed; a retry cleans what it left" {
	command -v strace >/dev/null || fail "strace is not installed"
	n=$(sbx-snapshot ls -j -b qemu | wc -l)
	sbx-exec -s "$A" -- sh -c 'head -c 4000000 /dev/urandom >/root/big'
	# Killed as it copies the disk: QEMU stopped then.
	run strace -qq -o /dev/null -e inject=copy_file_range:signal=KILL \
	    sbx-snapshot -s "$A" -n killed
	[ "$status" -eq 137 ] || fail "not killed mid-copy: $status: $output"
	[ "$(sbx-snapshot ls -j -b qemu | wc -l)" -eq "$n" ]
	[ ! -e "$SNAPS/.names/killed" ]
	# Its guard continued the VM (bounded: a VM left stopped would
	# hang the exec).
	run timeout 120 sbx-exec -s "$A" -- echo up
	assert_success
	assert_output up
	run --separate-stderr sbx-snapshot -s "$A" -n killed
	assert_success
	jq_true '.name == "killed"' <<<"$output"
	run ls -A "$SNAPS"
	refute_output --partial .snp-
	[ "$(sbx-snapshot ls -j -b qemu | wc -l)" -eq $((n + 1)) ]
	sbx-snapshot rm -b qemu killed
}

@test "qemu: export compares a VM of the snapshot with one of its image: what changed and what went, nothing left running" {
	sbx-exec -s "$A" -- sh -c 'mkdir -p /opt/d && echo new >/opt/d/new &&
	    chmod 751 /opt/d/new && ln -s d/new /opt/l && rm /usr/bin/vi &&
	    echo more >>/etc/passwd'
	sbx-snapshot -s "$A" -n port >/dev/null
	before=$(sbx-ls -j -b qemu | jq -s length)
	sbx-snapshot export -b qemu port >snap.tar 2>err || fail "export: $(cat err)"
	[ ! -s err ]
	[ "$(sbx-ls -j -b qemu | jq -s length)" -eq "$before" ]
	tar -xOf snap.tar sbx-snapshot.json >man
	jq_true '.format == "sbx-snapshot/1" and .name == "port" and
	    .backend == "qemu" and .deleted == ["/usr/bin/vi"] and
	    (has("layers") or has("image_path") | not)' <man
	mkdir x
	tar -C x -xf snap.tar
	[ "$(cat x/files/opt/d/new)" = new ]
	[ "$(stat -c %a x/files/opt/d/new)" = 751 ]
	[ "$(readlink x/files/opt/l)" = d/new ]
	tail -n 1 x/files/etc/passwd | grep -qx more
	# Only what changed: the command's (and the earlier tests' files in
	# /root), and the workdir sbx-create made (a directory new or of
	# another mode or owner, not one whose entries changed).
	run sh -c 'tar -tf snap.tar | grep -v "^files/root/"'
	assert_output "sbx-snapshot.json
files/
files/opt/
files/opt/d/
files/workspace/
files/etc/passwd
files/opt/d/new
files/opt/l"
	sbx-snapshot rm -b qemu port
}

@test "qemu: export of a snapshot whose image the store no longer has as it was: exit 1, one line, no VM made" {
	sbx-snapshot -s "$A" -n old >/dev/null
	run sbx-snapshot ls -j -b qemu
	dg=$(jq -r 'select(.name == "old") | .image_digest' <<<"$output")
	img=$(jq -r 'select(.name == "old") | .image' <<<"$output")
	# The name imported again, with other files: another digest.
	r=$BATS_TEST_TMPDIR/r2
	sbx_busybox_root "$r"
	echo other >"$r/etc/other"
	sbx-image import -q -t t/bb "$r" >/dev/null
	before=$(sbx-ls -j -b qemu | jq -s length)
	run --separate-stderr sbx-snapshot export -b qemu old
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-snapshot: cannot export snapshot 'old': image '$img' of the store is no longer the one it was taken on ($dg)" ] || fail "stderr: $stderr"
	[ "$(sbx-ls -j -b qemu | jq -s length)" -eq "$before" ]
	sbx-snapshot rm -b qemu old
}
