#!/usr/bin/env bats
# The e2b backend, with the real tools, against a private sbxd on loopback
# (and a scripted server for the answers sbxd never gives). The API key
# travels in the environment only.
load ../../lib/helper
load ../../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
	export E2B_API_KEY=$SBXD_KEY
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() {
	sbx_setup
	unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN
	# No credentials file of the user's is ever read.
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	FAKE_PID=
}

teardown() {
	if [ -n "$FAKE_PID" ]; then
		kill "$FAKE_PID" 2>/dev/null || true
		wait "$FAKE_PID" 2>/dev/null || true
	fi
	[ -f "$BATS_TEST_TMPDIR/s.json" ] && sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1 || true
	# The sandboxes a test listed in e2b.ids, sbx's or not.
	if [ -f "$BATS_TEST_TMPDIR/e2b.ids" ]; then
		while read -r id; do
			sbxd_api DELETE "/sandboxes/$id" >/dev/null || true
		done <"$BATS_TEST_TMPDIR/e2b.ids"
	fi
}

new_e2b() {
	sbx-create -b e2b -E "$SBXD_URL" -s "$BATS_TEST_TMPDIR/s.json" "$@" >/dev/null
}

e2b_id() {
	jq -r .ref.id "$BATS_TEST_TMPDIR/s.json"
}

# The envd access token of sandbox $1, through the API as an SDK gets it.
e2b_token() {
	sbxd_api POST "/sandboxes/$1/connect" '{"timeout":300}' | jq -r .envdAccessToken
}

# A scripted API server on 127.0.0.1: answers from $1, a Python list of
# (status, content type, body) taken in turn (the last one repeats); a
# status of 0 resets the connection without an answer. Sets FAKE_URL and FAKE_PID; each request's method and path are appended
# to $BATS_TEST_TMPDIR/fake.log.
fake_start() {
	local port
	port=$(sbxd_free_port)
	python3 - "$port" "$1" "$BATS_TEST_TMPDIR/fake.log" >"$BATS_TEST_TMPDIR/fake.err" 2>&1 <<'EOF' &
import ast, http.server, socket, struct, sys
port, answers, log = int(sys.argv[1]), ast.literal_eval(sys.argv[2]), sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        if self.path == '/__ready':
            self.send_response(204)
            self.end_headers()
            return
        n = int(self.headers.get('Content-Length') or 0)
        if n:
            self.rfile.read(n)
        with open(log, 'a') as f:
            f.write('%s %s key=%s\n' % (self.command, self.path,
                'yes' if self.headers.get('X-API-Key') else 'no'))
        st, ct, body = answers.pop(0) if len(answers) > 1 else answers[0]
        if st == 0:
            # SO_LINGER 0: close sends a RST, as a dropped proxy does.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                struct.pack('ii', 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        b = body.encode('latin-1')
        self.send_response(st)
        self.send_header('Content-Type', ct)
        self.send_header('Content-Length', str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    do_GET = do_POST = do_DELETE = answer
    def log_message(self, *a):
        pass
http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
EOF
	FAKE_PID=$!
	FAKE_URL=http://127.0.0.1:$port
	for ((i = 0; i < 100; i++)); do
		curl -s -o /dev/null "$FAKE_URL/__ready" 2>/dev/null && break
		sleep 0.05
	done
}

@test "sbx-create -b e2b -E URL prints the ref and writes a state with neither the key nor a token" {
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s s.json -l job=ci
	assert_success
	assert_equal "$stderr" ""
	assert_equal "$(jq -r .backend <<<"$output")" e2b
	assert_equal "$(jq -r .endpoint <<<"$output")" "$SBXD_URL"
	id=$(jq -r .id <<<"$output")
	assert_equal "$(jq -r .ref.id s.json)" "$id"
	tok=$(e2b_token "$id")
	[ -n "$tok" ]
	[ "$tok" != null ]
	run grep -rF -e "$SBXD_KEY" -e "$tok" s.json
	assert_failure
	run grep -F -e "$SBXD_KEY" -e "$tok" <<<"$output"
	assert_failure
	run sbxd_api GET "/sandboxes/$id"
	assert_equal "$(jq -r .metadata.job <<<"$output")" ci
	assert_equal "$(jq -r '.metadata["io.sbx.managed"]' <<<"$output")" 1
}

@test "sbx-create -b e2b sends the template, the timeout, --env and --network" {
	new_e2b -e FOO=bar -T 120 -n allow
	run sbxd_api GET "/sandboxes/$(e2b_id)"
	assert_equal "$(jq -r .templateID <<<"$output")" base
	run sbx-exec -s s.json -- sh -c 'echo "$FOO"'
	assert_success
	assert_output bar
}

@test "sbx-create -b e2b --template names the template; an unknown one is exit 1, named, with nothing written" {
	new_e2b --template base
	run sbxd_api GET "/sandboxes/$(e2b_id)"
	assert_equal "$(jq -r .templateID <<<"$output")" base
	run -1 --separate-stderr sbx-create -b e2b -E "$SBXD_URL" --template no-such-tpl -s "$BATS_TEST_TMPDIR/t.json"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "sbx-create: "*"no-such-tpl"* ]] || fail "stderr: $stderr"
	[ ! -e "$BATS_TEST_TMPDIR/t.json" ]
}

