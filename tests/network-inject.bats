#!/usr/bin/env bats
# --inject-header on the local backend: sbx-netd adds a header to the
# sandbox's requests to a host, over HTTP and HTTPS (terminated with a CA
# made for that sandbox, which its trust store holds), and the value is
# nowhere the sandbox or the host's other processes can see.  Real traffic
# to the tests' outside world (lib/networld.bash), plus a server of ours in
# it (lib/inject-server.py): keep-alive, chunked bodies, an untrusted host.

load lib/helper
load lib/networld

setup_file() {
	sbx_setup_file
	networld_start
	own_network_or_stop
	# sbx-netd trusts the world's CA for the hosts it verifies.
	export SBX_NETWORK_CA_FILE=$NETWORLD_CA
	# The throwaway value every test injects and then looks for.
	export SBX_TEST_KEY=sbxinj-$RANDOM$RANDOM$RANDOM-value
	NETWORLD_D=$(networld_addr d.test)
	NETWORLD_E=$(networld_addr e.test)
	export NETWORLD_D NETWORLD_E
	start_inject_server
}
teardown_file() {
	if [ -s "$NETWORLD_DIR/inject.pid" ]; then
		kill "$(cat "$NETWORLD_DIR/inject.pid")" 2>/dev/null || true
	fi
	sbx_teardown_file
	networld_stop
}
setup() {
	sbx_setup
}

# As tests/network.bats: no packet before sbx-netd is known to use the
# world's resolver from a namespace of the sandbox's own.
own_network_or_stop() {
	local s=$BATS_FILE_TMPDIR/probe.json dir pid dns
	sbx-create -n allow -s "$s" >/dev/null || return 1
	dir=$(jq -r .ref.dir "$s")
	pid=$(jq -r .pid "$dir/meta.json")
	dns=$(jq -c .dns "$dir/net.json" 2>/dev/null) || dns=
	if [ "$(readlink "/proc/$pid/ns/net")" = "$(readlink /proc/self/ns/net)" ] ||
	    [ "$dns" != "[\"$NETWORLD_DNS\"]" ]; then
		sbx-kill -q -s "$s" >/dev/null 2>&1
		echo "network-inject.bats: -n allow is not a namespace of its own" \
		    "with the world's resolver; no test run" >&2
		return 1
	fi
	sbx-kill -q -s "$s" >/dev/null
}

# Our server in the world: d.test 8080 (HTTP/1.1) and 8443 (HTTPS, the
# world's leaf), e.test 8443 with a certificate nobody signed.
start_inject_server() {
	local i here
	here=$BATS_TEST_DIRNAME
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	    -nodes -keyout "$NETWORLD_DIR/untrusted.key" \
	    -out "$NETWORLD_DIR/untrusted.pem" -days 2 -subj /CN=e.test \
	    -addext subjectAltName=DNS:e.test >/dev/null 2>&1 || return 1
	chmod 644 "$NETWORLD_DIR/untrusted.key"
	ip netns exec "$NETWORLD_NS" /usr/bin/python3 "$here/lib/inject-server.py" \
	    "$NETWORLD_DIR" "$NETWORLD_D" "$NETWORLD_E" </dev/null \
	    >"$NETWORLD_DIR/inject.err" 2>&1 3>&- &
	echo "$!" >"$NETWORLD_DIR/inject.pid"
	for ((i = 0; i < 200; i++)); do
		[ -e "$NETWORLD_DIR/inject-ready" ] && return 0
		sleep 0.05
	done
	cat "$NETWORLD_DIR/inject.err" >&2
	return 1
}

sdir() {
	jq -r .ref.dir "${1:-$BATS_TEST_TMPDIR/s.json}"
}

# The JSON in $output has $1 (a jq path) exactly equal to $2 (non-empty
# output required: jq 1.6 passes on none).
field_is() {
	local got
	[ -n "$output" ] || { echo "no output"; return 1; }
	got=$(jq -r "$1" <<<"$output") || { echo "not JSON: $output"; return 1; }
	[ "$got" = "$2" ] || { echo "$1 is '$got', not '$2', in: $output"; return 1; }
}

# The log's lines that jq FILTER selects, compact.
log_lines() {
	sbx-net log -s "$BATS_TEST_TMPDIR/s.json" | jq -c "select($1)"
}

