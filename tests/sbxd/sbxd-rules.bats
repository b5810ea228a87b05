#!/usr/bin/env bats
# sbxd: E2B's network.rules at create (header transforms, with
# ${e2b.secrets.NAME} placeholders) become the sandbox's injection rules,
# and PUT /sandboxes/ID/network replaces them; no answer ever carries a
# header value. The requests go to the tests' outside world
# (lib/networld.bash): no packet leaves this machine.
load ../lib/helper
load ../lib/sbxd
load ../lib/networld

setup_file() {
	sbx_setup_file
	# First: sbxd's sandboxes take the world's resolver (SBX_NETWORK_DNS),
	# and their network helpers trust the world's CA.
	networld_start
	export SBX_NETWORK_CA_FILE=$NETWORLD_CA
	sbxd_start
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	networld_stop
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() {
	sbx_setup
	VALUE=tv-$RANDOM$RANDOM-never-returned
}

# post BODY: POST /sandboxes; the status on stdout, the body in ./body.
post() {
	curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' -X POST \
	    -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
	    --data-binary "$1" "$SBXD_URL/sandboxes"
}

msg() {
	jq -r .message "$BATS_TEST_TMPDIR/body"
}

# The directory of the sandbox sbxd calls $1.
box_dir() {
	sbx-ls -j | jq -r --arg id "$1" 'select(.labels.sbxd == $id) | .dir'
}

@test "a create with rules succeeds, and no answer holds a header value" {
	local body id dir
	body='{"templateID":"base","timeout":60,"network":{"allowOut":["api.a.test"],"denyOut":["0.0.0.0/0"],
	    "rules":{"API.a.test":[{"transform":{"headers":{"X-Api-Key":"'"$VALUE"'",
	    "Authorization":"Bearer ${e2b.secrets.model_key}"}}}],"*.b.test":[{}]}}}'
	run post "$body"
	assert_output 201
	id=$(jq -r .sandboxID "$BATS_TEST_TMPDIR/body")
	[ ${#id} = 20 ]
	run cat "$BATS_TEST_TMPDIR/body"
	refute_output --partial "$VALUE"
	run sbxd_api GET "/sandboxes/$id"
	assert_success
	[ -n "$output" ]
	refute_output --partial "$VALUE"
	refute_output --partial 'e2b.secrets'
	run sbxd_api GET /v2/sandboxes
	refute_output --partial "$VALUE"
	run sbxd_api GET /sandboxes
	refute_output --partial "$VALUE"
	run grep -c -- "$VALUE" "$SBXD_DIR/log"
	assert_output 0
	dir=$(box_dir "$id")
	[ -d "$dir" ]
	# Nothing that sbx-ls or the state shows holds it.
	run sbx-ls -j
	refute_output --partial "$VALUE"
	run grep -rlF -- "$VALUE" "$dir/meta.json" "$SBXD_DIR/store"
	assert_output ""
	# What sbx-create writes from the spec (once the injection lands):
	# the values in net.secret.json alone, net.json only host and name.
	[ -e "$dir/net.secret.json" ] ||
	    skip "sbx-create does not write net.secret.json yet (the injection's side)"
	run jq -c '.inject' "$dir/net.secret.json"
	assert_output '[{"host":"api.a.test","name":"X-Api-Key","value":"'"$VALUE"'"},{"host":"api.a.test","name":"Authorization","template":"Bearer ${e2b.secrets.model_key}"}]'
	[ "$(stat -c %a "$dir/net.secret.json")" = 600 ]
	run jq -c '.inject' "$dir/net.json"
	assert_output '[{"host":"api.a.test","name":"X-Api-Key"},{"host":"api.a.test","name":"Authorization"}]'
	run grep -c -- "$VALUE" "$dir/net.json"
	assert_output 0
}

@test "rules with no way out at all are inert, as on E2B: the sandbox has no network" {
	run post '{"templateID":"base","timeout":60,"allow_internet_access":false,
	    "network":{"rules":{"a.test":[{"transform":{"headers":{"X":"'"$VALUE"'"}}}]}}}'
	assert_output 201
	run jq -r .sandboxID "$BATS_TEST_TMPDIR/body"
	run sbxd_api GET "/sandboxes/$output"
	refute_output --partial "$VALUE"
	assert_equal "$(jq -r .allowInternetAccess <<<"$output")" false
}

@test "empty rules, an empty rule list and a rule without transform are taken" {
	local r
	for r in '{}' '{"a.test":[]}' '{"a.test":[{}]}' '{"a.test":[{"transform":{}}]}' \
	    '{"a.test":[{"transform":{"headers":{}}}]}' 'null'; do
		run post '{"templateID":"base","timeout":60,"network":{"rules":'"$r"'}}'
		assert_output 201
	done
}

