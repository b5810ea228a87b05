#!/usr/bin/env bats
# sbx-image: the build context's hash (remote-box's algorithm, held against
# tests/lib/ctxhash.py, the same algorithm in Python) and bad input. The
# builds through a Docker engine are in backend/docker/docker-image.bats.
load lib/helper

REF=$BATS_TEST_DIRNAME/lib/ctxhash.py

setup() {
	sbx_setup
	unset SBX_BACKEND
	mkdir -p ctx/src
	printf 'FROM scratch\nCOPY . /app\n' >ctx/Dockerfile
	printf 'print("hi")\n' >ctx/src/main.py
	printf 'x = 1\n' >ctx/src/util.py
}

# The hash of context ${1:-ctx} (more arguments: sbx-image hash's).
hash_of() {
	local dir=${1:-ctx}
	shift || true
	sbx-image hash "$@" "$dir" | jq_str .hash
}

# The hash sbx-image gives equals the Python one's, and is 8 hex digits.
same_as_python() {
	local c p
	c=$(hash_of "$@") || return 1
	p=$(python3 "$REF" "${1:-ctx}") || return 1
	[[ $c =~ ^[0-9a-f]{8}$ ]] || { echo "bad hash '$c'" >&2; return 1; }
	[ "$c" = "$p" ] || { echo "sbx-image $c, python $p" >&2; return 1; }
}

@test "hash prints the image name, the 8-digit hash and the file count" {
	run --separate-stderr sbx-image hash -t my/agent ctx
	assert_success
	[ -n "$output" ]
	h=$(python3 "$REF" ctx)
	assert_output "{\"image\":\"my/agent-$h\",\"hash\":\"$h\",\"files\":3}"
	[ -z "$stderr" ]
}

@test "the options may come before the command: -t NAME hash DIR, -q -t NAME hash" {
	want=$(sbx-image hash -t my/agent ctx)
	run --separate-stderr sbx-image -t my/agent hash ctx
	assert_success
	assert_output "$want"
	cd ctx
	run --separate-stderr sbx-image -q -t my/agent hash
	assert_success
	assert_output "$want"
	run --separate-stderr sbx-image -t hash
	assert_failure 2
}

@test "hash takes the current directory by default" {
	a=$(hash_of ctx)
	b=$(cd ctx && sbx-image hash | jq_str .hash)
	[ -n "$a" ]
	[ "$a" = "$b" ]
}

