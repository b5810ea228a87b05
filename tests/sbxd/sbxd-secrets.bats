#!/usr/bin/env bats
# sbxd: E2B's /secrets API on sbx's secret store, with curl. No answer
# ever carries a value: every body a test gets is checked for it.
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
	STORE=$SBXD_CONFIG_HOME/sbx/credentials/secrets
	# Each test starts with an empty store.
	rm -rf "$STORE"
}

# req METHOD PATH [JSON]: the status on stdout, the body in $BODY_FILE
# (and appended to $ALL for the no-value checks).
req() {
	local m=$1 p=$2
	BODY_FILE=$BATS_TEST_TMPDIR/body
	curl -s -o "$BODY_FILE" -D "$BATS_TEST_TMPDIR/headers" -w '%{http_code}' \
	    -X "$m" -H "X-API-Key: $SBXD_KEY" \
	    ${3:+-H 'Content-Type: application/json' --data-binary "$3"} \
	    "$SBXD_URL$p"
	cat "$BODY_FILE" "$BATS_TEST_TMPDIR/headers" >>"$BATS_TEST_TMPDIR/all"
}

body() {
	cat "$BATS_TEST_TMPDIR/body"
}

# The body without its times, compact.
meta() {
	jq -c 'if type == "array" then map(del(.createdAt, .updatedAt))
	    else del(.createdAt, .updatedAt) end' "$BATS_TEST_TMPDIR/body"
}

# No answer so far held the value.
no_value() {
	[ -s "$BATS_TEST_TMPDIR/all" ] || fail "no answers recorded"
	run grep -c -- "$VALUE" "$BATS_TEST_TMPDIR/all"
	assert_output 0
}

