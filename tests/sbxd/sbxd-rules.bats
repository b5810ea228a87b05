#!/usr/bin/env bats
# sbxd: E2B's network.rules at create (header transforms, with
# ${e2b.secrets.NAME} placeholders) become the sandbox's injection rules;
# no answer ever carries a header value. Nothing here sends a packet.
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