# Wait (10 s at most) for N log lines matching FILTER: a connection's line
# comes when it ends.
wait_log() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(log_lines "$2" | wc -l)" -ge "$1" ] && return 0
		sleep 0.05
	done
	echo "fewer than $1 log lines match $2:"
	sbx-net log -s "$BATS_TEST_TMPDIR/s.json"
	return 1
}

# A sandbox injecting x-api-key: $SBX_TEST_KEY into requests to a.test and
# d.test (extra arguments go to sbx-create).
inject_sandbox() {
	new_sandbox -n allow --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY' \
	    --inject-header 'd.test:x-api-key=env:SBX_TEST_KEY' "$@"
}

# Nothing under the store but what was there: no sandbox directory made.
store_listing() {
	ls -A "$SBX_LOCAL_DIR" | grep -v '^\.' | sort
}

# --- injection ----------------------------------------------------------------

@test "inject: HTTP, the server sees the header, the sandbox's own value replaced" {
	inject_sandbox
	run sx curl -sS --max-time 5 -H 'X-Api-Key: mine' -H 'x-other: kept' http://a.test/h
	assert_success
	field_is .tls false
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	field_is '.headers["x-other"]' kept
	field_is .path /h
	wait_log 1 '.proto == "tcp" and .port == 80'
	run log_lines '.proto == "tcp" and .port == 80'
	field_is .verdict inject
	field_is .host a.test
	[ "$(jq -r .bytes_in <<<"$output")" -gt 0 ]
}

@test "inject: HTTPS, terminated with the sandbox's CA (curl's default trust), SNI kept upstream" {
	inject_sandbox
	run sx curl -sS --max-time 5 -H 'x-api-key: mine' https://a.test/s
	assert_success
	field_is .tls true
	field_is .sni a.test
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	wait_log 1 '.proto == "tcp" and .port == 443'
	run log_lines '.proto == "tcp" and .port == 443'
	field_is .verdict inject
}

@test "inject: one keep-alive connection, two requests, both get the header (HTTP and HTTPS)" {
	inject_sandbox
	run sx curl -sS --max-time 5 http://d.test:8080/1 http://d.test:8080/2
	assert_success
	[ "$(jq -r '[.request, .path, .headers["x-api-key"]] | @tsv' <<<"$output")" = \
	    "$(printf '1\t/1\t%s\n2\t/2\t%s' "$SBX_TEST_KEY" "$SBX_TEST_KEY")" ]
	run sx curl -sS --max-time 5 https://d.test:8443/1 https://d.test:8443/2
	assert_success
	[ "$(jq -r '[.request, .path, .headers["x-api-key"]] | @tsv' <<<"$output")" = \
	    "$(printf '1\t/1\t%s\n2\t/2\t%s' "$SBX_TEST_KEY" "$SBX_TEST_KEY")" ]
	wait_log 1 '.proto == "tcp" and .port == 8443'
	[ "$(log_lines '.proto == "tcp" and .port == 8443' | wc -l)" = 1 ]
}

@test "inject: a chunked POST body arrives intact, and the next request on the connection too" {
	local sum
	inject_sandbox
	sx sh -c 'head -c 300000 /dev/urandom >/tmp/body'
	sum=$(sx sha256sum /tmp/body | cut -d' ' -f1)
	run sx curl -sS --max-time 10 -H 'Transfer-Encoding: chunked' \
	    --data-binary @/tmp/body https://d.test:8443/a https://d.test:8443/b
	assert_success
	[ "$(jq -r '[.request, .chunked, .body_bytes, .body_sha256, .headers["x-api-key"]] | @tsv' <<<"$output")" = \
	    "$(printf '1\ttrue\t300000\t%s\t%s\n2\ttrue\t300000\t%s\t%s' "$sum" "$SBX_TEST_KEY" "$sum" "$SBX_TEST_KEY")" ]
	# and with a Content-Length, plain HTTP
	run sx curl -sS --max-time 10 --data-binary @/tmp/body http://d.test:8080/c
	assert_success
	field_is .body_sha256 "$sum"
	field_is .chunked false
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
}