@test "POST /secrets creates a secret: 201, its metadata, never the value" {
	run req POST /secrets "{\"name\":\"Api_Key\",\"value\":\"$VALUE\",\"metadata\":{\"team\":\"a\"}}"
	assert_output 201
	run meta
	assert_output '{"secretID":"sec_api_key","name":"api_key","currentVersion":1,"metadata":{"team":"a"}}'
	run jq -r '.createdAt' "$BATS_TEST_TMPDIR/body"
	[[ $output =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
	# In sbxd's user's store, 0600, as sbx-secret keeps it.
	[ "$(cat "$STORE/api_key")" = "$VALUE" ]
	[ "$(stat -c %a "$STORE/api_key")" = 600 ]
	run env XDG_CONFIG_HOME="$SBXD_CONFIG_HOME" sbx-secret ls
	assert_success
	assert_equal "$(jq -c '[.name, .version]' <<<"$output")" '["api_key",1]'
	no_value
}

@test "POST /secrets without metadata gives an empty object" {
	run req POST /secrets "{\"name\":\"k\",\"value\":\"$VALUE\"}"
	assert_output 201
	run meta
	assert_output '{"secretID":"sec_k","name":"k","currentVersion":1,"metadata":{}}'
	no_value
}

@test "POST /secrets with bad input is 400 and writes nothing" {
	local b
	for b in "{\"value\":\"$VALUE\"}" \
	    "{\"name\":\"a b\",\"value\":\"$VALUE\"}" \
	    "{\"name\":\"sec_x\",\"value\":\"$VALUE\"}" \
	    '{"name":"x"}' '{"name":"x","value":""}' '{"name":"x","value":7}' \
	    "{\"name\":\"x\",\"value\":\"$VALUE\",\"metadata\":{\"a\":1}}" \
	    "{\"name\":\"x\",\"value\":\"$VALUE\",\"metadata\":[]}" 'not json'; do
		run req POST /secrets "$b"
		assert_output 400
		run jq -r .code "$BATS_TEST_TMPDIR/body"
		assert_output 400
	done
	run req POST /secrets "{\"name\":\"sec_x\",\"value\":\"$VALUE\"}"
	run body
	assert_output '{"code":400,"message":"invalid secret name '"'"'sec_x'"'"': the prefix '"'"'sec_'"'"' is reserved"}'
	run req POST /secrets '{"name":"x","value":""}'
	run body
	assert_output '{"code":400,"message":"Error when parsing request: property \"value\" must be a non-empty string"}'
	[ ! -e "$STORE/x" ]
	no_value
}

@test "POST /secrets with a name that exists is 409 and keeps the old value" {
	run req POST /secrets "{\"name\":\"dup\",\"value\":\"$VALUE\"}"
	assert_output 201
	run req POST /secrets '{"name":"DUP","value":"other"}'
	assert_output 409
	run body
	assert_output '{"code":409,"message":"Secret with name '"'"'dup'"'"' already exists"}'
	[ "$(cat "$STORE/dup")" = "$VALUE" ]
	no_value
}

@test "GET /secrets/{idOrName} by name, by id, in any case; 404 when missing" {
	run req POST /secrets "{\"name\":\"g\",\"value\":\"$VALUE\"}"
	local p
	for p in g G sec_g; do
		run req GET "/secrets/$p"
		assert_output 200
		run meta
		assert_output '{"secretID":"sec_g","name":"g","currentVersion":1,"metadata":{}}'
	done
	run req GET /secrets/nope
	assert_output 404
	run body
	assert_output '{"code":404,"message":"Secret '"'"'nope'"'"' not found"}'
	run req GET /secrets/sec_nope
	assert_output 404
	run req GET '/secrets/a%20b'
	assert_output 404
	no_value
}

@test "POST /secrets/{idOrName} makes a new version; metadata replaced only when given" {
	run req POST /secrets "{\"name\":\"u\",\"value\":\"$VALUE\",\"metadata\":{\"a\":\"1\"}}"
	run req POST /secrets/u "{\"value\":\"${VALUE}2\"}"
	assert_output 200
	run meta
	assert_output '{"secretID":"sec_u","name":"u","currentVersion":2,"metadata":{"a":"1"}}'
	run req POST /secrets/sec_u "{\"value\":\"${VALUE}3\",\"metadata\":{\"b\":\"2\"}}"
	assert_output 200
	run meta
	assert_output '{"secretID":"sec_u","name":"u","currentVersion":3,"metadata":{"b":"2"}}'
	[ "$(cat "$STORE/u")" = "${VALUE}3" ]
	run req POST /secrets/u '{"metadata":{}}'
	assert_output 400
	run req POST /secrets/nope "{\"value\":\"$VALUE\"}"
	assert_output 404
	[ ! -e "$STORE/nope" ]
	no_value
}

@test "GET /secrets lists metadata only, by name, in pages with X-Next-Token" {
	local n
	for n in c a b; do
		run req POST /secrets "{\"name\":\"$n\",\"value\":\"$VALUE\"}"
		assert_output 201
	done
	run req GET /secrets
	assert_output 200
	run jq -c 'map(.name)' "$BATS_TEST_TMPDIR/body"
	assert_output '["a","b","c"]'
	run jq -c '.[0] | keys' "$BATS_TEST_TMPDIR/body"
	assert_output '["createdAt","currentVersion","metadata","name","secretID","updatedAt"]'
	run req GET '/secrets?limit=2'
	run jq -c 'map(.name)' "$BATS_TEST_TMPDIR/body"
	assert_output '["a","b"]'
	run grep -i '^x-next-token:' "$BATS_TEST_TMPDIR/headers"
	assert_output --regexp '^X-Next-Token: c.?$'
	run req GET '/secrets?limit=2&nextToken=c'
	run jq -c 'map(.name)' "$BATS_TEST_TMPDIR/body"
	assert_output '["c"]'
	run grep -ci '^x-next-token:' "$BATS_TEST_TMPDIR/headers"
	assert_output 0
	run req GET '/secrets?limit=0'
	assert_output 400
	no_value
}

@test "GET /secrets with no store is an empty list" {
	run req GET /secrets
	assert_output 200
	run body
	assert_output '[]'
}

@test "DELETE /secrets/{idOrName} is 204, then 404" {
	run req POST /secrets "{\"name\":\"d\",\"value\":\"$VALUE\"}"
	run req DELETE /secrets/sec_d
	assert_output 204
	[ ! -e "$STORE/d" ]
	[ ! -e "$STORE/d.json" ]
	run req DELETE /secrets/d
	assert_output 404
	no_value
}

@test "every /secrets route wants the API key" {
	local r
	for r in "GET /secrets" "POST /secrets" "GET /secrets/x" "POST /secrets/x" \
	    "DELETE /secrets/x"; do
		run curl -s -o /dev/null -w '%{http_code}' -X "${r% *}" \
		    -H 'Content-Type: application/json' \
		    -d "{\"name\":\"x\",\"value\":\"$VALUE\"}" "$SBXD_URL${r#* }"
		assert_output 401
	done
	[ ! -e "$STORE/x" ]
}

@test "a secret set with sbx-secret is served, and one made by sbxd is sbx-secret's" {
	printf '%s' "$VALUE" | XDG_CONFIG_HOME=$SBXD_CONFIG_HOME sbx-secret set local -m from=cli >/dev/null
	run req GET /secrets/local
	assert_output 200
	run meta
	assert_output '{"secretID":"sec_local","name":"local","currentVersion":1,"metadata":{"from":"cli"}}'
	run req POST /secrets "{\"name\":\"remote\",\"value\":\"$VALUE\"}"
	run env XDG_CONFIG_HOME="$SBXD_CONFIG_HOME" sbx-secret rm remote
	assert_success
	run req GET /secrets/remote
	assert_output 404
	no_value
}

@test "a store open to others is a 500 that names it, never a value" {
	run req POST /secrets "{\"name\":\"m\",\"value\":\"$VALUE\"}"
	chmod 644 "$STORE/m"
	# The metadata is served; the store refuses only to use the value.
	run req GET /secrets/m
	assert_output 200
	chmod 755 "$STORE"
	run req GET /secrets
	assert_output 500
	run body
	assert_output "{\"code\":500,\"message\":\"Error in the secret store: secret store '$STORE' is open to others (mode 755, want 0700); refusing it\"}"
	chmod 700 "$STORE"
	no_value
}
