#!/usr/bin/env bats
# The man pages say what the tools do: exit codes and backends.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)

# Section $2 of man page $1 as plain text.
man_section() {
	mandoc -Tascii -Owidth=300 "$TOP/man/$1" | col -bx |
	    sed -n "/^$2\$/,/^[A-Z]/p" | sed '$d'
}

# Tool $@ with the e2b backend and no API key anywhere; the endpoint is
# loopback, in case something did go out.
no_key() {
	mkdir -p "$BATS_TEST_TMPDIR/cfg"
	env -u E2B_API_KEY XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/cfg" \
	    HOME="$BATS_TEST_TMPDIR" E2B_API_URL=http://127.0.0.1:9 \
	    E2B_DOMAIN=localhost "$@"
}

@test "a tool that exits 5 without an E2B key lists 5 in its EXIT STATUS" {
	local cmd t bad=
	for cmd in "sbx-ls -b e2b" "sbx-kill -b e2b -I abcd1234" \
	    "sbx-pause -b e2b -I abcd1234" "sbx-port -b e2b -I abcd1234 80" \
	    "sbx-gc -b e2b -n" "sbx-net -b e2b -I abcd1234" \
	    "sbx-sync status -b e2b -I abcd1234"; do
		t=${cmd%% *}
		# shellcheck disable=SC2086
		run --separate-stderr no_key $cmd
		[ "$status" -eq 5 ] || fail "$cmd: exit $status: $stderr"
		[[ $stderr == "$t: "*"no E2B API key"* ]] || fail "$cmd: $stderr"
		man_section "$t.1" "EXIT STATUS" | grep -qE '^ +5 ' ||
		    bad+=" $t"
	done
	assert_equal "$bad" ""
}

@test "sbx(7) says what exit 5 is for, not that it is unused" {
	run bash -c "mandoc -Tascii -Owidth=300 '$TOP/man/sbx.7' | col -bx |
	    sed -n '/^   Exit codes/,/^ENVIRONMENT/p'"
	assert_success
	assert_line --regexp '^ +5 +credentials missing or rejected'
	refute_output --partial reserved
	assert_output --partial "backend without an API key"
}

@test "sbx(7) does not say that e2b lacks sbx-exec -t" {
	run bash -c "mandoc -Tascii -Owidth=300 '$TOP/man/sbx.7' | col -bx |
	    sed -n '/^   The e2b backend/,/^   The local backend/p'"
	assert_success
	assert_output --partial "-t starts it on a pty"
	refute_output --regexp "[Nn]ot yet: *-t"
}

@test "every page whose -b lists backends names e2b too" {
	local f text bad=
	for f in "$TOP"/man/*.1; do
		text=$(mandoc -Tascii -Owidth=300 "$f" | col -bx |
		    grep -A1 '^     -b, --backend' | tail -n 1)
		if [[ $text == *docker* && $text != *e2b* ]]; then
			bad+=" ${f##*/}"
		fi
	done
	assert_equal "$bad" ""
}