@test "inject: a host without injection is tunnelled untouched: the sandbox sees the world's certificate" {
	inject_sandbox
	sbx-exec -i -s s.json -- sh -c 'cat >/tmp/ca.pem' <"$NETWORLD_CA"
	run sx sh -c 'openssl s_client -connect c.test:443 -servername c.test </dev/null 2>/dev/null |
	    openssl x509 -noout -issuer'
	assert_success
	assert_output --partial "CN = sbx networld test CA"
	run sx curl -sS --max-time 5 --cacert /tmp/ca.pem -H 'x-api-key: mine' https://c.test/
	assert_success
	field_is '.headers["x-api-key"]' mine
	# an injected host's certificate is the sandbox's CA's
	run sx sh -c 'openssl s_client -connect a.test:443 -servername a.test </dev/null 2>/dev/null |
	    openssl x509 -noout -issuer'
	assert_success
	assert_output "issuer=CN = sbx sandbox $(sid) CA"
	wait_log 1 '.host == "c.test" and .proto == "tcp"'
	run log_lines '.host == "c.test" and .proto == "tcp"'
	[ "$(jq -r .verdict <<<"$output" | sort -u)" = allow ]
}

@test "inject: file: a 0600 file's value, one trailing newline dropped" {
	printf '%s\n' "$SBX_TEST_KEY" >"$BATS_TEST_TMPDIR/key"
	chmod 600 "$BATS_TEST_TMPDIR/key"
	new_sandbox -n allow --inject-header "a.test:authorization=file:$BATS_TEST_TMPDIR/key"
	run sx curl -sS --max-time 5 http://a.test/
	assert_success
	field_is .headers.authorization "$SBX_TEST_KEY"
	field_is '.headers["x-api-key"]' null
}

# --- the CA inside ------------------------------------------------------------

@test "the CA: curl, Python's ssl with capath=/etc/ssl/certs, and requests' variables" {
	inject_sandbox
	run sx sh -c 'curl -sS --max-time 5 https://a.test/ >/dev/null && echo curl ok'
	assert_output "curl ok"
	run sx python3 -c 'import json, ssl, urllib.request
c = ssl.create_default_context(capath="/etc/ssl/certs")
print(json.load(urllib.request.urlopen("https://a.test/", context=c))["headers"]["x-api-key"])'
	assert_success
	assert_output "$SBX_TEST_KEY"
	run sx sh -c 'echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS"'
	assert_output "/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/sbx-ca.pem"
	# the bundle is the host's and the CA
	run sx sh -c 'cmp /etc/ssl/certs/sbx-ca.pem "$(readlink -f /etc/ssl/certs/$(openssl x509 -noout -subject_hash -in /etc/ssl/certs/sbx-ca.pem).0)" &&
	    tail -c "$(wc -c </etc/ssl/certs/sbx-ca.pem)" /etc/ssl/certs/ca-certificates.crt | cmp - /etc/ssl/certs/sbx-ca.pem && echo same'
	assert_output same
	cmp <(sx cat /etc/ssl/certs/sbx-ca.pem) "$(sdir)/ca.crt"
	[ "$(sx wc -c /etc/ssl/certs/ca-certificates.crt | cut -d' ' -f1)" = \
	    "$(($(wc -c </etc/ssl/certs/ca-certificates.crt) + $(wc -c <"$(sdir)/ca.crt")))" ]
}

@test "the CA: node trusts it through NODE_EXTRA_CA_CERTS" {
	command -v node >/dev/null || skip "no node on this host"
	inject_sandbox
	run sx node -e 'require("https").get("https://a.test/", r => {
	  let b = ""; r.on("data", d => b += d);
	  r.on("end", () => console.log(JSON.parse(b).headers["x-api-key"])); })
	  .on("error", e => { console.log("error", e.message); process.exit(1); })'
	assert_success
	assert_output "$SBX_TEST_KEY"
}

@test "the CA: an image directory without /etc/ssl/certs gets one, owned by the sandbox's root" {
	local img=$BATS_TEST_TMPDIR/img a
	mkdir -p "$img/bin" "$img/etc"
	cp /bin/busybox "$img/bin/"
	for a in sh ls cat stat; do ln -s busybox "$img/bin/$a"; done
	inject_sandbox --image "$img"
	run sx stat -c '%u %a %n' /etc/ssl/certs /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/sbx-ca.pem
	assert_success
	assert_output "0 755 /etc/ssl/certs
0 644 /etc/ssl/certs/ca-certificates.crt
0 644 /etc/ssl/certs/sbx-ca.pem"
	# no bundle in the image: the CA alone
	cmp <(sx cat /etc/ssl/certs/ca-certificates.crt) "$(sdir)/ca.crt"
	[ -z "$(find "$img" -path '*ssl*')" ]
}

