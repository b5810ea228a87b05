#!/usr/bin/env bats
# The two flavours of the tools: bin/sbx-X, static with the local backend,
# runs bin/remote/sbx-X (libcurl, every backend) for a backend it lacks.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }

# The sanitized build links dynamically (the sanitizers need it).
sanitized() {
	ldd "$SBX_BIN/sbx-exec" 2>/dev/null | grep -q libasan
}

@test "bin/sbx-exec is static and holds no libcurl" {
	if ! sanitized; then
		run file -L "$SBX_BIN/sbx-exec"
		assert_output --partial 'statically linked'
		run ldd "$SBX_BIN/sbx-exec"
		assert_output --partial 'not a dynamic executable'
	fi
	run ! grep -q curl_easy_perform "$SBX_BIN/sbx-exec"
	run ! grep -q curl_easy_perform "$SBX_BIN/sbx-sync"
	run ldd "$SBX_BIN/remote/sbx-exec"
	assert_output --partial libcurl
}

@test "sbx-ls --backend docker runs the remote flavour, which names the engine it cannot reach" {
	sock=$BATS_TEST_TMPDIR/missing.sock
	DOCKER_HOST=unix://$sock run --separate-stderr sbx-ls --backend docker
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-ls: cannot reach the Docker engine at 'unix://$sock': No such file or directory" ]
}

@test "every tool reaches the remote flavour for a docker ref, from --id or a state file" {
	sock=$BATS_TEST_TMPDIR/missing.sock
	export DOCKER_HOST=unix://$sock
	want="cannot reach the Docker engine at 'unix://$sock'"
	run --separate-stderr sbx-exec -b docker -I abc -- true
	assert_failure 125
	[[ "$stderr" == "sbx-exec: $want"* ]]
	jq -n --arg ep "unix://$sock" '{schema: 1, status: "running",
	    ref: {backend: "docker", id: "abc", endpoint: $ep}}' >s.json
	run --separate-stderr sbx-exec -s s.json -- true
	assert_failure 125
	[[ "$stderr" == "sbx-exec: $want"* ]]
	for t in sbx-kill sbx-pause; do
		run --separate-stderr "$t" -s s.json
		assert_failure 1
		assert_output ''
		[[ "$stderr" == *"$want"* ]] || fail "$t: $stderr"
	done
	run --separate-stderr sbx-create -b docker -i img
	assert_failure 1
	[[ "$stderr" == "sbx-create: $want"* ]]
}

@test "without the remote flavour, a docker backend names the missing file and exits 1" {
	mkdir bin
	cp "$SBX_BIN"/sbx-* bin/
	DOCKER_HOST=unix:///nonexistent.sock run --separate-stderr \
	    bin/sbx-ls --backend docker
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-ls: backend 'docker' needs '$PWD/bin/remote/sbx-ls': No such file or directory" ]
	run --separate-stderr bin/sbx-exec -b docker -I abc -- true
	assert_failure 1
	[ "$stderr" = "sbx-exec: backend 'docker' needs '$PWD/bin/remote/sbx-exec': No such file or directory" ]
}

@test "an unknown backend is a usage error (2) in both flavours" {
	for t in "$SBX_BIN/sbx-ls" "$SBX_BIN/remote/sbx-ls"; do
		run --separate-stderr "$t" --backend nosuch
		assert_failure 2
		assert_output ''
		[ "$stderr" = "sbx-ls: unknown backend 'nosuch'" ]
	done
}

@test "the remote flavour runs local sandboxes too (it finds sbx-init one up)" {
	r=$SBX_BIN/remote
	run "$r/sbx-create" -s s.json
	assert_success
	run "$r/sbx-exec" -s s.json -- echo remote
	assert_success
	assert_output remote
	run "$SBX_BIN/sbx-exec" -s s.json -- echo static
	assert_output static
	run "$r/sbx-kill" -s s.json
	assert_success
}

@test "installed, the static tools find the remote flavour in libexec/sbx/remote" {
	top=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	make -s -C "$top" install DESTDIR="$BATS_TEST_TMPDIR/pkg" PREFIX=/usr
	p=$BATS_TEST_TMPDIR/pkg/usr
	[ -x "$p/libexec/sbx/remote/sbx-exec" ]
	DOCKER_HOST=unix:///nonexistent.sock run --separate-stderr \
	    "$p/bin/sbx-ls" -b docker
	assert_failure 1
	[ "$stderr" = "sbx-ls: cannot reach the Docker engine at 'unix:///nonexistent.sock': No such file or directory" ]
	run "$p/libexec/sbx/remote/sbx-create" -s s.json
	assert_success
	run "$p/libexec/sbx/remote/sbx-exec" -s s.json -- echo installed
	assert_output installed
	run "$p/bin/sbx-kill" -s s.json
	assert_success
}