@test "sbx-create --endpoint is refused for another backend" {
	run --separate-stderr sbx-create -b local -E "$SBXD_URL" -s s.json
	assert_failure 2
	assert_output ""
	[[ $stderr == *"--endpoint is for backend 'e2b'"* ]]
	[ ! -e s.json ]
}

@test "sbx-exec -b e2b streams stdout and stderr apart and exits with the command's status" {
	new_e2b
	run --separate-stderr sbx-exec -s s.json -- sh -c 'echo out; echo err >&2; exit 3'
	assert_failure 3
	assert_output out
	assert_equal "$stderr" err
}

@test "sbx-exec -b e2b -i forwards stdin and closes it at its end" {
	new_e2b
	run sbx-exec -i -s s.json -- sh -c 'wc -l; echo done' < <(printf 'a\nb\nc\n')
	assert_success
	assert_line --index 0 --regexp '^ *3$'
	assert_line --index 1 done
}

@test "sbx-exec -b e2b: a command killed by a signal is 128+N" {
	new_e2b
	run sbx-exec -s s.json -- sh -c 'kill -KILL $$'
	assert_failure 137
	run sbx-exec -s s.json -- sh -c 'kill -TERM $$'
	assert_failure 143
}

@test "sbx-exec -b e2b: a command that is not there is 127, with a message" {
	new_e2b
	run -127 --separate-stderr sbx-exec -s s.json -- no-such-command
	assert_failure 127
	assert_output ""
	assert_equal "$stderr" "sbx-exec: 'no-such-command': No such file or directory"
}

@test "sbx-exec -b e2b -T ends the command (exit 124) and the process is gone" {
	new_e2b
	run --separate-stderr sbx-exec -T 1 -s s.json -- sleep 1234
	assert_failure 124
	[[ $stderr == *"timed out"* ]]
	id=$(e2b_id)
	tok=$(e2b_token "$id")
	# SendSignal was answered before sbx-exec exited: no sleep is left.
	run sbxd_envd "$id" "$tok" /process.Process/List -H 'Content-Type: application/json' -d '{}'
	assert_success
	refute_output --partial 1234
}

@test "sbx-exec -b e2b has no hidden timeout of its own" {
	new_e2b
	run sbx-exec -s s.json -- sh -c 'sleep 2; echo late'
	assert_success
	assert_output late
}

@test "sbx-exec -b e2b keeps the sandbox alive while a command outlasts its timeout" {
	new_e2b --timeout 4
	id=$(e2b_id)
	run --separate-stderr sbx-exec -s s.json -- sh -c 'sleep 6; echo done'
	t0=$(date +%s%3N)
	assert_success
	assert_output done
	# Its timeout counts from the command's end: still there. (t0, taken
	# as the command returned, keeps a slow machine's later steps out.)
	end=$(sbxd_api GET "/sandboxes/$id" | jq -r .endAt)
	(($(date -d "$end" +%s%3N) >= t0 + 1000))
	run sbx-exec -s s.json -- echo again
	assert_success
	assert_output again
}