@test "the CA: a sandbox stopped and started again keeps its CA and variables, and injects" {
	inject_sandbox
	cp "$(sdir)/ca.crt" ca.before
	sbx-pause -q -m stop -s s.json
	sbx-pause -q -r -s s.json
	cmp ca.before "$(sdir)/ca.crt"
	run sx sh -c 'echo "$SSL_CERT_FILE"; curl -sS --max-time 5 https://a.test/'
	assert_success
	[ "${lines[0]}" = /etc/ssl/certs/ca-certificates.crt ]
	output=${lines[1]}
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
}

@test "rootless: injection over HTTPS, the CA trusted inside" {
	local d
	d=$(mktemp -d /tmp/sbx-rootless.XXXXXX)
	chown 65534:65534 "$d"
	chmod 755 "$d"
	nobody() {
		(cd "$d" && setpriv --reuid=65534 --regid=65534 --clear-groups \
		    env -i HOME="$d" SBX_LOCAL_DIR="$d/sb" SBX_NETWORK_DNS="$SBX_NETWORK_DNS" \
		    SBX_NETWORK_CA_FILE="$NETWORLD_CA" SBX_TEST_KEY="$SBX_TEST_KEY" \
		    PATH="$SBX_BIN:/usr/bin:/bin" "$@")
	}
	run nobody sbx-create -n allow -s "$d/s.json" \
	    --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY'
	assert_success
	run nobody sbx-exec -s "$d/s.json" -- curl -sS --max-time 5 https://a.test/
	nobody sbx-kill -q -s "$d/s.json" >/dev/null 2>&1 || true
	rm -rf "$d"
	assert_success
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
}

# --- the value is nowhere -----------------------------------------------------

@test "the value is nowhere: env, /proc, the sandbox's files, state, ref, sbx-ls, net files, argv" {
	local t0 dir pat
	t0=$(($(date +%s) - 1))
	run inject_sandbox
	assert_success
	dir=$(sdir)
	# the value, as a pattern that is not the value itself (grep's own
	# argv and environment must not match)
	pat="${SBX_TEST_KEY:0:6}[${SBX_TEST_KEY:6:1}]${SBX_TEST_KEY:7}"
	run sx curl -sS --max-time 5 http://a.test/
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	run sx sh -c 'env | grep -c KEY; cat /proc/[0-9]*/environ 2>/dev/null | tr "\0" "\n" | grep -c "$0"' "$pat"
	assert_output "0
0"
	# every file written since the sandbox was made (the CA's among them)
	run sx sh -c 'find / \( -path /proc -o -path /sys \) -prune -o -type f \
	    -newermt "@$1" -print 2>/dev/null >/tmp/newer
	    grep -c "^/etc/ssl/certs/sbx-ca.pem\$" /tmp/newer
	    tr "\n" "\0" </tmp/newer | xargs -0 -r grep -lE "$0"
	    grep -rlE "$0" /etc/ssl/certs; echo done' "$pat" "$t0"
	assert_output "1
done"
	run grep -rlE "$pat" "$dir/upper" "$BATS_TEST_TMPDIR/s.json" "$dir/net.json" \
	    "$dir/net.log" "$dir/netd.err" "$dir/meta.json"
	assert_failure 1
	assert_output ""
	run sh -c 'sbx-ls -j; cat "$0"' "$BATS_TEST_TMPDIR/s.json"
	assert_success
	[ -n "$output" ]
	refute_output --regexp "$pat"
	# no host process has it in its argv or (sbx-netd) its environment
	run sh -c 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" "\n" | grep -cE "$0"' "$pat"
	assert_output 0
	run grep -cE "$pat" "/proc/$(jq -r .net_pid "$dir/meta.json")/environ"
	assert_output 0
	# where it is: sbx-netd's own file, 0600
	[ "$(stat -c %a "$dir/net.secret.json")" = 600 ]
	grep -qE "$pat" "$dir/net.secret.json"
}

# --- failures -----------------------------------------------------------------

