#!/usr/bin/env bats
# The documentation agrees with the code: usage, man pages, completions, README.

load lib/helper

TOOLS=(sbx-cost sbx-cp sbx-create sbx-exec sbx-fork sbx-gc sbx-image sbx-kill sbx-logs sbx-ls sbx-net
    sbx-pause sbx-port sbx-secret sbx-snapshot sbx-stats sbx-sync sbx-volume sbxd)
TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)

# The long options of tool $1, from the getopt_long table in cmd/$1.c.
longopts() {
	sed -n 's/^[[:space:]]*{"\([a-z][a-z0-9-]*\)",.*/\1/p' "$TOP/cmd/$1.c"
}

# The optstring of tool $1's getopt_long call.
optstring() {
	local o
	o=$(tr -d '\n' <"$TOP/cmd/$1.c" |
	    sed -n 's/.*getopt_long([^,]*,[^,]*,[[:space:]]*"\([^"]*\)".*/\1/p')
	# Or its own variable, when another call takes it too.
	[ -n "$o" ] || o=$(sed -n 's/^static const char shortopts\[\] = "\([^"]*\)";$/\1/p' \
	    "$TOP/cmd/$1.c")
	printf '%s\n' "$o"
}

# The short option letters in a usage or SYNOPSIS text on stdin, sorted.
short_letters() {
	grep -oE '(^|[[ |])-[A-Za-z]+' | sed 's/.*-//' | fold -w1 | sort -u |
	    tr -d '\n'
}

# The man page of tool $1 (section 1, or 8 for the server).
man_page() {
	local f
	for f in "$TOP/man/$1.1" "$TOP/man/$1.8"; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
	echo "$TOP/man/$1.1"
}

# The man page of tool $1 as plain text, on one long line per paragraph.
man_text() {
	mandoc -Tascii -Owidth=300 "$(man_page "$1")" | col -bx
}

# The SYNOPSIS of tool $1's man page, whitespace squeezed.
synopsis() {
	man_text "$1" | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d' |
	    tr -s ' \n' '  ' | sed 's/^ //; s/ $//'
}

