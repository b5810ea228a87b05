#!/usr/bin/env bats
# --help: the synopsis, a line for every long option, an example; and a
# one-line hint naming the closest option for a mistyped one.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)

# Every tool in cmd/ (sbx-init takes no options: it is the sandbox's PID 1),
# so that a new tool without help fails here too.
tools() {
	local f
	for f in "$TOP"/cmd/*.c; do
		f=${f##*/}
		[ "$f" = sbx-init.c ] || echo "${f%.c}"
	done
}

# The long options of tool $1, from the getopt_long table in cmd/$1.c.
longopts() {
	sed -n '/longopts\[\] = {/,/^};/s/^[[:space:]]*{"\([a-z][a-z0-9-]*\)",.*/\1/p' \
	    "$TOP/cmd/$1.c"
}

# The options section of $1 --help: the lines between "options:" and the
# next empty line.
options_section() {
	"$1" --help | sed -n '/^options:$/,/^$/p' | sed '1d;$d'
}

# Whether the options section on stdin lists --$1 with a text: "  -m,
# --memory size   text" or "      --port p   text", the text on the next
# line after a long left column.
described() {
	awk -v o="--$1" '
		want { ok = $0 ~ /^ +[^ -]/; exit }
		/^  (-[A-Za-z0-9], |    )--/ {
			left = $0; sub(/^ +(-[A-Za-z0-9], )?/, "", left)
			split(left, w, " ")
			# an optional value: --memory[=true|false]
			sub(/\[=.*/, "", w[1])
			if (w[1] != o)
				next
			if ($0 ~ /[^ ]  +[^ ]/) {
				ok = 1
				exit
			}
			want = 1
		}
		END { exit !ok }
	'
}

usage_code() {
	if [ "$1" = sbx-exec ]; then echo 125; else echo 2; fi
}

@test "--help starts with the synopsis that -h prints, on stdout, exit 0" {
	local t
	for t in $(tools); do
		run --separate-stderr "$t" -h
		assert_success
		local synopsis=$output
		[[ $synopsis == "usage: $t "* ]] || fail "$t -h: $synopsis"
		run --separate-stderr "$t" --help
		assert_success
		[ -z "$stderr" ] || fail "$t --help wrote to stderr: $stderr"
		[[ $output == "$synopsis"$'\n'* ]] ||
		    fail "$t --help does not start with the synopsis"
		[ "${#output}" -gt "${#synopsis}" ] || fail "$t --help is -h"
	done
}

@test "--help lists every long option of the tool, each with a line of text" {
	local t o section missing=
	for t in $(tools); do
		[ -n "$(longopts "$t")" ] || fail "no long options found for $t"
		section=$(options_section "$t")
		[ -n "$section" ] || fail "$t --help has no options section"
		for o in $(longopts "$t"); do
			described "$o" <<<"$section" || missing+=" $t:--$o"
		done
	done
	assert_equal "$missing" ""
}

@test "--help lists no option the tool does not have" {
	local t o extra=
	for t in $(tools); do
		[ -n "$(options_section "$t")" ] || fail "$t: no options section"
		for o in $(options_section "$t" |
		    sed -n 's/^  \(-[A-Za-z0-9], \|    \)--\([a-z0-9-]*\).*/\2/p'); do
			longopts "$t" | grep -qx -- "$o" || extra+=" $t:--$o"
		done
	done
	assert_equal "$extra" ""
}

@test "--help shows the short letter of each option that has one" {
	run sbx-create --help
	assert_success
	assert_line --regexp '^  -m, --memory size +[a-z]'
	assert_line --regexp '^      --allow-out dest +[a-z]'
	assert_line --regexp '^  -h, --help +[a-z]'
}

@test "--help ends with an example of the tool and where the full reference is" {
	local t
	for t in $(tools); do
		run --separate-stderr "$t" --help
		assert_success
		local ex
		ex=$(sed -n '/^example:$/,/^$/p' <<<"$output" | sed '1d')
		[[ $ex =~ (^| )$t\  ]] || fail "$t --help: no example: $ex"
		[[ ${lines[-1]} == "The full reference: man "[18]" $t" ]] ||
		    fail "$t --help: last line ${lines[-1]}"
	done
}

@test "--help's options and example fit in 80 columns" {
	local t long=
	for t in $(tools); do
		long+=$("$t" --help | sed -n '/^options:$/,$p' |
		    awk -v t="$t" 'length($0) > 80 { print " " t ": " $0 }')
	done
	assert_equal "$long" ""
}

@test "a mistyped long option gets the closest one, one line, exit 2" {
	local t o typo code
	for t in $(tools); do
		code=$(usage_code "$t")
		# The longest option, two letters in its middle swapped.
		o=$(longopts "$t" | awk '{ print length($0), $0 }' | sort -rn |
		    head -n 1 | cut -d' ' -f2)
		typo=${o:0:2}${o:3:1}${o:2:1}${o:4}
		[ "$typo" != "$o" ] || fail "$t: no typo of --$o"
		# sbx-sync's options come after its command.
		if [ "$t" = sbx-sync ]; then
			run --separate-stderr "$t" push "--$typo"
		else
			run --separate-stderr "$t" "--$typo"
		fi
		[ "$status" -eq "$code" ] || fail "$t --$typo: exit $status"
		[ -z "$output" ] || fail "$t --$typo wrote to stdout: $output"
		assert_equal "$stderr" \
		    "$t: unknown option '--$typo'; did you mean '--$o'?"
	done
}

@test "sbx-create --memroy=1G suggests --memory and creates nothing" {
	run --separate-stderr sbx-create --memroy=1G -s s.json
	assert_failure 2
	assert_equal "$stderr" \
	    "sbx-create: unknown option '--memroy'; did you mean '--memory'?"
	[ -z "$output" ]
	[ ! -e s.json ]
	[ -z "$(sbx-ls -j)" ]
}

@test "an option like none gets no guess, and points at --help" {
	run --separate-stderr sbx-ls --xyzzy
	assert_failure 2
	assert_equal "$stderr" "sbx-ls: unknown option '--xyzzy' (see --help)"
}

@test "an ambiguous abbreviation names the options it could be" {
	run --separate-stderr sbx-create --e x
	assert_failure 2
	assert_equal "$stderr" \
	    "sbx-create: option '--e' is ambiguous: --egress-proxy, --endpoint, --env"
}

@test "a missing or unwanted value is one line naming the option" {
	run --separate-stderr sbx-create --memory
	assert_failure 2
	assert_equal "$stderr" "sbx-create: option '--memory' needs a value"
	run --separate-stderr sbx-create -m
	assert_failure 2
	assert_equal "$stderr" "sbx-create: option '-m' needs a value"
	run --separate-stderr sbx-create --pull=yes
	assert_failure 2
	assert_equal "$stderr" "sbx-create: option '--pull' takes no value"
	run --separate-stderr sbx-exec -Z -- true
	assert_failure 125
	assert_equal "$stderr" "sbx-exec: unknown option '-Z' (see --help)"
}

@test "--help after a command word: sbx-sync push, sbx-net log" {
	run --separate-stderr sbx-sync push --help
	assert_success
	assert_line --regexp '^      --delete +push: '
	run --separate-stderr sbx-net log --help
	assert_success
	assert_line --regexp '^  -f, --follow +with log'
	run --separate-stderr sbx-sync pull --thiers
	assert_failure 2
	assert_equal "$stderr" \
	    "sbx-sync: unknown option '--thiers'; did you mean '--theirs'?"
}