@test "inject: an upstream certificate nobody trusts: 502 to the sandbox and a deny line" {
	new_sandbox -n allow --inject-header 'e.test:x-api-key=env:SBX_TEST_KEY'
	run sx curl -sS --max-time 10 -o /dev/null -w '%{http_code}' https://e.test:8443/
	assert_success
	assert_output 502
	wait_log 1 '.proto == "tcp" and .port == 8443'
	run log_lines '.proto == "tcp" and .port == 8443'
	field_is .verdict deny
	field_is .host e.test
	[[ "$(jq -r .error <<<"$output")" == "upstream certificate: "* ]]
}

@test "--inject-header env: with the variable unset: exit 2, nothing created" {
	local before
	before=$(store_listing)
	run --separate-stderr env -u SBX_TEST_NOPE sbx-create -s s.json -n allow \
	    --inject-header 'a.test:x-api-key=env:SBX_TEST_NOPE'
	[ "$status" -eq 2 ]
	[ "$stderr" = "sbx-create: --inject-header 'a.test:x-api-key=env:SBX_TEST_NOPE': SBX_TEST_NOPE is not set" ]
	[ -z "$output" ]
	[ ! -e s.json ]
	[ "$(store_listing)" = "$before" ]
}

@test "--inject-header file: with mode 0644: exit 2, nothing created" {
	local before
	before=$(store_listing)
	echo v >key
	chmod 644 key
	run --separate-stderr sbx-create -s s.json -n allow \
	    --inject-header "a.test:x-api-key=file:$PWD/key"
	[ "$status" -eq 2 ]
	[ "$stderr" = "sbx-create: invalid header injection 'a.test:x-api-key=file:$PWD/key': '$PWD/key' must be a regular file of mode 0600 owned by you" ]
	[ ! -e s.json ]
	[ "$(store_listing)" = "$before" ]
}

@test "inject: secret:, read at each request: a new value takes effect, a removed one is a 502" {
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/cfg
	printf '%s' "$SBX_TEST_KEY" | sbx-secret set tkey >/dev/null
	new_sandbox -n allow --inject-header 'a.test:authorization=secret:TKEY'
	[ "$(jq -c .inject "$(sdir)/net.json")" = '[{"host":"a.test","name":"authorization"}]' ]
	[ "$(jq -c .inject "$(sdir)/net.secret.json")" = '[{"host":"a.test","name":"authorization","template":"${e2b.secrets.tkey}"}]' ]
	run sx curl -sS --max-time 5 http://a.test/1
	field_is .headers.authorization "$SBX_TEST_KEY"
	printf '%s' "$SBX_TEST_KEY-2" | sbx-secret set tkey >/dev/null
	run sx curl -sS --max-time 5 https://a.test/2
	field_is .headers.authorization "$SBX_TEST_KEY-2"
	sbx-secret rm tkey >/dev/null
	run sx curl -sS --max-time 5 -w '%{http_code}' https://a.test/3
	assert_success
	assert_output "sbx-netd: no secret 'tkey'
502"
	wait_log 1 '.proto == "tcp" and .error != null'
	run log_lines '.proto == "tcp" and .error != null'
	field_is .error "no secret 'tkey'"
	refute_output --partial "$SBX_TEST_KEY"
}

@test "--inject-header: needs -n allow; a bad host or name; a missing secret: exit 2" {
	run --separate-stderr sbx-create -s s.json --inject-header 'a.test:x=env:SBX_TEST_KEY'
	[ "$status" -eq 2 ]
	[ "$stderr" = "sbx-create: --inject-header needs --network allow" ]
	run --separate-stderr sbx-create -s s.json -n allow --inject-header '1.2.3.4:x=env:SBX_TEST_KEY'
	[ "$status" -eq 2 ]
	[ "$stderr" = "sbx-create: invalid header injection '1.2.3.4:x=env:SBX_TEST_KEY': the host must be a domain or *.domain" ]
	run --separate-stderr sbx-create -s s.json -n allow --inject-header 'a.test:x y=env:SBX_TEST_KEY'
	[ "$status" -eq 2 ]
	[ "$stderr" = "sbx-create: invalid header injection 'a.test:x y=env:SBX_TEST_KEY': invalid header name" ]
	XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/cfg run --separate-stderr sbx-create -s s.json \
	    -n allow --inject-header 'a.test:x=secret:k'
	[ "$status" -eq 2 ]
	[ "$stderr" = "sbx-create: --inject-header 'a.test:x=secret:k': no secret 'k'" ]
	[ ! -e s.json ]
}