@test "sbx-exec -b e2b: a sandbox's timeout counts from the end of the last command" {
	new_e2b --timeout 20
	id=$(e2b_id)
	run sbx-exec -s s.json -- sleep 3
	t0=$(date +%s%3N)
	assert_success
	# Counted from the create it would be under 17 s from the command's
	# return (t0); it is 20 s from its end, a moment before t0.
	end=$(sbxd_api GET "/sandboxes/$id" | jq -r .endAt)
	left=$(($(date -d "$end" +%s%3N) - t0))
	((left > 17500 && left <= 20000))
}

@test "sbx-kill -b e2b kills the sandbox, and again is exit 0 (already gone)" {
	new_e2b
	id=$(e2b_id)
	run --separate-stderr sbx-kill -s s.json
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" killed
	run sbxd_api GET "/sandboxes/$id"
	assert_equal "$(jq -r .code <<<"$output")" 404
	run --separate-stderr sbx-kill -s s.json
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" gone
	[[ $stderr == *"already gone"* ]]
}

@test "sbx-ls -b e2b lists sbx's sandboxes with their labels, not the others" {
	new_e2b -l team=red
	id=$(e2b_id)
	other=$(sbxd_create | jq -r .sandboxID)
	E2B_API_URL=$SBXD_URL run --separate-stderr sbx-ls -b e2b --json
	sbxd_api DELETE "/sandboxes/$other" >/dev/null
	assert_success
	assert_equal "$stderr" ""
	line=$(jq -c "select(.id == \"$id\")" <<<"$output")
	assert_equal "$(jq -r .status <<<"$line")" running
	assert_equal "$(jq -c .labels <<<"$line")" '{"team":"red"}'
	refute_output --partial "$other"
}

@test "sbx-create -b e2b marks its sandbox with who made it and when; sbx-ls dates it by that, not by a resume" {
	before=$(date +%s)
	new_e2b
	after=$(date +%s)
	id=$(e2b_id)
	meta=$(sbxd_api GET "/sandboxes/$id" | jq -c .metadata)
	assert_equal "$(jq -r '.["io.sbx.owner"]' <<<"$meta")" "$(id -un)@$(hostname)"
	created=$(jq -r '.["io.sbx.created"]' <<<"$meta")
	((created >= before && created <= after)) || fail "io.sbx.created $created not in [$before, $after]"
	E2B_API_URL=$SBXD_URL run --separate-stderr sbx-ls -b e2b --json
	assert_equal "$(jq -r "select(.id == \"$id\") | .created_at_epoch" <<<"$output")" "$created"
	assert_equal "$(jq -c "select(.id == \"$id\") | .labels" <<<"$output")" '{}'
}

@test "sbx-pause -b e2b pauses the sandbox, --resume brings it back" {
	new_e2b
	id=$(e2b_id)
	run sbx-pause -s s.json
	assert_success
	assert_equal "$(sbxd_api GET "/sandboxes/$id" | jq -r .state)" paused
	run sbx-pause -s s.json
	assert_success
	run sbx-pause --resume -s s.json
	assert_success
	assert_equal "$(sbxd_api GET "/sandboxes/$id" | jq -r .state)" running
	run sbx-exec -s s.json -- echo back
	assert_output back
}

@test "a wrong API key is exit 5, one line on stderr without the key, nothing written" {
	E2B_API_KEY=e2b_wrong_0123456789 run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s s.json
	assert_failure 5
	assert_output ""
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"rejected"* ]]
	[[ $stderr != *e2b_wrong_0123456789* ]]
	[ ! -e s.json ] || [ "$(jq -r '.ref // empty' s.json)" = "" ]
	E2B_API_KEY=e2b_wrong_0123456789 E2B_API_URL=$SBXD_URL run --separate-stderr sbx-ls -b e2b
	assert_failure 5
	[[ $stderr != *e2b_wrong_0123456789* ]]
}

@test "no API key at all is exit 5; the credentials file is the other source" {
	unset E2B_API_KEY
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s s.json
	assert_failure 5
	assert_output ""
	[[ $stderr == *"no E2B API key"* ]]
	mkdir -p "$XDG_CONFIG_HOME/sbx/credentials"
	(umask 077; printf '%s\n' "$SBXD_KEY" >"$XDG_CONFIG_HOME/sbx/credentials/e2b")
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s s.json
	assert_success
	assert_equal "$stderr" ""
	run grep -F "$SBXD_KEY" s.json
	assert_failure
}