@test "bad rules are 400 with a clear message, and nothing is created" {
	local before
	before=$(sbx-ls -j | wc -l)
	run post '{"templateID":"base","network":{"rules":[]}}'
	assert_output 400
	assert_equal "$(msg)" 'Error when parsing request: "network.rules" must be an object'
	run post '{"templateID":"base","network":{"rules":{"10.0.0.1":[]}}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules: '10.0.0.1' is not a domain or *.domain"
	run post '{"templateID":"base","network":{"rules":{"*":[]}}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules: '*' is not a domain or *.domain"
	run post '{"templateID":"base","network":{"rules":{"a.test":{}}}}'
	assert_output 400
	assert_equal "$(msg)" 'network.rules["a.test"] must be an array of rules'
	run post '{"templateID":"base","network":{"rules":{"a.test":["x"]}}}'
	assert_output 400
	assert_equal "$(msg)" 'network.rules["a.test"]: a rule must be an object'
	run post '{"templateID":"base","network":{"rules":{"a.test":[{"match":{}}]}}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules[\"a.test\"]: 'match' is not supported (only transform)"
	run post '{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"body":"x"}}]}}}'
	assert_output 400
	assert_equal "$(msg)" 'network.rules["a.test"]: a transform has only "headers", an object of strings'
	run post '{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"headers":{"Bad Name":"v"}}}]}}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules[\"a.test\"]: 'Bad Name' is not a header name"
	run post '{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"headers":{"X":1}}}]}}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules[\"a.test\"]: header 'X' must be a string"
	run post '{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"headers":{"X":"'"$VALUE"'\r\nEvil: 1"}}}]}}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules[\"a.test\"]: the value of header 'X' holds a line break or NUL"
	run post '{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"headers":{"X":"'"$VALUE"'${e2b.identity.tokens.aws}"}}}]}}}'
	assert_output 400
	assert_equal "$(msg)" 'network.rules["a.test"]: header '"'"'X'"'"' has a placeholder other than ${e2b.secrets.NAME}'
	run post '{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"headers":{"X":"${e2b.secrets.a b}"}}}]}}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules[\"a.test\"]: header 'X': invalid secret name 'a b' (want 1 to 64 of a-z, 0-9, _ and -)"
	run grep -c -- "$VALUE" "$SBXD_DIR/log"
	assert_output 0
	assert_equal "$(sbx-ls -j | wc -l)" "$before"
}

# PUT BODY to sandbox $1's network: the status on stdout, the body in
# ./body.
put() {
	curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' -X PUT \
	    -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
	    --data-binary "$2" "$SBXD_URL/sandboxes/$1/network"
}

# A request from inside sbxd's sandbox $1 to URL $2: the world's echo.
from_box() {
	sbx-exec -b local -I "$(sbx-ls -j | jq -r --arg id "$1" 'select(.labels.sbxd == $id) | .id')" -- \
	    curl -sS --max-time 5 "$2"
}

# The JSON in $output has $1 (a jq path) equal to $2 (output required:
# jq 1.6 passes on none).
field_is() {
	local got
	[ -n "$output" ] || { echo "no output"; return 1; }
	got=$(jq -r "$1" <<<"$output") || { echo "not JSON: $output"; return 1; }
	[ "$got" = "$2" ] || { echo "$1 is '$got', not '$2', in: $output"; return 1; }
}

# A sandbox with rules for a.test; sets ID and DIR.
rules_box() {
	run post '{"templateID":"base","timeout":120,"network":{"rules":{"a.test":[{"transform":{"headers":{"X-Old":"'"$VALUE"'"}}}]}}}'
	assert_output 201
	ID=$(jq -r .sandboxID "$BATS_TEST_TMPDIR/body")
	DIR=$(box_dir "$ID")
	[ -d "$DIR" ]
}

@test "PUT network with rules replaces the sandbox's header rules: the world's servers see the new headers, over HTTP and HTTPS" {
	local new=tn-$RANDOM$RANDOM-never-returned
	rules_box
	run from_box "$ID" http://a.test/
	assert_success
	field_is '.headers["x-old"]' "$VALUE"
	run put "$ID" '{"rules":{"c.test":[{"transform":{"headers":{"X-New":"'"$new"'"}}}]}}'
	assert_output 204
	[ ! -s "$BATS_TEST_TMPDIR/body" ]
	run from_box "$ID" http://c.test/
	assert_success
	field_is .server c.test
	field_is '.headers["x-new"]' "$new"
	run from_box "$ID" https://c.test/
	assert_success
	field_is '.headers["x-new"]' "$new"
	# The old rule is gone.
	run from_box "$ID" http://a.test/
	assert_success
	field_is '.headers["x-old"]' null
	# Names in net.json, the value in net.secret.json alone; no answer
	# and no log holds it.
	run jq -c .inject "$DIR/net.json"
	assert_output '[{"host":"c.test","name":"X-New"}]'
	run jq -c .inject "$DIR/net.secret.json"
	assert_output '[{"host":"c.test","name":"X-New","value":"'"$new"'"}]'
	run sbxd_api GET "/sandboxes/$ID"
	[ -n "$output" ]
	refute_output --partial "$new"
	run grep -c -e "$new" -e "$VALUE" "$SBXD_DIR/log" "$DIR/net.json" "$DIR/meta.json" "$DIR/net.log"
	assert_output "$SBXD_DIR/log:0
$DIR/net.json:0
$DIR/meta.json:0
$DIR/net.log:0"
}

