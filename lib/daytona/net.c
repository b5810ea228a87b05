/* net.c - network rules on the daytona backend: Daytona's allow-lists
 * (networkAllowList: IPv4 CIDRs; domainAllowList: names, "*.name") with
 * networkBlockAll, at create and through network-settings (sbx-net) */
#include <stdlib.h>
#include <string.h>

#include "daytona.h"
#include "../net/net.h"

static const char *const keys[] = {"networkAllowList", "domainAllowList"};

/* Rules (allow_out, deny_out) as Daytona's in body b: networkBlockAll,
 * and each list that is not empty (all: both, "" when empty). An
 * allow-list is all Daytona has: the rules must be one, what allow
 * names and deny "all"; none at all is an open network. Else exit 2. */
static int
lists_of(const json_t *allow, const json_t *deny, json_t *b, int all_keys,
    struct sbx_err *err)
{
	struct sbx_buf l[2] = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct sbx_net_rule nr;
	const json_t *v;
	const char *t;
	size_t i;
	int k, denied = 0, open = 0, rc = -1;

	json_array_foreach(deny, i, v) {
		t = json_string_value(v);
		if (sbx_net_rule_parse(t ? t : "", &nr, err) < 0)
			return -1;
		if (nr.kind != SBX_NR_ALL)
			return sbx_err_set(err, SBX_EX_USAGE, "Daytona's "
			    "network rules are an allow-list: --deny-out takes "
			    "only 'all' on daytona, not '%s'", t);
		denied = 1;
	}
	if (!denied && json_array_size(allow))
		return sbx_err_set(err, SBX_EX_USAGE, "Daytona's network rules "
		    "are an allow-list: --allow-out goes with --deny-out all "
		    "on daytona");
	open = !denied;
	json_array_foreach(allow, i, v) {
		t = json_string_value(v);
		if (sbx_net_rule_parse(t ? t : "", &nr, err) < 0)
			goto out;
		if (nr.kind == SBX_NR_ALL) {
			open = 1;
			continue;
		}
		if (nr.kind == SBX_NR_CIDR && nr.family != AF_INET) {
			sbx_err_set(err, SBX_EX_USAGE, "Daytona's allow-list "
			    "takes IPv4 addresses and CIDRs, not '%s'", t);
			goto out;
		}
		k = nr.kind == SBX_NR_CIDR ? 0 : 1;
		if (l[k].len)
			sbx_buf_add(&l[k], ",", 1);
		sbx_buf_add(&l[k], t, strlen(t));
		if (!k && !strchr(t, '/'))
			sbx_buf_add(&l[k], "/32", 3);
	}
	/* Allowed all, or nothing allowed but all denied. */
	json_object_set_new(b, "networkBlockAll", json_boolean(!open &&
	    !l[0].len && !l[1].len));
	for (k = 0; k < 2; k++)
		if ((l[k].len && !open) || all_keys)
			json_object_set_new(b, keys[k], open ? json_string("") :
			    json_stringn(l[k].len ? l[k].data : "", l[k].len));
	rc = 0;
out:
	sbx_buf_release(&l[0]);
	sbx_buf_release(&l[1]);
	return rc;
}

int
sbx_dt_net_create(const struct sbx_spec *spec, json_t *body,
    struct sbx_err *err)
{
	if (spec->net_inject)
		return sbx_err_set(err, SBX_EX_USAGE, "the daytona backend "
		    "cannot inject headers (--inject-header)");
	if (spec->egress_proxy)
		return sbx_err_set(err, SBX_EX_USAGE, "the daytona backend "
		    "cannot send through an egress proxy (--egress-proxy)");
	if (!spec->net_rules)
		return 0;
	return lists_of(json_object_get(spec->net_rules, "allow_out"),
	    json_object_get(spec->net_rules, "deny_out"), body, 0, err);
}

/* A Sandbox's rules, as sbx-net prints them: blocked, deny all; an
 * allow-list, its entries and deny all; else none. */
static json_t *
rules_of(const json_t *s)
{
	json_t *out = json_pack("{s[]s[]}", "allow_out", "deny_out");
	const char *t, *p, *e;
	int k, any = 0;

	for (k = 0; k < 2; k++) {
		if (!(t = sbx_json_str(s, keys[k])))
			continue;
		for (p = t; *p; p = *e ? e + 1 : e) {
			if (!(e = strchr(p, ',')))
				e = p + strlen(p);
			while (p < e && *p == ' ')
				p++;
			if (e > p) {
				json_array_append_new(json_object_get(out,
				    "allow_out"), json_stringn(p,
				    (size_t)(e - p)));
				any = 1;
			}
		}
	}
	if (json_is_true(json_object_get(s, "networkBlockAll"))) {
		json_array_clear(json_object_get(out, "allow_out"));
		any = 1;
	}
	if (any)
		json_array_append_new(json_object_get(out, "deny_out"),
		    json_string("all"));
	return out;
}

json_t *
sbx_dt_net_rules(const json_t *ref, const json_t *set, struct sbx_err *err)
{
	const char *want = set ? sbx_json_str(set, "network") : NULL;
	struct sbx_http_resp rs = {0};
	json_t *s = NULL, *body = NULL, *out = NULL;
	const json_t *px;
	const char *id;
	struct dt d;

	if (sbx_dt_ref_open(&d, ref, &id, &s, err) < 0)
		return NULL;
	if (!set) {
		out = rules_of(s);
		goto out;
	}
	if (json_array_size(json_object_get(set, "inject"))) {
		sbx_err_set(err, SBX_EX_USAGE, "the daytona backend cannot "
		    "inject headers");
		goto out;
	}
	if ((px = json_object_get(set, "egress_proxy")) && !json_is_null(px)) {
		sbx_err_set(err, SBX_EX_USAGE, "the daytona backend cannot "
		    "send through an egress proxy");
		goto out;
	}
	body = json_object();
	if (want && !strcmp(want, "deny"))
		json_object_set_new(body, "networkBlockAll", json_true());
	else {
		/* Blocked, and not told -n allow: rules would not open it
		 * (networkBlockAll wins). */
		if (!want && json_is_true(json_object_get(s,
		    "networkBlockAll"))) {
			sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' has network "
			    "deny: rules need --network allow", id);
			goto out;
		}
		if (lists_of(json_object_get(set, "allow_out"),
		    json_object_get(set, "deny_out"), body, 1, err) < 0)
			goto out;
	}
	if (sbx_dt_req(&d, "POST", body, &rs, err,
	    "/sandbox/%s/network-settings", id) < 0)
		goto out;
	if (rs.status / 100 != 2 || !json_is_object(rs.json)) {
		sbx_dt_fail(&rs, "cannot change the sandbox's network", id, err);
		goto out;
	}
	out = rules_of(rs.json);
out:
	sbx_http_resp_release(&rs);
	json_decref(body);
	json_decref(s);
	sbx_dt_close(&d);
	return out;
}