@test "an unknown sandbox id is exit 3 (sbx-pause, sbx-exec's own 125)" {
	export E2B_API_URL=$SBXD_URL
	run --separate-stderr sbx-pause -b e2b --id nosuchsandbox0000
	assert_failure 3
	[[ $stderr == *"no sandbox 'nosuchsandbox0000'"* ]]
	run --separate-stderr sbx-exec -b e2b --id nosuchsandbox0000 -- true
	assert_failure 125
	[[ $stderr == *"no sandbox 'nosuchsandbox0000'"* ]]
}

@test "a 429 is retried and the call then succeeds" {
	fake_start "[(429, 'application/json', '{\"code\":429,\"message\":\"slow down\"}'), (200, 'application/json', '[]')]"
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-ls -b e2b --json
	assert_success
	assert_output ""
	assert_equal "$(grep -c '^GET /v2/sandboxes' "$BATS_TEST_TMPDIR/fake.log")" 2
}

@test "a connection reset and a 504 are retried for a list, which then succeeds" {
	fake_start "[(0, '', ''), (504, 'text/html', '<html><body>gateway</body></html>'), (200, 'application/json', '[]')]"
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-ls -b e2b --json
	assert_success
	assert_output ""
	assert_equal "$stderr" ""
	assert_equal "$(grep -c '^GET /v2/sandboxes' "$BATS_TEST_TMPDIR/fake.log")" 3
}

@test "a connection reset under a create is exit 1 with one line, sent once, nothing written" {
	fake_start "[(0, '', '')]"
	run --separate-stderr sbx-create -b e2b -E "$FAKE_URL" -s s.json
	assert_failure 1
	assert_output ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$stderr" "sbx-create: the connection to '$FAKE_URL' broke (the request may have been carried out): Recv failure: Connection reset by peer"
	assert_equal "$(grep -c '^POST /sandboxes' "$BATS_TEST_TMPDIR/fake.log")" 1
	[ ! -e s.json ]
}

@test "list follows X-Next-Token over every page" {
	page1='[{"sandboxID":"aaa","templateID":"base","startedAt":"2026-12-01T00:00:00Z","state":"running","metadata":{"io.sbx.managed":"1","p":"1"}}]'
	page2='[{"sandboxID":"bbb","templateID":"base","startedAt":"2026-12-01T00:00:00Z","state":"paused","metadata":{"io.sbx.managed":"1","p":"2"}}]'
	port=$(sbxd_free_port)
	python3 - "$port" "$page1" "$page2" <<'EOF' &
import http.server, sys
port, p1, p2 = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        second = 'nextToken=tok%2F1' in self.path
        b = p2 if second else p1
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        if not second:
            self.send_header('X-Next-Token', 'tok/1')
        self.send_header('Content-Length', str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
EOF
	FAKE_PID=$!
	for ((i = 0; i < 100; i++)); do
		curl -s -o /dev/null "http://127.0.0.1:$port/" && break
		sleep 0.05
	done
	E2B_API_URL=http://127.0.0.1:$port run --separate-stderr sbx-ls -b e2b --json
	assert_success
	assert_equal "$(jq -r .id <<<"$output" | tr '\n' ' ')" "aaa bbb "
	assert_equal "$(jq -r .status <<<"$output" | tr '\n' ' ')" "running paused "
}

@test "a gateway's 504 HTML page is reported on one readable line" {
	fake_start "[(504, 'text/html', '<html>\n<head><title>504 Gateway Time-out</title></head>\n<body><h1>upstream request timeout</h1></body></html>\n')]"
	run --separate-stderr sbx-create -b e2b -E "$FAKE_URL" -s s.json
	assert_failure 1
	assert_output ""
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"upstream request timeout"* ]]
	[[ $stderr == *"status 504"* ]]
	[[ $stderr != *"<"* ]]
	# A create is not idempotent: sent once, never again.
	assert_equal "$(grep -c '^POST /sandboxes' "$BATS_TEST_TMPDIR/fake.log")" 1
	grep -q 'key=yes' "$BATS_TEST_TMPDIR/fake.log"
}

@test "a server that echoes the key back does not get it into the message" {
	fake_start "[(500, 'application/json', '{\"code\":500,\"message\":\"bad key e2b_echo_0123456789 here\"}')]"
	E2B_API_KEY=e2b_echo_0123456789 run --separate-stderr sbx-create -b e2b -E "$FAKE_URL" -s s.json
	assert_failure 1
	assert_output ""
	[[ $stderr == *"bad key "*" here (status 500)"* ]]
	[[ $stderr != *e2b_echo_0123456789* ]]
}