@test "PUT network without rules clears them (E2B's update: what it omits is cleared)" {
	rules_box
	run put "$ID" '{"denyOut":["10.0.0.0/8"]}'
	assert_output 204
	run from_box "$ID" http://a.test/
	assert_success
	field_is .server a.test
	field_is '.headers["x-old"]' null
	run jq -c .inject "$DIR/net.json"
	assert_output '[]'
	run jq -c . "$DIR/net.secret.json"
	assert_output '{}'
	# And back: a sandbox made with rules keeps its CA for later ones.
	run put "$ID" '{"rules":{"a.test":[{"transform":{"headers":{"X-Again":"'"$VALUE"'"}}}]}}'
	assert_output 204
	run from_box "$ID" https://a.test/
	assert_success
	field_is '.headers["x-again"]' "$VALUE"
}

@test "PUT network with rules on a sandbox made without any: a CA now, curl inside trusts it, the server sees the header" {
	run post '{"templateID":"base","timeout":120,"network":{"denyOut":["10.0.0.0/8"]}}'
	assert_output 201
	ID=$(jq -r .sandboxID "$BATS_TEST_TMPDIR/body")
	DIR=$(box_dir "$ID")
	[ ! -e "$DIR/ca.crt" ]
	run put "$ID" '{"rules":{"a.test":[{"transform":{"headers":{"X-Late":"'"$VALUE"'"}}}]}}'
	assert_output 204
	[ ! -s "$BATS_TEST_TMPDIR/body" ]
	[ -e "$DIR/ca.crt" ]
	run from_box "$ID" https://a.test/
	assert_success
	field_is .server a.test
	field_is '.headers["x-late"]' "$VALUE"
	run from_box "$ID" http://a.test/
	assert_success
	field_is '.headers["x-late"]' "$VALUE"
	run jq -c '[.deny_out, .inject]' "$DIR/net.json"
	assert_output '[[],[{"host":"a.test","name":"X-Late"}]]'
	run grep -c -- "$VALUE" "$SBXD_DIR/log" "$DIR/net.json" "$DIR/meta.json"
	assert_output "$SBXD_DIR/log:0
$DIR/net.json:0
$DIR/meta.json:0"
}

@test "PUT network with rules on a sandbox made without internet: it reaches the world, with the header" {
	run post '{"templateID":"base","timeout":120,"allow_internet_access":false}'
	assert_output 201
	ID=$(jq -r .sandboxID "$BATS_TEST_TMPDIR/body")
	DIR=$(box_dir "$ID")
	run from_box "$ID" http://a.test/
	assert_failure
	run put "$ID" '{"allowOut":["a.test"],"denyOut":["0.0.0.0/0"],"rules":{"a.test":[{"transform":{"headers":{"X-Late":"'"$VALUE"'"}}}]}}'
	assert_output 204
	run from_box "$ID" https://a.test/
	assert_success
	field_is '.headers["x-late"]' "$VALUE"
	run from_box "$ID" http://c.test/
	assert_failure
	run put "$ID" '{"allow_internet_access":false}'
	assert_output 204
	run from_box "$ID" http://a.test/
	assert_failure
}

@test "PUT network with bad rules is 400, as at create, and the rules stay" {
	rules_box
	run put "$ID" '{"rules":{"a.test":[{"transform":{"headers":{"Bad Name":"'"$VALUE"'"}}}]}}'
	assert_output 400
	assert_equal "$(msg)" "network.rules[\"a.test\"]: 'Bad Name' is not a header name"
	run put "$ID" '{"rules":{"a.test":[{"transform":{"headers":{"X":"${e2b.identity.tokens.aws}"}}}]}}'
	assert_output 400
	run jq -c .inject "$DIR/net.json"
	assert_output '[{"host":"a.test","name":"X-Old"}]'
	run from_box "$ID" http://a.test/
	field_is '.headers["x-old"]' "$VALUE"
}