# What bash completes for "$1 --" (with or without bash-completion); for
# sbx-sync and sbx-secret, after each of their commands; for sbx-net, without
# and after log.
bash_long_completions() {
	local tool=$1 with=$2 sub
	local subs=("")
	if [ "$tool" = sbx-sync ]; then subs=(push pull status); fi
	if [ "$tool" = sbx-net ]; then subs=("" log); fi
	if [ "$tool" = sbx-secret ]; then subs=(set ls rm); fi
	if [ "$tool" = sbx-image ]; then subs=(build hash pull ls prune import export); fi
	for sub in "${subs[@]}"; do
		bash -c '
			if [ "$2" = yes ]; then
				. /usr/share/bash-completion/bash_completion || exit 1
			fi
			. "$3/completions/bash/sbx" || exit 1
			if [ -n "$4" ]; then
				COMP_LINE="$1 $4 --"
				COMP_WORDS=("$1" "$4" --)
			else
				COMP_LINE="$1 --"
				COMP_WORDS=("$1" --)
			fi
			COMP_POINT=${#COMP_LINE}
			COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
			_sbx "$1" -- "${COMP_WORDS[COMP_CWORD-1]}"
			printf "%s\n" "${COMPREPLY[@]}"
		' bash "$tool" "$with" "$TOP" "$sub"
	done
}

# The lines of completions/zsh/_sbx that describe tool $1: its own case
# branch and the options common to all.
zsh_section() {
	awk -v t="$1" '
		/^common=\(/ { c = 1 }
		c { print } c && /^\)/ { c = 0 }
		$0 ~ "^[[:space:]]*" t "\\)" { s = 1 }
		s { print } s && /;;/ { s = 0 }
	' "$TOP/completions/zsh/_sbx"
}

@test "-h prints the usage, --help starts with it, on stdout, exit 0" {
	local t
	for t in "${TOOLS[@]}"; do
		run --separate-stderr "$t" --help
		assert_success
		[[ $output == "usage: $t "* ]] || fail "$t --help: $output"
		[ -z "$stderr" ] || fail "$t --help wrote to stderr: $stderr"
		local help=$output
		run --separate-stderr "$t" -h
		assert_success
		[[ $help == "$output"$'\n'* ]] ||
		    fail "$t --help does not start with the usage -h prints"
	done
}

@test "--version and -V print NAME 0.1.0" {
	local t
	for t in "${TOOLS[@]}"; do
		run --separate-stderr "$t" --version
		assert_success
		[ "$output" = "$t 0.1.0" ] || fail "$t --version: $output"
		[ -z "$stderr" ]
		run --separate-stderr "$t" -V
		assert_success
		[ "$output" = "$t 0.1.0" ] || fail "$t -V: $output"
	done
}

@test "an unknown option exits 2 (sbx-exec: 125) with one line naming it on stderr" {
	local t code
	for t in "${TOOLS[@]}"; do
		code=2
		[ "$t" = sbx-exec ] && code=125
		run --separate-stderr "$t" --no-such-option
		[ "$status" -eq "$code" ] || fail "$t --no-such-option: exit $status"
		[ -z "$output" ] || fail "$t --no-such-option wrote to stdout"
		[ "${#stderr_lines[@]}" -eq 1 ] || fail "$t: not one line: $stderr"
		[[ $stderr == "$t: "*no-such-option* ]] || fail "$t: $stderr"
		run --separate-stderr "$t" -Z
		[ "$status" -eq "$code" ] || fail "$t -Z: exit $status"
		[ "${#stderr_lines[@]}" -eq 1 ] || fail "$t -Z: not one line: $stderr"
		[[ $stderr == "$t: "*Z* ]] || fail "$t -Z: $stderr"
	done
}

@test "every long option has a short letter in the optstring" {
	local t o letter missing=
	for t in "${TOOLS[@]}"; do
		while IFS=' ' read -r o letter; do
			[[ $(optstring "$t") == *"$letter"* ]] ||
			    missing+=" $t:--$o"
		done < <(sed -n "s/^[[:space:]]*{\"\([a-z-]*\)\",.*'\(.\)'},/\1 \2/p" "$TOP/cmd/$t.c")
	done
	assert_equal "$missing" ""
}

@test "every long option is in the tool's man page" {
	local t o text missing=
	for t in "${TOOLS[@]}"; do
		[ -n "$(longopts "$t")" ] || fail "no long options found for $t"
		text=$(man_text "$t")
		for o in $(longopts "$t"); do
			grep -qE -- "--$o([^a-z0-9-]|$)" <<<"$text" ||
			    missing+=" $t:--$o"
		done
	done
	assert_equal "$missing" ""
}

@test "every long option is completed by completions/bash/sbx" {
	local t o with got missing=
	for with in no yes; do
		if [ $with = yes ] && [ ! -r /usr/share/bash-completion/bash_completion ]; then
			continue
		fi
		for t in "${TOOLS[@]}"; do
			got=$(bash_long_completions "$t" "$with")
			for o in $(longopts "$t"); do
				grep -qx -- "--$o" <<<"$got" ||
				    missing+=" $t:--$o(bash-completion=$with)"
			done
		done
	done
	assert_equal "$missing" ""
}

@test "every long option is in completions/zsh/_sbx" {
	local t o text missing=
	for t in "${TOOLS[@]}"; do
		text=$(zsh_section "$t")
		for o in $(longopts "$t"); do
			grep -qE -- "--$o([^a-z0-9-]|$)" <<<"$text" ||
			    missing+=" $t:--$o"
		done
	done
	assert_equal "$missing" ""
}

@test "the man page SYNOPSIS is the usage text" {
	local t want got
	for t in "${TOOLS[@]}"; do
		want=$("$t" -h | sed '1s/^usage: //' | tr -s ' \n' '  ' |
		    sed 's/^ //; s/ $//')
		got=$(synopsis "$t")
		assert_equal "$got" "$want"
	done
}

@test "the man page SYNOPSIS has the same short options as the usage" {
	local t
	for t in "${TOOLS[@]}"; do
		assert_equal "$t: $(synopsis "$t" | short_letters)" \
		    "$t: $("$t" -h | short_letters)"
	done
}

@test "the usage shows every short option but -h and -V" {
	local t want
	for t in "${TOOLS[@]}"; do
		want=$(optstring "$t" | tr -d ':+hV' | fold -w1 | sort -u | tr -d '\n')
		assert_equal "$t: $("$t" -h | short_letters)" "$t: $want"
	done
}

@test "mandoc -Tlint -W warning is clean on every man page" {
	run mandoc -Tlint -W warning "$TOP"/man/*.[1-8]
	assert_success
	assert_output ""
}

@test "every tool has a man page with the standard sections" {
	local t s m missing=
	for t in "${TOOLS[@]}"; do
		m=$(man_page "$t")
		[ -f "$m" ] || { missing+=" ${m##*/}"; continue; }
		for s in SYNOPSIS DESCRIPTION OPTIONS OUTPUT "EXIT STATUS" \
		    ENVIRONMENT EXAMPLES "SEE ALSO"; do
			grep -qx "\.Sh $s" "$m" || missing+=" ${m##*/}:$s"
		done
	done
	assert_equal "$missing" ""
}

@test "the bash completion is valid bash" {
	run bash -n "$TOP/completions/bash/sbx"
	assert_success
	assert_output ""
}

@test "the zsh completion is valid zsh" {
	command -v zsh >/dev/null || fail "zsh is not installed"
	run zsh -n "$TOP/completions/zsh/_sbx"
	assert_success
	assert_output ""
}

@test "the README starts with the two commands make demo and make check" {
	local readme
	for readme in README.md README; do
		[ -f "$TOP/$readme" ] && break
	done
	[ -f "$TOP/$readme" ] || fail "no README.md or README in $TOP"
	# The command lines: in ``` blocks or indented, without a "$ " prompt
	# or a trailing comment.
	run awk '
		/^[[:space:]]*```/ { f = !f; next }
		f || /^(    |\t)/ {
			sub(/^[[:space:]]*(\$ )?/, "")
			sub(/[[:space:]]+#.*$/, "")
			if ($0 != "" && $0 !~ /^#/) print
		}
	' "$TOP/$readme"
	[ "${#lines[@]}" -ge 2 ] || fail "no commands in $readme"
	assert_equal "${lines[0]}" "make demo"
	assert_equal "${lines[1]}" "make check"
}