@test "sbx-ls --backends: every backend, its default pause and what it can do, in both flavours" {
	for t in "$SBX_BIN/sbx-ls" "$SBX_BIN/remote/sbx-ls"; do
		run --separate-stderr "$t" --backends
		assert_success
		[ "${#lines[@]}" -eq 5 ]
		jq -se 'map(.backend) == ["local", "docker", "e2b", "daytona", "qemu"] and
		    map(.default) == [true, false, false, false, false] and
		    (map(.pause) == ["suspend", "suspend", "suspend", "stop", "suspend"]) and
		    all(.caps | length == 26 and all(type == "boolean"))' \
		    <<<"$output"
		jq -se '.[0].caps | .idle and .files and .pty and .stop and
		    .name and .keep and .network_rules and .ports and .publish and
		    .disk and .shell and .snapshot and .snapshot_export and
		    .volumes and (.runtime | not) and
		    (.pull | not)' \
		    <<<"$output"
		jq -se '.[1].caps | .runtime and .pull and .files and .name and
		    .keep and .network_rules and (.idle | not) and .ports and
		    .publish and .disk and .shell and .snapshot and
		    .volumes' <<<"$output"
		jq -se '.[2].caps | .stdin and .suspend and .timeout and
		    .pty and .cpus and .memory and .files and
		    (.zstd | not) and (.stop | not) and (.name | not) and
		    (.keep | not) and .network_rules and .ports and
		    (.publish | not) and .disk and .shell and .snapshot and
		    .volumes' \
		    <<<"$output"
		# Daytona stops (its sandboxes have no suspend).
		jq -se '.[3].caps | .pty and .stdin and .cpus and .memory and
		    .disk and .network_deny and .network_allow and .timeout and
		    .stop and .name and .idle and (.suspend | not) and
		    (.pids | not) and
		    (.keep | not) and .network_rules' \
		    <<<"$output"
		# qemu: a VM's size, a pty, stdin, files, a network with
		# rules and ports, pause (suspend by default, or stop),
		# sessions, idle time, snapshots it exports (two VMs
		# compared); under
		# TCG unless qemu.accel says kvm.
		jq -se '.[4] | .accel == "tcg" and .pause == "suspend" and
		    (.caps | .pty and .stdin and .files and .memory and .cpus and
		    .timeout and .network_deny and .name and .keep and .suspend and
		    .stop and .network_allow and .network_rules and .snapshot and
		    .snapshot_export and .ports and .publish and
		    .shell and .idle and (.zstd | not) and (.volumes | not) and
		    (.pids | not) and (.archive | not))' \
		    <<<"$output"
	done
	SBX_QEMU_ACCEL=kvm run "$SBX_BIN/sbx-ls" --backends
	jq -se '.[4].accel == "kvm"' <<<"$output"
	# The default is the configured one.
	SBX_BACKEND=docker run "$SBX_BIN/sbx-ls" --backends
	jq -se 'map(.default) == [false, true, false, false, false]' <<<"$output"
	run --separate-stderr sbx-ls --backends -b local
	assert_failure 2
	[ "$stderr" = "sbx-ls: --backends takes no --backend or --label" ]
}

@test "sbx-ls --backends without the remote flavour lists what is there: local and qemu" {
	mkdir bin
	cp "$SBX_BIN"/sbx-ls bin/
	run --separate-stderr bin/sbx-ls --backends
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	jq -se 'map(.backend) == ["local", "qemu"]' <<<"$output"
}

@test "a backend refuses what it cannot do, with exit 2 and nothing made" {
	run --separate-stderr sbx-create -R runsc
	assert_failure 2
	[ "$stderr" = "sbx-create: backend 'local' cannot choose a runtime (--runtime)" ]
	run --separate-stderr sbx-create --pull
	assert_failure 2
	[ "$stderr" = "sbx-create: backend 'local' cannot pull images (--pull)" ]
	run sbx-ls -j
	assert_output ''
	DOCKER_HOST=unix:///nonexistent.sock run --separate-stderr \
	    sbx-gc -b docker --idle-for 1h
	assert_failure 2
	[ "$stderr" = "sbx-gc: backend 'docker' cannot tell how long a sandbox was idle (--idle-for)" ]
}