@test "sbx-exec -b e2b on a paused sandbox is refused, and -R resumes it first" {
	new_e2b
	sbx-pause -s s.json >/dev/null
	run --separate-stderr sbx-exec -s s.json -- echo hi
	assert_failure 125
	assert_output ""
	[[ $stderr == *"is paused (sbx-exec --resume, or sbx-pause --resume)"* ]]
	run sbx-exec -R -s s.json -- echo hi
	assert_success
	assert_output hi
}

# The answers of a sandbox whose process stream breaks after "hi": its
# detail, connect, then a Start stream without its end; then $1 to the
# GET that asks whether the sandbox is still there.
cut_stream() {
	python3 - "$1" <<'EOF'
import json, struct, sys
def frame(m, f=0):
    d = json.dumps(m).encode()
    return (bytes([f]) + struct.pack('>I', len(d)) + d).decode('latin-1')
detail = json.dumps({"sandboxID": "abc", "templateID": "base", "state": "running",
    "startedAt": "2026-12-01T00:00:00Z", "metadata": {"io.sbx.managed": "1"}})
start = frame({"event": {"start": {"pid": 7}}}) + frame({"event": {"data": {"stdout": "aGkK"}}})
last = (404, 'application/json', '{"code":404,"message":"gone"}') if sys.argv[1] == 'gone' else (200, 'application/json', detail)
print(repr([(200, 'application/json', detail),
    (200, 'application/json', json.dumps({"sandboxID": "abc", "envdAccessToken": "tok"})),
    (200, 'application/connect+json', start), last]))
EOF
}

@test "sbx-exec -b e2b: a stream cut mid-way by a sandbox that went away is 125 and says so" {
	fake_start "$(cut_stream gone)"
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-exec -b e2b --id abc -- long-job
	assert_failure 125
	assert_output hi
	assert_equal "$stderr" "sbx-exec: no sandbox 'abc': it went away while 'long-job' ran"
}

@test "sbx-exec -b e2b: a stream cut mid-way in a sandbox still there is 125, never a hang" {
	fake_start "$(cut_stream there)"
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-exec -b e2b --id abc -- long-job
	assert_failure 125
	assert_output hi
	assert_equal "$stderr" "sbx-exec: the stream of 'long-job' broke before its end"
}

@test "sbx-exec -b e2b: envd refusing the detail's token, it runs with connect's, once" {
	port=$(sbxd_free_port)
	python3 - "$port" "$BATS_TEST_TMPDIR/fake.log" <<'EOF' &
import http.server, json, struct, sys
port, log = int(sys.argv[1]), sys.argv[2]
def frame(m, f=0):
    d = json.dumps(m).encode()
    return bytes([f]) + struct.pack('>I', len(d)) + d
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, st, ct, b):
        self.send_response(st)
        self.send_header('Content-Type', ct)
        self.send_header('Content-Length', str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def answer(self):
        n = int(self.headers.get('Content-Length') or 0)
        if n:
            self.rfile.read(n)
        tok = self.headers.get('X-Access-Token')
        with open(log, 'a') as f:
            f.write('%s %s %s\n' % (self.command, self.path, tok))
        if self.path == '/sandboxes/abc':
            self.reply(200, 'application/json', json.dumps({"sandboxID": "abc",
                "templateID": "base", "state": "running", "startedAt": "2026-12-01T00:00:00Z",
                "metadata": {"io.sbx.managed": "1"}, "envdAccessToken": "stale"}).encode())
        elif self.path == '/sandboxes/abc/connect':
            self.reply(200, 'application/json', json.dumps({"sandboxID": "abc",
                "templateID": "base", "envdAccessToken": "good"}).encode())
        elif self.path == '/process.Process/Start' and tok != 'good':
            self.reply(401, 'application/json', b'{"code":"unauthenticated","message":"bad token"}')
        elif self.path == '/process.Process/Start':
            self.reply(200, 'application/connect+json', frame({"event": {"start": {"pid": 7}}}) +
                frame({"event": {"data": {"stdout": "aGkK"}}}) +
                frame({"event": {"end": {"exitCode": 3, "exited": True, "status": "exit status 3"}}}) +
                frame({}, 2))
        else:
            self.reply(404, 'application/json', b'{"code":404,"message":"no"}')
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()
EOF
	FAKE_PID=$!
	for ((i = 0; i < 100; i++)); do
		curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break
		sleep 0.05
	done
	E2B_API_URL=http://127.0.0.1:$port run --separate-stderr sbx-exec -b e2b --id abc -- job
	assert_failure 3
	assert_output hi
	assert_equal "$stderr" ""
	assert_equal "$(grep -c '^POST /process.Process/Start stale' "$BATS_TEST_TMPDIR/fake.log")" 1
	assert_equal "$(grep -c '^POST /process.Process/Start good' "$BATS_TEST_TMPDIR/fake.log")" 1
}