@test "hash: a content edit changes it, and so does a rename" {
	a=$(hash_of)
	echo 'x = 2' >ctx/src/util.py
	b=$(hash_of)
	mv ctx/src/util.py ctx/src/util2.py
	c=$(hash_of)
	[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || false
	[ "$a" != "$b" ]
	[ "$b" != "$c" ]
	same_as_python
}

@test "hash: modes and mtimes do not count" {
	a=$(hash_of)
	chmod 755 ctx/src/main.py
	touch -d 2001-01-01 ctx/src/util.py
	b=$(hash_of)
	[ -n "$a" ]
	[ "$a" = "$b" ]
}

@test "hash: a Dockerfile edit changes it, wherever the Dockerfile is (-f)" {
	a=$(hash_of)
	echo 'RUN true' >>ctx/Dockerfile
	b=$(hash_of)
	[ -n "$a" ]
	[ "$a" != "$b" ]
	same_as_python
	cp ctx/Dockerfile other.Dockerfile
	rm ctx/Dockerfile
	c=$(hash_of ctx -f other.Dockerfile)
	echo 'RUN false' >>other.Dockerfile
	d=$(hash_of ctx -f other.Dockerfile)
	[ -n "$c" ]
	[ "$c" != "$d" ]
	[ "$d" = "$(python3 "$REF" ctx other.Dockerfile)" ]
}

@test "hash: .dockerignore is honoured, and editing it changes the hash" {
	printf 'debug.log\nscratch\n' >ctx/.dockerignore
	a=$(hash_of)
	echo log >ctx/debug.log
	mkdir ctx/scratch
	echo n >ctx/scratch/notes.txt
	b=$(hash_of)
	[ -n "$a" ]
	[ "$a" = "$b" ]
	echo '*.tmp' >>ctx/.dockerignore
	c=$(hash_of)
	[ "$b" != "$c" ]
	same_as_python
}

@test "hash: a negation re-includes a file below an ignored directory" {
	mkdir ctx/data
	echo k >ctx/data/keep.txt
	echo o >ctx/data/other.bin
	printf 'data\n!data/keep.txt\n' >ctx/.dockerignore
	a=$(hash_of)
	echo o2 >ctx/data/other.bin
	b=$(hash_of)
	echo k2 >ctx/data/keep.txt
	c=$(hash_of)
	[ -n "$a" ]
	[ "$a" = "$b" ]
	[ "$b" != "$c" ]
	[ "$(sbx-image hash ctx | jq_str .files)" = 5 ]
	same_as_python
}

@test "hash: patterns are root-anchored as Docker's, not gitignore's" {
	mkdir ctx/docs
	echo r >ctx/README.md
	echo g >ctx/docs/guide.md
	echo '*.md' >ctx/.dockerignore
	a=$(hash_of)
	echo r2 >ctx/README.md
	b=$(hash_of)
	echo g2 >ctx/docs/guide.md
	c=$(hash_of)
	[ -n "$a" ]
	[ "$a" = "$b" ]   # README.md is ignored
	[ "$b" != "$c" ]  # docs/guide.md is not
	same_as_python
	# **/*.md reaches every depth.
	echo '**/*.md' >ctx/.dockerignore
	d=$(hash_of)
	echo g3 >ctx/docs/guide.md
	e=$(hash_of)
	[ "$d" = "$e" ]
	same_as_python
}

@test "hash: VCS and cache directories are skipped at any depth" {
	a=$(hash_of)
	mkdir -p ctx/.git ctx/src/__pycache__ ctx/.venv ctx/web/node_modules/p
	echo i >ctx/.git/index
	echo c >ctx/src/__pycache__/main.cpython-311.pyc
	echo v >ctx/.venv/pyvenv.cfg
	echo j >ctx/web/node_modules/p/i.js
	echo d >ctx/src/.DS_Store
	b=$(hash_of)
	[ -n "$a" ]
	[ "$a" = "$b" ]
	same_as_python
}

@test "hash: the tools' own .sbx (state files that change each run) is skipped at any depth" {
	a=$(hash_of)
	mkdir -p ctx/.sbx ctx/sub/.sbx
	echo '{"id":"x"}' >ctx/.sbx/state.json
	echo '*' >ctx/.sbx/.gitignore
	echo s >ctx/sub/.sbx/s.json
	b=$(hash_of)
	[ -n "$a" ]
	[ "$a" = "$b" ]
}

@test "hash: Docker's pattern cleaning, ** in the middle, comments, and a negation that keeps the walk going" {
	mkdir -p ctx/a/b/c ctx/logs/x ctx/keep
	echo 1 >ctx/a/b/c/deep.txt
	echo 2 >ctx/a/top.txt
	echo 3 >ctx/logs/x/y.log
	echo 4 >ctx/keep/z.log
	echo 5 >'ctx/sp ace.txt'
	printf '%s\n' '# a comment' '  /a/**/deep.txt/  ' './logs//x/../x' \
	    '**/*.log' '! keep/z.log' '' '[s]p?ace.*' >ctx/.dockerignore
	same_as_python
	[ "$(sbx-image hash ctx | jq_str .files)" = 6 ]
}

@test "hash: symlinks as os.walk sees them (to a file: its content; to a directory or nowhere: left out)" {
	mkdir ctx/real
	echo t >ctx/real/t.txt
	ln -s real ctx/dirlink
	ln -s src/main.py ctx/filelink
	ln -s nowhere ctx/broken
	mkfifo ctx/fifo
	same_as_python
	[ "$(sbx-image hash ctx | jq_str .files)" = 5 ]
}

@test "hash of a tree of many files equals the Python one's" {
	for d in 1 2 3 4 5; do
		mkdir -p "ctx/d$d/e"
		for f in a b c d e f g; do
			echo "$d$f" >"ctx/d$d/$f.txt"
			echo "$f$d" >"ctx/d$d/e/$f.py"
		done
	done
	printf '%s\n' 'd1' '!d1/e/a.py' 'd[23]/*.txt' '**/e/g.py' >ctx/.dockerignore
	same_as_python
}

@test "a missing Dockerfile is a one-line error, exit 2" {
	rm ctx/Dockerfile
	run --separate-stderr sbx-image hash ctx
	assert_failure 2
	[ -z "$output" ]
	[ "$stderr" = "sbx-image: Dockerfile not found at path: 'ctx/Dockerfile'" ]
	run --separate-stderr sbx-image build -b docker -t app ctx
	assert_failure 2
	[ -z "$output" ]
	[ "$stderr" = "sbx-image: Dockerfile not found at path: 'ctx/Dockerfile'" ]
}

@test "a missing context directory is a one-line error, exit 2" {
	run --separate-stderr sbx-image build -b docker -t app nope
	assert_failure 2
	[ -z "$output" ]
	assert_equal "$stderr" "sbx-image: cannot open context 'nope': No such file or directory"
}

@test "a bad -t name, a bad --build-arg, extra operands: exit 2, nothing sent" {
	# No engine answers here: a request would fail with exit 1.
	export DOCKER_HOST=unix://$BATS_TEST_TMPDIR/none.sock
	for t in App 'app:1' 'a..b' '-a' 'a/' 'a@sha256' 'a___b' 'a-' \
	    'h..x/a' 'h:/a' 'h:5x/a' '-h.x/a' 'h-.x/a' 'localhost:5000/A'; do
		run --separate-stderr sbx-image build -b docker -t "$t" ctx
		assert_failure 2
		[ -z "$output" ]
		[[ $stderr == "sbx-image: bad image name '$t'"* ]]
	done
	for a in '=v' '1x=v' 'NOT_SET_ANYWHERE_$RANDOM'; do
		run --separate-stderr sbx-image build -b docker -t app \
		    --build-arg "$a" ctx
		assert_failure 2
		[ -z "$output" ]
		[[ $stderr == "sbx-image: --build-arg: "* ]]
	done
	run --separate-stderr sbx-image build -b docker -t app ctx ctx
	assert_failure 2
	[[ $stderr == "sbx-image: unexpected argument 'ctx'"* ]]
	run --separate-stderr sbx-image build -b docker ctx
	assert_failure 2
	[[ $stderr == "sbx-image: build needs -t name"* ]]
	run --separate-stderr sbx-image hash --check ctx
	assert_failure 2
	[[ $stderr == "sbx-image: --check is for sbx-image build"* ]]
}

@test "names Docker takes: a path, a registry host and port, separators" {
	for t in app my/agent a.b_c__d---e localhost/x localhost:5000/a/b \
	    reg.example-1.org/team/app 127.0.0.1:5000/x; do
		run --separate-stderr sbx-image hash -t "$t" ctx
		assert_success
		jq_true --arg t "$t" '.image | startswith($t + "-")' <<<"$output"
	done
}

@test "build on a backend it has not is exit 2, naming the ones it has; e2b without a key is exit 5" {
	run --separate-stderr sbx-image build -b nope -t app ctx
	assert_failure 2
	[ -z "$output" ]
	assert_equal "$stderr" "sbx-image: build supports backends local, docker and e2b, not 'nope'"
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	run --separate-stderr env -u E2B_API_KEY sbx-image build -b e2b -t app ctx
	assert_failure 5
	[ -z "$output" ]
	[[ $stderr == "sbx-image: no E2B API key"* ]]
}

@test "no command, or an unknown one, is a usage error" {
	run --separate-stderr sbx-image
	assert_failure 2
	[[ $stderr == "sbx-image: a command is required (build, hash, pull, ls, inspect, rm, prune, import or export)"* ]]
	run --separate-stderr sbx-image frobnicate x
	assert_failure 2
	[[ $stderr == "sbx-image: unknown command 'frobnicate'"* ]]
}

@test "hash of an empty context, its Dockerfile elsewhere: a hash of the Dockerfile alone" {
	mkdir -p empty df
	printf 'FROM a\n' >df/Dockerfile
	run --separate-stderr sbx-image hash -f df/Dockerfile empty
	assert_success
	run jq -r '[.files, (.hash | test("^[0-9a-f]{8}$"))] | @tsv' <<<"$output"
	assert_output $'0\ttrue'
}
