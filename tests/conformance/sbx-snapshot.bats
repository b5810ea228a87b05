#!/usr/bin/env bats
# sbx-snapshot, sbx-create --from and sbx-fork on the backend under test
# (issue 24): what a snapshot holds and what a sandbox made from it has;
# export and import of the backend's own snapshots (or, without
# snapshot_export, export refused); rm of one in use;
# nothing left behind; bad input with the documented exit codes. A
# backend without snapshots is caps.bats's.
load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }

setup() {
	conf_setup
	has_cap snapshot || skip "backend '$BACKEND' has no snapshots (caps.bats)"
}

teardown() {
	local f
	for f in "$BATS_TEST_TMPDIR"/*.json; do
		[ -e "$f" ] && sbx-kill -q -s "$f" >/dev/null 2>&1
	done
	for b in "$BACKEND" local; do
		sbx-snapshot ls -j -b "$b" 2>/dev/null | jq -r .snapshot |
		    xargs -r sbx-snapshot rm -b "$b" >/dev/null 2>&1 || true
	done
}

# Files of every kind in the workdir, and one outside it.
fill() {
	sx sh -c 'cd /workspace && mkdir -p d/e "with space" &&
	    echo A >a && ln a b && ln -s a l && ln -s d/e dl && printf "x\n" >x &&
	    chmod 751 x && echo f >d/e/f && chmod 700 d && : >empty &&
	    echo s >"with space/s" && head -c 300000 /dev/urandom >d/big &&
	    mkdir -p /sbxsnap && echo o >/sbxsnap/o'
}

@test "$B: --from a snapshot has the sandbox's files, its workdir, labels and limits, and -e's names without their values" {
	new_sandbox -e SNAPSECRET=s3cr3t -l team=a
	fill
	want=$(sx sh -c "cd /workspace && $SUM_SH")
	[ -n "$want" ]
	run --separate-stderr sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n keep
	assert_success
	jq_true --arg b "$BACKEND" '.backend == $b and .name == "keep" and
	    .memory == false' <<<"$output"
	[[ "$output" != *s3cr3t* ]]
	# E2B says no more of a snapshot than its id and names.
	meta=$([ "$BACKEND" = e2b ] || echo yes)
	[ -z "$meta" ] || jq_true '(.snapshot | test("^snp-[0-9a-f]{12}$")) and
	    .workdir == "/workspace" and .labels.team == "a" and
	    (.env_names | index("SNAPSECRET") != null)' <<<"$output"
	run --separate-stderr sbx-snapshot ls -j -b "$BACKEND"
	assert_success
	[ "$(jq -s 'map(select(.name == "keep")) | length' <<<"$output")" -eq 1 ]
	[[ "$output" != *s3cr3t* ]]
	create --from keep -s "$BATS_TEST_TMPDIR/t.json" >/dev/null
	run sbx-exec -s "$BATS_TEST_TMPDIR/t.json" -- sh -c "cd /workspace && $SUM_SH"
	assert_success
	assert_output "$want"
	run sbx-exec -s "$BATS_TEST_TMPDIR/t.json" -- sh -c 'pwd; cat /sbxsnap/o; echo "[${SNAPSECRET-unset}]"'
	assert_success
	assert_output $'/workspace\no\n[unset]'
	[ -n "$meta" ] || return 0
	id=$(jq -r .ref.id "$BATS_TEST_TMPDIR/t.json")
	jq_true '.labels.team == "a"' <<<"$(ls_line "$id")"
	[ "$(ls_line "$id" | jq -c .limits.memory)" = "$(ls_line "$(sid)" | jq -c .limits.memory)" ]
}

@test "$B: a snapshot of a sandbox made from one has both's changes, a deletion too" {
	new_sandbox
	sx sh -c 'echo 1 >/workspace/one && echo gone >/workspace/gone'
	sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n first >/dev/null
	create --from first -s "$BATS_TEST_TMPDIR/t.json" >/dev/null
	sbx-exec -s "$BATS_TEST_TMPDIR/t.json" -- sh -c 'echo 2 >/workspace/two && rm /workspace/gone'
	sbx-snapshot -s "$BATS_TEST_TMPDIR/t.json" -n second >/dev/null
	create --from second -s "$BATS_TEST_TMPDIR/u.json" >/dev/null
	run sbx-exec -s "$BATS_TEST_TMPDIR/u.json" -- sh -c 'cd /workspace && ls && cat one two'
	assert_success
	assert_output $'one\ntwo\n1\n2'
}

@test "$B: sbx-fork -c 2: two sandboxes with the files, each its own, on the same runtime" {
	new_sandbox
	sx sh -c 'echo f >/workspace/f'
	run --separate-stderr sbx-fork -s "$BATS_TEST_TMPDIR/s.json" -c 2 -o "$BATS_TEST_TMPDIR/fork"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	jq_true -s 'length == 2 and all(.processes == false) and
	    (map(.snapshot) | unique | length == 1) and
	    (map(.id) | unique | length == 2)' <<<"$output"
	sbx-exec -s "$BATS_TEST_TMPDIR/fork1.json" -- sh -c 'echo 1 >>/workspace/f'
	run sbx-exec -s "$BATS_TEST_TMPDIR/fork2.json" -- cat /workspace/f
	assert_output f
	run sbx-exec -s "$BATS_TEST_TMPDIR/fork1.json" -- cat /workspace/f
	assert_output $'f\n1'
	# gVisor's copies are gVisor's.
	src=$(ls_line "$(sid)" | jq -c .runtime)
	for f in fork1 fork2; do
		[ "$(ls_line "$(jq -r .ref.id "$BATS_TEST_TMPDIR/$f.json")" | jq -c .runtime)" = "$src" ]
	done
}

@test "$B: rm of a snapshot a sandbox stands on fails (1) naming it; once it is gone, rm works" {
	new_sandbox
	id=$(sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" | jq -r .snapshot)
	[ -n "$id" ]
	tid=$(create --from "$id" -s "$BATS_TEST_TMPDIR/t.json" | jq -r .id)
	run --separate-stderr sbx-snapshot rm -b "$BACKEND" "$id"
	assert_failure 1
	assert_output ''
	if [ "$BACKEND" = e2b ]; then
		# E2B's server names the sandboxes by its own ids.
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" == "sbx-snapshot: cannot remove snapshot '$id': snapshot '$id' is in use by "* ]]
	else
		[[ "$stderr" == "sbx-snapshot: snapshot '$id' is in use by "*"${tid:0:12}"* ]]
	fi
	[ "$(sbx-snapshot ls -j -b "$BACKEND" | jq -s --arg i "$id" 'map(select(.snapshot == $i)) | length')" -eq 1 ]
	sbx-kill -s "$BATS_TEST_TMPDIR/t.json" >/dev/null
	run --separate-stderr sbx-snapshot rm -b "$BACKEND" "$id"
	assert_success
	[ "$(sbx-snapshot ls -j -b "$BACKEND" | jq -s --arg i "$id" 'map(select(.snapshot == $i)) | length')" -eq 0 ]
}

@test "$B: a snapshot leaves nothing behind but itself: no sandbox, no container or image of the engine" {
	new_sandbox
	sx sh -c 'echo x >/workspace/x'
	sandboxes=$(sbx-ls -j -b "$BACKEND" | jq -s length)
	if [ "$BACKEND" = docker ]; then
		images=$(docker images -aq | wc -l)
		containers=$(docker ps -aq | wc -l)
	fi
	run --separate-stderr sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	id=$(jq_str .snapshot <<<"$output")
	[ "$(sbx-ls -j -b "$BACKEND" | jq -s length)" -eq "$sandboxes" ]
	if [ "$BACKEND" = docker ]; then
		[ "$(docker images -aq | wc -l)" -eq $((images + 1)) ]
		[ "$(docker ps -aq | wc -l)" -eq "$containers" ]
		# Its image carries no label of the sandbox's but its own.
		run docker image inspect "sbx-snapshot:$id" --format '{{json .Config.Labels}}'
		assert_success
		jq_true 'keys == ["io.sbx.snapshot", "io.sbx.snapshot.meta"]' <<<"$output"
		sbx-snapshot rm -b docker "$id"
		[ "$(docker images -aq | wc -l)" -eq "$images" ]
	fi
	# The sandbox runs on.
	run sx cat /workspace/x
	assert_output x
}

@test "$B: bad input: an unknown snapshot (3), a bad name (2), a name in use (1), nothing made" {
	new_sandbox
	before=$(sbx-ls -j -b "$BACKEND" | jq -s length)
	for s in snp-000000000000 nosuchsnap; do
		run --separate-stderr create --from "$s" -s "$BATS_TEST_TMPDIR/t.json"
		if [ "$BACKEND" = e2b ]; then
			# E2B's API answers an unknown template as a failure of
			# the create (1), not as a missing thing.
			assert_failure 1
			assert_output ''
			[ "${#stderr_lines[@]}" -eq 1 ]
			[[ "$stderr" == "sbx-create: "*"$s"* ]]
		else
			assert_failure 3
			assert_output ''
			[ "$stderr" = "sbx-create: no snapshot '$s'" ]
		fi
		[ ! -e "$BATS_TEST_TMPDIR/t.json" ]
		run --separate-stderr sbx-snapshot rm -b "$BACKEND" "$s"
		assert_failure 3
		[ "$stderr" = "sbx-snapshot: no snapshot '$s'" ]
	done
	run --separate-stderr sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n 'bad name'
	assert_failure 2
	assert_output ''
	[[ "$stderr" == "sbx-snapshot: invalid snapshot name 'bad name'"* ]]
	sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n taken >/dev/null
	n=$(sbx-snapshot ls -j -b "$BACKEND" | jq -s length)
	run --separate-stderr sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n taken
	if [ "$BACKEND" = e2b ]; then
		# A name in use is E2B's new build of that template: the
		# name moves to the new snapshot, the old one (nothing
		# stands on it) goes.
		assert_success
		[ -z "$stderr" ]
		new=$(jq_str .snapshot <<<"$output")
		[ "$(sbx-snapshot ls -j -b "$BACKEND" | jq -s length)" -eq "$n" ]
		[ "$(sbx-snapshot ls -j -b "$BACKEND" | jq -rs 'map(select(.name == "taken")) | map(.snapshot) | join(" ")')" = "$new" ]
		[ "$(sbx-ls -j -b "$BACKEND" | jq -s length)" -eq "$before" ]
		return
	fi
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-snapshot: the snapshot name 'taken' is in use" ]
	[ "$(sbx-snapshot ls -j -b "$BACKEND" | jq -s length)" -eq "$n" ]
	[ "$(sbx-ls -j -b "$BACKEND" | jq -s length)" -eq "$before" ]
}

# What a backend without snapshot_export says of sbx-snapshot export.
NOEXPORT="backend '$BACKEND' cannot export its snapshots (sbx-snapshot export)"

@test "$B: export of its snapshot imports on local and on $B with the same files, and what it deleted gone" {
	new_sandbox
	if ! has_cap snapshot_export; then
		sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n port >/dev/null
		run --separate-stderr sbx-snapshot export -b "$BACKEND" port
		assert_failure 2
		assert_output ''
		[ "$stderr" = "sbx-snapshot: $NOEXPORT" ]
		return 0
	fi
	fill
	sx sh -c 'echo gone >/workspace/gone'
	# Not "base": E2B's default template's name.
	sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n parent >/dev/null
	create --from parent -s "$BATS_TEST_TMPDIR/t.json" >/dev/null
	# A path of the image deleted, where the image lets one go and a
	# local sandbox of the host's image (the import below) can delete it
	# too: not in docker's busybox image, all of it under /usr (the
	# host's, read-only, on local) or made by the engine.
	img=
	if [ "$BACKEND" != docker ]; then
		img=$(sbx-exec -s "$BATS_TEST_TMPDIR/t.json" -- sh -c 'for p in /lib32 /libx32 /etc/issue.net /etc/debian_version; do
		    [ -e "$p" ] || [ -L "$p" ] || continue
		    rm -f "$p" 2>/dev/null && [ ! -e "$p" ] && [ ! -L "$p" ] && { echo "$p"; break; }; done')
		[ -n "$img" ] || fail "no path of the image could be deleted"
	fi
	sbx-exec -s "$BATS_TEST_TMPDIR/t.json" -- sh -c 'rm /workspace/gone && echo more >/workspace/more &&
	    echo changed >>/workspace/x && chmod 640 /workspace/a && ln -s more /workspace/ml'
	want=$(sbx-exec -s "$BATS_TEST_TMPDIR/t.json" -- sh -c "cd /workspace && $SUM_SH")
	[ -n "$want" ]
	sbx-snapshot -s "$BATS_TEST_TMPDIR/t.json" -n port >/dev/null
	before=$(sbx-ls -j -b "$BACKEND" | jq -s length)
	sbx-snapshot export -b "$BACKEND" port >"$BATS_TEST_TMPDIR/snap.tar"
	# Nothing left of the export (e2b's two sandboxes).
	[ "$(sbx-ls -j -b "$BACKEND" | jq -s length)" -eq "$before" ]
	tar -xOf "$BATS_TEST_TMPDIR/snap.tar" sbx-snapshot.json >"$BATS_TEST_TMPDIR/man"
	jq_true '.format == "sbx-snapshot/1" and .name == "port" and
	    .owners == "sandbox" and (has("layers") | not) and
	    (has("runtime") | not)' <"$BATS_TEST_TMPDIR/man"
	[ -z "$img" ] || jq_true --arg p "$img" '.deleted | index($p) != null' <"$BATS_TEST_TMPDIR/man"
	# Flattened: the parent's files and the child's, the deletion done.
	mapfile -t flags < <(import_flags)
	for where in local here; do
		if [ "$where" = local ]; then
			run --separate-stderr sbx-snapshot import -b local -i host -s "$BATS_TEST_TMPDIR/i-$where.json" "$BATS_TEST_TMPDIR/snap.tar"
		else
			run --separate-stderr sbx-snapshot import "${flags[@]}" -s "$BATS_TEST_TMPDIR/i-$where.json" "$BATS_TEST_TMPDIR/snap.tar"
		fi
		[ "$status" -eq 0 ] || fail "import on $where: $status: $stderr"
		run sbx-exec -s "$BATS_TEST_TMPDIR/i-$where.json" -- sh -c "cd /workspace && $SUM_SH"
		assert_success
		assert_output "$want"
		run sbx-exec -s "$BATS_TEST_TMPDIR/i-$where.json" -- cat /workspace/b
		assert_output A
		[ -z "$img" ] || {
			run sbx-exec -s "$BATS_TEST_TMPDIR/i-$where.json" -- sh -c '[ ! -e "$1" ] && [ ! -L "$1" ] && echo gone' sh "$img"
			assert_output gone
		}
	done
	# The file outside the workdir, where the image lets it be written.
	run sbx-exec -s "$BATS_TEST_TMPDIR/i-here.json" -- cat /sbxsnap/o
	assert_output o
}

@test "$B: export of no such snapshot is exit 3; of one taken outside sbx exit 1, one line; nothing left running" {
	before=$(sbx-ls -j -b "$BACKEND" | jq -s length)
	run --separate-stderr sbx-snapshot export -b "$BACKEND" nosuchsnap
	if ! has_cap snapshot_export; then
		assert_failure 2
		assert_output ''
		[ "$stderr" = "sbx-snapshot: $NOEXPORT" ]
		return 0
	fi
	assert_failure 3
	assert_output ''
	[ "$stderr" = "sbx-snapshot: no snapshot 'nosuchsnap'" ]
	[ "$BACKEND" = e2b ] || return 0
	# E2B's API straight, as its SDK takes one: no record of its base.
	new_sandbox
	id=$(jq -r .ref.id "$BATS_TEST_TMPDIR/s.json")
	[ -n "$id" ] && [ "$id" != null ]
	printf 'X-API-Key: %s\n' "$E2B_API_KEY" >"$BATS_TEST_TMPDIR/hdr"
	run curl -s -X POST -H @"$BATS_TEST_TMPDIR/hdr" -H 'Content-Type: application/json' \
	    -d '{"name":"outside"}' "$E2B_API_URL/sandboxes/$id/snapshots"
	assert_success
	jq_true '.snapshotID | length > 0' <<<"$output"
	osid=$(jq -r .snapshotID <<<"$output")
	before=$(sbx-ls -j -b "$BACKEND" | jq -s length)
	run --separate-stderr sbx-snapshot export -b "$BACKEND" outside
	assert_failure 1
	assert_output ''
	[ "$(wc -l <<<"$stderr")" -eq 1 ]
	[[ "$stderr" == "sbx-snapshot: snapshot 'outside' cannot be exported: it was not taken by sbx-snapshot"* ]]
	[ "$(sbx-ls -j -b "$BACKEND" | jq -s length)" -eq "$before" ]
	# Nor one of a sandbox made from it: what that holds over its base
	# is as unknown.
	create --from outside -s "$BATS_TEST_TMPDIR/o.json" >/dev/null
	sbx-snapshot -s "$BATS_TEST_TMPDIR/o.json" -n over >/dev/null
	before=$(sbx-ls -j -b "$BACKEND" | jq -s length)
	run --separate-stderr sbx-snapshot export -b "$BACKEND" over
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-snapshot: snapshot 'over' cannot be exported: its sandbox was made from snapshot '$osid', which was not taken by sbx-snapshot here" ] || fail "stderr: $stderr"
	[ "$(sbx-ls -j -b "$BACKEND" | jq -s length)" -eq "$before" ]
}