@test "a DELETE is retried on 502 and 503, and a 404 then is already gone" {
	local box="(200, 'application/json', '{\"sandboxID\":\"abc\",\"templateID\":\"base\",\"startedAt\":\"2026-12-01T00:00:00Z\",\"state\":\"running\",\"metadata\":{\"io.sbx.managed\":\"1\"}}')"
	# The sandbox is there (sbx-kill asks, then the kill itself), then
	# the DELETE fails twice, and the third finds it gone.
	fake_start "[$box, $box, (502, 'text/plain', 'bad gateway'), (503, 'text/plain', 'unavailable'), (404, 'application/json', '{\"code\":404,\"message\":\"Sandbox abc not found\"}')]"
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-kill -b e2b --id abc
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" gone
	assert_equal "$(grep -c '^DELETE /sandboxes/abc' "$BATS_TEST_TMPDIR/fake.log")" 3
}

# Run a shell command line on a real terminal (script(1) gives it a pty),
# with the terminal's CRs removed. script's stdin is a fifo a sleep holds
# open: at EOF script would type the EOF character into the terminal.
in_term() {
	local p rc=0

	rm -f term-in
	mkfifo term-in
	sleep 60 >term-in 3>&- &
	p=$!
	SHELL=/bin/bash script -qec "$1" /dev/null <term-in | tr -d '\r' || rc=$?
	kill "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	return "$rc"
}

@test "sbx-exec -b e2b -t gives the command a terminal of the caller's size, and the caller's TERM" {
	new_e2b
	run in_term 'stty cols 100 rows 30; TERM=vt220 sbx-exec -t -s s.json -- sh -c "test -t 0 && test -t 1 && tty; stty size; echo \$TERM"'
	assert_success
	assert_line --index 0 --regexp '^/dev/pts/[0-9]+$'
	assert_line --index 1 '30 100'
	assert_line --index 2 vt220
	[ "${#lines[@]}" -eq 3 ]
	# Without -t, on the same terminal, no terminal inside.
	run in_term 'sbx-exec -s s.json -- sh -c "test -t 0 || test -t 1 || echo none"'
	assert_success
	assert_output none
	# No terminal outside: 80x24, as envd takes a pty of no size.
	run bash -c 'sbx-exec -t -s s.json -- stty size </dev/null | tr -d "\r"'
	assert_success
	assert_output '24 80'
}

@test "sbx-exec -b e2b -t sends the terminal's input to the pty and restores the terminal" {
	new_e2b
	run bash -c "printf 'hello\n' | script -qec \"stty -g >before; sbx-exec -t -s s.json -- sh -c 'read x; echo got=\\\$x'; stty -g >after\" /dev/null | tr -d '\r'"
	assert_success
	assert_line got=hello
	cmp before after
	# The caller's stdin at its end is ^D for the command.
	run bash -c 'sbx-exec -t -s s.json -- sh -c "cat; echo eof" </dev/null | tr -d "\r"'
	assert_success
	assert_output eof
}

