# setup_suite.bash - what a whole conformance run (conformance.bash) shares:
# one private Docker engine on docker, one private sbxd on loopback on e2b
# (its URL and key exported for every file); nothing for local.

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
	esac
}

teardown_suite() {
	case ${SBX_TEST_BACKEND:-local} in
	docker | docker:*)
		source "$BATS_TEST_DIRNAME/../lib/dockerd.bash"
		sbx_dockerd_stop
		;;
	e2b)
		source "$BATS_TEST_DIRNAME/../lib/sbxd.bash"
		sbxd_stop
		rm -rf "${SBXD_DIR:-/nonexistent}"
		;;
	esac
}
