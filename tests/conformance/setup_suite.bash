# setup_suite.bash - one private Docker engine for a whole conformance run
# on docker (conformance.bash); nothing for local.

setup_suite() {
	bats_require_minimum_version 1.5.0
	case ${SBX_TEST_BACKEND:-local} in
	docker | docker:*)
		# shellcheck source=../dockerd.bash
		source "$BATS_TEST_DIRNAME/../dockerd.bash"
		sbx_dockerd_start && sbx_docker_image
		;;
	esac
}

teardown_suite() {
	case ${SBX_TEST_BACKEND:-local} in
	docker | docker:*)
		source "$BATS_TEST_DIRNAME/../dockerd.bash"
		sbx_dockerd_stop
		;;
	esac
}