@test "sbx-exec -b e2b -t passes a window size change on to the command" {
	new_e2b
	sbx-exec -s s.json -i -- sh -c 'cat >/tmp/winch.sh' <<-'SH'
	trap 'stty size; [ "$(stty size)" = "24 120" ] && exit 0' WINCH
	touch /tmp/trap-set
	n=0
	while [ $n -lt 30 ]; do
		sleep 1 &
		wait
		n=$((n + 1))
	done
	exit 1
	SH
	# The outer terminal is resized once the command has set its trap.
	run in_term 'stty cols 80 rows 24
	    (for i in $(seq 200); do
		sbx-exec -s s.json -- test -e /tmp/trap-set && break
		sleep 0.1
	    done; stty cols 120 </dev/tty) &
	    sbx-exec -t -s s.json -- sh /tmp/winch.sh'
	assert_success
	[ "${lines[-1]}" = '24 120' ]
	for l in "${lines[@]}"; do
		[[ "$l" == '24 80' || "$l" == '24 120' ]] || fail "saw '$l'"
	done
}

@test "sbx-create -b e2b records the template's size; --cpus/--memory beyond it is exit 2 and leaves no sandbox" {
	new_e2b
	run sbxd_api GET "/sandboxes/$(e2b_id)"
	assert_equal "$(jq -c '{vcpus: .cpuCount, memory_mib: .memoryMB}' <<<"$output")" \
	    "$(jq -c .resources s.json)"
	# sbxd's sandboxes have its default limits: 2 CPUs, 512 MiB.
	assert_equal "$(jq -c .resources s.json)" '{"vcpus":2,"memory_mib":512}'
	before=$(sbxd_api GET /v2/sandboxes | jq length)
	for more in '--cpus 3' '--memory 1G' '--cpus 4 --memory 2G'; do
		run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s t.json $more
		assert_failure 2
		assert_output ""
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == "sbx-create: template 'base' gives 2 vCPU and 512 MiB, less than --"* ]]
		[ ! -e t.json ]
		assert_equal "$(sbxd_api GET /v2/sandboxes | jq length)" "$before"
	done
	# Less than the template gives: made, and said (it is billed).
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s t.json --cpus 0.5 --memory 256M
	assert_success
	jq -r .id <<<"$output" >>e2b.ids
	[[ $stderr == *"gives 2 vCPU and 512 MiB, more than --cpus/--memory ask"* ]]
	assert_equal "$(jq -c .resources t.json)" '{"vcpus":2,"memory_mib":512}'
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s u.json --cpus 2 --memory 512M
	assert_success
	jq -r .id <<<"$output" >>e2b.ids
	assert_equal "$stderr" ""
}

@test "sbx-create -b e2b: no default limit is asked of a template-sized sandbox, even one beyond it; -v says so" {
	run --separate-stderr env SBX_LIMITS_MEMORY=4G SBX_LIMITS_CPUS=8 \
	    sbx-create -v -b e2b -E "$SBXD_URL" -s s.json
	assert_success
	jq -r .id <<<"$output" >>e2b.ids
	[[ $stderr == *"sbx-create: backend 'e2b' sizes a sandbox by its template: no default memory limit"* ]]
	[[ $stderr == *"no default cpu limit"* ]]
	[[ $stderr == *"no default pids limit"* ]]
	# A flag is a request, checked against the template as before.
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s t.json --memory 4G
	assert_failure 2
	[ ! -e t.json ]
}

@test "sbx-cost on an e2b sandbox applies the config's per vCPU-second and GiB-second rates to its size" {
	mkdir -p "$XDG_CONFIG_HOME/sbx"
	printf '%s\n' 'cost.e2b.vcpu_second = 0.000014' 'cost.e2b.gib_second = 0.0000045' \
	    >"$XDG_CONFIG_HOME/sbx/config"
	new_e2b
	run sbx-cost -s s.json
	assert_success
	assert_equal "$(jq -r .rate_source <<<"$output")" \
	    "config cost.e2b.vcpu_second+gib_second (2 vCPU, 0.5 GiB)"
	# (2 x 0.000014 + 0.5 x 0.0000045) x 3600 = 0.1089 an hour
	assert_equal "$(jq -r .rate <<<"$output")" 0.1089
	sbx-kill -s s.json >/dev/null
	# As if it had run two hours more.
	jq '.segments[0][0] -= 7200' s.json >s2.json && mv s2.json s.json
	run sbx-cost -s s.json
	assert_success
	secs=$(jq '[.segments[] | .[1] - .[0]] | add' s.json)
	vcpus=$(jq .resources.vcpus s.json)
	mib=$(jq .resources.memory_mib s.json)
	# In 10^-12 a second, then 4 decimals, half up.
	per=$((vcpus * 14000000 + mib * 4500000 / 1024))
	units=$(((secs * per + 50000000) / 100000000))
	assert_equal "$(jq -r .running_s <<<"$output")" "$secs"
	assert_equal "$(jq -r .estimated <<<"$output")" "$(printf '%d.%04d' $((units / 10000)) $((units % 10000)))"
	[ "$units" -gt 0 ]
}

