# setup_suite.bash - what a whole conformance run (conformance.bash) shares:
# one private Docker engine on docker, one private sbxd on loopback on e2b
# and daytona (its URL and key exported for every file), the guest and an
# image store on qemu; nothing for local.

setup_suite() {
	bats_require_minimum_version 1.5.0
	case ${SBX_TEST_BACKEND:-local} in
	docker | docker:*)
		# shellcheck source=../lib/dockerd.bash
		source "$BATS_TEST_DIRNAME/../lib/dockerd.bash"
		sbx_dockerd_start && sbx_docker_image
		;;
	e2b)
		# shellcheck source=../lib/sbxd.bash
		source "$BATS_TEST_DIRNAME/../lib/sbxd.bash"
		PATH=${SBX_BIN:-$BATS_TEST_DIRNAME/../../bin}:$PATH
		sbxd_start || return 1
		export E2B_API_URL=$SBXD_URL E2B_SANDBOX_URL=$SBXD_URL
		export E2B_API_KEY=$SBXD_KEY
		unset E2B_DOMAIN
		;;
	daytona)
		source "$BATS_TEST_DIRNAME/../lib/sbxd.bash"
		PATH=${SBX_BIN:-$BATS_TEST_DIRNAME/../../bin}:$PATH
		# A minute of Daytona's intervals is 5 s here: an idle
		# sandbox's auto-stop (--timeout 1 is one minute) ends in
		# seconds, not a minute of waiting per test.
		sbxd_start --daytona-minute 5 || return 1
		export DAYTONA_API_URL=$SBXD_URL/api DAYTONA_API_KEY=$SBXD_KEY
		unset SBX_DAYTONA_ENDPOINT
		;;
	qemu)
		# shellcheck source=../lib/registry.bash
		source "$BATS_TEST_DIRNAME/../lib/registry.bash"
		PATH=${SBX_BIN:-$BATS_TEST_DIRNAME/../../bin}:$PATH
		# shellcheck source=../lib/qemu.bash
		source "$BATS_TEST_DIRNAME/../lib/qemu.bash"
		sbx_qemu_guest "$BATS_SUITE_TMPDIR/guest" || return 1
		SBX_IMAGE_DIR=$(mktemp -d /tmp/sbx-qemu-images.XXXXXX)
		export SBX_IMAGE_DIR
		sbx_busybox_root "$SBX_IMAGE_DIR/root" || return 1
		printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
		    'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' \
		    >"$SBX_IMAGE_DIR/root/etc/passwd"
		printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' \
		    >"$SBX_IMAGE_DIR/root/etc/group"
		# GNU find and sha256sum: an export lists and hashes with them;
		# a path of the host's image the export test can delete (as a
		# local sandbox of the host's image can: / is its own).
		sbx_root_add_host_programs "$SBX_IMAGE_DIR/root" find sha256sum ||
		    return 1
		ln -s usr/lib32 "$SBX_IMAGE_DIR/root/lib32" || return 1
		sbx-image import -q -t sbx-test/busybox "$SBX_IMAGE_DIR/root" \
		    >/dev/null || return 1
		rm -rf "$SBX_IMAGE_DIR/root"
		;;
	esac
}

teardown_suite() {
	case ${SBX_TEST_BACKEND:-local} in
	docker | docker:*)
		source "$BATS_TEST_DIRNAME/../lib/dockerd.bash"
		sbx_dockerd_stop
		;;
	e2b | daytona)
		source "$BATS_TEST_DIRNAME/../lib/sbxd.bash"
		sbxd_stop
		# What its sandboxes left (they outlive sbxd, as its restart
		# wants), in the store sbxd_start gave it.
		if [ -n "${SBXD_LOCAL_DIR:-}" ] && [ -d "$SBXD_LOCAL_DIR" ]; then
			SBX_LOCAL_DIR=$SBXD_LOCAL_DIR sbx-ls -j 2>/dev/null |
			    SBX_LOCAL_DIR=$SBXD_LOCAL_DIR sbx-kill -q >/dev/null 2>&1 || true
		fi
		rm -rf "${SBXD_DIR:-/nonexistent}"
		;;
	qemu)
		rm -rf "${SBX_IMAGE_DIR:-/nonexistent}"
		;;
	esac
}
