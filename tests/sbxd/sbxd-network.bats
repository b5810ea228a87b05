#!/usr/bin/env bats
# sbxd's E2B network API: PUT /sandboxes/ID/network (E2B's update: the
# whole replaced, what it omits cleared), egressProxy at create and in
# PUT, and the network of GET's detail (never a password). What a
# sandbox's net.json says is what its sbx-netd enforces (tests/network*.bats
# and tests/backend/e2b show the traffic).
load ../lib/helper
load ../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
	PW=pw-$RANDOM-$RANDOM-secret
}

# A new sandbox; sets ID and DIR (its local directory). [JSON body]
box() {
	local out
	out=$(sbxd_create "$@")
	ID=$(jq -r .sandboxID <<<"$out")
	[ ${#ID} = 20 ] || { echo "no sandbox: $out" >&2; return 1; }
	DIR=$(sbx-ls -j | jq -r --arg id "$ID" 'select(.labels.sbxd == $id) | .dir')
	[ -d "$DIR" ] || { echo "no directory for $ID" >&2; return 1; }
}

# Status code of a PUT of $2 to sandbox $1's network; `msg` its message.
put() {
	curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' -X PUT \
	    -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
	    -d "$2" "$SBXD_URL/sandboxes/$1/network"
}

msg() {
	jq -r .message "$BATS_TEST_TMPDIR/body"
}

rules() {
	jq -c '[.allow_out, .deny_out, .egress_proxy]' "$DIR/net.json"
}

detail_net() {
	sbxd_api GET "/sandboxes/$1" | jq -c .network
}

@test "PUT network replaces allowOut and denyOut; GET's detail says the new ones" {
	box '{"templateID":"base","timeout":60,"network":{"allowOut":["198.18.1.1"],"denyOut":["0.0.0.0/0"]}}'
	assert_equal "$(detail_net "$ID")" '{"allowOut":["198.18.1.1"],"denyOut":["0.0.0.0/0"]}'
	run put "$ID" '{"allowOut":["198.18.1.2","*.a.test"],"denyOut":["0.0.0.0/0"]}'
	assert_output 204
	[ ! -s "$BATS_TEST_TMPDIR/body" ]
	run rules
	assert_output '[["198.18.1.2","*.a.test"],["0.0.0.0/0"],null]'
	assert_equal "$(detail_net "$ID")" '{"allowOut":["198.18.1.2","*.a.test"],"denyOut":["0.0.0.0/0"]}'
}

@test "PUT network: what the body omits is cleared" {
	box '{"templateID":"base","timeout":60,"network":{"allowOut":["198.18.1.1"],"denyOut":["0.0.0.0/0"]}}'
	run put "$ID" '{"denyOut":["10.0.0.0/8"]}'
	assert_output 204
	run rules
	assert_output '[[],["10.0.0.0/8"],null]'
	run put "$ID" '{}'
	assert_output 204
	run rules
	assert_output '[[],[],null]'
	assert_equal "$(detail_net "$ID")" '{}'
}

@test "PUT network is checked as E2B checks it: 400, and the rules stay" {
	box '{"templateID":"base","timeout":60,"network":{"denyOut":["10.0.0.0/8"]}}'
	run put "$ID" '{"allowOut":["a.test"]}'
	assert_output 400
	assert_equal "$(msg)" "allowOut with domains needs denyOut to hold 0.0.0.0/0"
	run put "$ID" '{"denyOut":["a.test"]}'
	assert_output 400
	assert_equal "$(msg)" "denyOut takes IP addresses and CIDRs, not domains ('a.test')"
	run put "$ID" '{"allowOut":["10.0.0.0/33"]}'
	assert_output 400
	run put "$ID" '{"allow_internet_access":"no"}'
	assert_output 400
	assert_equal "$(msg)" 'Error when parsing request: "allow_internet_access" must be a boolean'
	run put "$ID" '{"egressProxy":{"address":"127.0.0.1:1080","password":"x"}}'
	assert_output 400
	assert_equal "$(msg)" "egressProxy.password needs egressProxy.username"
	run put "$ID" '{"egressProxy":{"address":"nowhere"}}'
	assert_output 400
	assert_equal "$(msg)" "invalid egressProxy.address 'nowhere' (want host:port)"
	run rules
	assert_output '[[],["10.0.0.0/8"],null]'
}

@test "PUT network with allow_internet_access false denies all but allowOut" {
	box '{"templateID":"base","timeout":60}'
	run put "$ID" '{"allow_internet_access":false,"allowOut":["198.18.1.1"]}'
	assert_output 204
	run rules
	assert_output '[["198.18.1.1"],["all"],null]'
	run put "$ID" '{"allow_internet_access":false}'
	assert_output 204
	run rules
	assert_output '[[],["all"],null]'
}

@test "PUT network on a sandbox made without internet gives it a network: a sbx-netd that lets out, recorded for kill" {
	local net i
	box '{"templateID":"base","timeout":60,"allow_internet_access":false}'
	run put "$ID" '{"allow_internet_access":false}'
	assert_output 204
	[ "$(jq -r .network "$DIR/net.json")" = deny ]
	assert_equal "$(sbxd_api GET "/sandboxes/$ID" | jq -r .allowInternetAccess)" false
	run put "$ID" '{"allowOut":["198.18.1.1"],"denyOut":["0.0.0.0/0"]}'
	assert_output 204
	[ ! -s "$BATS_TEST_TMPDIR/body" ]
	run rules
	assert_output '[["198.18.1.1"],["0.0.0.0/0"],null]'
	[ "$(jq -r .network "$DIR/net.json")" = null ]
	[ "$(jq -r .network "$DIR/meta.json")" = allow ]
	net=$(jq -r .net_pid "$DIR/meta.json")
	[[ $net =~ ^[0-9]+$ ]]
	[ "$(basename "$(readlink "/proc/$net/exe")")" = sbx-netd ]
	assert_equal "$(sbxd_api GET "/sandboxes/$ID" | jq -r .allowInternetAccess)" true
	assert_equal "$(detail_net "$ID")" '{"allowOut":["198.18.1.1"],"denyOut":["0.0.0.0/0"]}'
	# And closed again: every connection denied, the helper kept.
	run put "$ID" '{"allow_internet_access":false}'
	assert_output 204
	run rules
	assert_output '[[],["all"],null]'
	[ "$(jq -r .net_pid "$DIR/meta.json")" = "$net" ]
	assert_equal "$(sbxd_api GET "/sandboxes/$ID" | jq -r .allowInternetAccess)" false
	sbxd_api DELETE "/sandboxes/$ID" >/dev/null
	for ((i = 0; i < 100; i++)); do
		[ -e "/proc/$net" ] || break
		sleep 0.05
	done
	[ ! -e "/proc/$net" ]
	[ ! -e "$DIR" ]
}

@test "PUT network on a paused sandbox made without internet is 409, and nothing changes" {
	box '{"templateID":"base","timeout":60,"allow_internet_access":false}'
	run sbxd_api POST "/sandboxes/$ID/pause"
	run put "$ID" '{"allowOut":["198.18.1.1"]}'
	assert_output 409
	assert_equal "$(msg)" "Sandbox \"$ID\" is paused: resume it to give it a network or network.rules"
	[ "$(jq -r .network "$DIR/net.json")" = deny ]
}

@test "PUT network of no sandbox is 404" {
	run put nosuchsandbox0000000 '{}'
	assert_output 404
}

@test "egressProxy at create and in PUT: the URL in net.json, the password only in net.secret.json, never in GET" {
	box '{"templateID":"base","timeout":60,"network":{"egressProxy":{"address":"127.0.0.1:1080"}}}'
	run rules
	assert_output '[[],[],"socks5://127.0.0.1:1080"]'
	assert_equal "$(detail_net "$ID")" '{"egressProxy":{"address":"127.0.0.1:1080"}}'
	run put "$ID" "{\"denyOut\":[\"10.0.0.0/8\"],\"egressProxy\":{\"address\":\"198.18.0.2:1080\",\"username\":\"alice\",\"password\":\"$PW\"}}"
	assert_output 204
	run rules
	assert_output '[[],["10.0.0.0/8"],"socks5://alice@198.18.0.2:1080"]'
	run jq -r .egress_proxy.password "$DIR/net.secret.json"
	assert_output "$PW"
	[ "$(stat -c %a "$DIR/net.secret.json")" = 600 ]
	run sbxd_api GET "/sandboxes/$ID"
	refute_output --partial "$PW"
	assert_equal "$(jq -c .network <<<"$output")" '{"denyOut":["10.0.0.0/8"],"egressProxy":{"address":"198.18.0.2:1080","username":"alice"}}'
	printf '%s\n' "$PW" >"$BATS_TEST_TMPDIR/pw"
	! grep -rqF -f "$BATS_TEST_TMPDIR/pw" "$SBXD_DIR/log" "$SBXD_DIR/store" "$DIR/net.json" "$DIR/meta.json"
	# Omitted: the proxy goes, its password too.
	run put "$ID" '{"denyOut":["10.0.0.0/8"]}'
	assert_output 204
	run rules
	assert_output '[[],["10.0.0.0/8"],null]'
	run jq -c . "$DIR/net.secret.json"
	assert_output '{}'
}