@test "sbx-gc -b e2b kills sbx's sandboxes by age and label, and those no state names; never another's" {
	export E2B_API_URL=$SBXD_URL
	mkdir states
	mk() { sbx-create -s - -b e2b "$@" | jq -r .id | tee -a e2b.ids; }
	kept=$(mk -s states/a.json -l role=kept)
	orphan=$(mk -l role=orphan)
	old=$(mk -s old.json -l role=old)
	foreign=$(sbxd_create | jq -r .sandboxID)
	echo "$foreign" >>e2b.ids
	alive() { [ "$(sbxd_api GET "/sandboxes/$1" | jq -r .sandboxID)" = "$1" ]; }
	# By label and age.
	run --separate-stderr sbx-gc -b e2b -g 0 -o 0 -l role=old
	assert_success
	assert_equal "$(jq -c . <<<"$output")" "{\"id\":\"$old\",\"reason\":\"older-than\",\"action\":\"killed\"}"
	run alive "$old"
	assert_failure
	alive "$kept" && alive "$orphan" && alive "$foreign"
	# Those no state file under states/ names: the orphan only.
	run --separate-stderr sbx-gc -b e2b -g 0 -d states
	assert_success
	assert_equal "$(jq -c . <<<"$output")" "{\"id\":\"$orphan\",\"reason\":\"unreferenced\",\"action\":\"killed\"}"
	run alive "$orphan"
	assert_failure
	alive "$kept" && alive "$foreign"
	# Within the grace period (the default 300 s), an orphan is kept.
	young=$(mk -l role=young)
	run --separate-stderr sbx-gc -b e2b -d states
	assert_success
	assert_output ""
	alive "$young"
}

@test "--disk beyond the template's disk (diskSizeMB) is exit 2 and the sandbox goes again; limits.disk is not checked" {
	local made='{"sandboxID":"abc","templateID":"base","clientID":"c","envdVersion":"0.2.0"}'
	local detail='{"sandboxID":"abc","templateID":"base","clientID":"c","envdVersion":"0.2.0","startedAt":"2026-12-01T00:00:00Z","endAt":"2026-12-01T01:00:00Z","state":"running","cpuCount":2,"memoryMB":512,"diskSizeMB":512,"metadata":{"io.sbx.managed":"1"}}'
	fake_start "[(201, 'application/json', '$made'), (200, 'application/json', '$detail'), (204, 'text/plain', '')]"
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-create -b e2b -s s.json --disk 1G
	assert_failure 2
	assert_output ""
	assert_equal "$stderr" "sbx-create: template 'base' gives a disk of 512 MiB, less than --disk asks: E2B sizes a sandbox by its template (build one with more)"
	[ ! -e s.json ]
	assert_equal "$(grep -c '^DELETE /sandboxes/abc' "$BATS_TEST_TMPDIR/fake.log")" 1
	# sbxd says its sandboxes' disk (limits.disk, 10G by default).
	E2B_API_URL= run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s s.json --disk 20G
	assert_failure 2
	assert_output ""
	assert_equal "$stderr" "sbx-create: template 'base' gives a disk of 10240 MiB, less than --disk asks: E2B sizes a sandbox by its template (build one with more)"
	[ ! -e s.json ]
	# A server that does not say its disk cannot be checked.
	local nodisk=${detail/\"diskSizeMB\":512,/}
	kill "$FAKE_PID"
	wait "$FAKE_PID" 2>/dev/null || true
	fake_start "[(201, 'application/json', '$made'), (200, 'application/json', '$nodisk'), (204, 'text/plain', '')]"
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-create -b e2b -s s.json --disk 64M
	assert_failure 2
	[[ "$stderr" == "sbx-create: '"*"' did not say the disk size of sandbox 'abc' (--disk)" ]]
	[ ! -e s.json ]
	# The default is the template's business: not checked.
	SBX_LIMITS_DISK=20G run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -s s.json
	assert_success
	jq -r .id <<<"$output" >>e2b.ids
}
