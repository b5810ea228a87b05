/* net.c - the e2b backend's network rules: --allow-out, --deny-out and
 * --egress-proxy as E2B's "network" (checked as E2B's API checks it,
 * before any call), and sbx-net through PUT /sandboxes/ID/network */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b.h"
#include "../net/net.h"

/* One rule as E2B words it: "all" is its 0.0.0.0/0. */
static json_t *
e2b_rule(const char *text)
{
	return json_string(!strcasecmp(text, "all") ? "0.0.0.0/0" : text);
}

/* E2B's egressProxy of a spec's {"url","password"}: address "host:port",
 * and the user and password when there is a user. */
static json_t *
e2b_proxy(const json_t *px, struct sbx_err *err)
{
	struct sbx_net_proxy p;
	const char *pw = sbx_json_str(px, "password");
	json_t *o;
	char *addr;

	if (sbx_net_proxy_parse(sbx_json_str(px, "url") ? sbx_json_str(px,
	    "url") : "", &p, err) < 0)
		return NULL;
	addr = sbx_xasprintf(strchr(p.host, ':') ? "[%s]:%s" : "%s:%s",
	    p.host, p.port);
	o = json_pack("{s:s}", "address", addr);
	free(addr);
	if (*p.user) {
		if (!pw) {
			json_decref(o);
			sbx_err_set(err, SBX_EX_CRED, "no password for the egress "
			    "proxy's user '%s'", p.user);
			return NULL;
		}
		json_object_set_new(o, "username", json_string(p.user));
		json_object_set_new(o, "password", json_string(pw));
	}
	return o;
}

/* E2B's rules of a spec's injections: {"<host>": [{"transform":
 * {"headers": {"<name>": "<value or ${e2b.secrets.NAME}>"}}}]}, one
 * transform per host. E2B keeps and applies them (and resolves the
 * secrets placeholders); the values go nowhere else. */
static json_t *
e2b_inject_rules(const json_t *inject)
{
	json_t *rules = json_object(), *v, *h, *hdrs;
	const char *host, *val;
	size_t i;

	json_array_foreach(inject, i, v) {
		host = sbx_json_str(v, "host");
		val = sbx_json_str(v, "value");
		if (!val)
			val = sbx_json_str(v, "template");
		if (!host || !val || !sbx_json_str(v, "name"))
			continue;
		if (!(h = json_object_get(rules, host))) {
			h = json_pack("[{s{s{}}}]", "transform", "headers");
			json_object_set_new(rules, host, h);
		}
		hdrs = json_object_get(json_object_get(json_array_get(h, 0),
		    "transform"), "headers");
		json_object_set_new(hdrs, sbx_json_str(v, "name"),
		    json_string(val));
	}
	return rules;
}

json_t *
sbx_e2b_net_body(const json_t *rules, const json_t *proxy,
    const json_t *inject, struct sbx_err *err)
{
	const char *lists[] = {"allow_out", "deny_out"};
	const char *keys[] = {"allowOut", "denyOut"};
	const char *bad;
	json_t *net, *a, *v, *px;
	size_t i, k;

	switch (sbx_net_e2b_check(json_object_get(rules, lists[0]),
	    json_object_get(rules, lists[1]), 0, &bad, err)) {
	case SBX_NE_OK:
		break;
	case SBX_NE_RULE:
		return NULL;
	case SBX_NE_DENY_DOMAIN:
		sbx_err_set(err, SBX_EX_USAGE, "backend 'e2b' denies addresses "
		    "and CIDRs, not domains: --deny-out '%s'", bad);
		return NULL;
	case SBX_NE_ALLOW_DOMAIN:
		sbx_err_set(err, SBX_EX_USAGE, "backend 'e2b' allows a domain "
		    "only with --deny-out all (or 0.0.0.0/0)");
		return NULL;
	}
	net = json_object();
	for (k = 0; k < 2; k++) {
		a = json_array();
		json_array_foreach(json_object_get(rules, lists[k]), i, v)
			json_array_append_new(a, e2b_rule(json_string_value(v)));
		json_object_set_new(net, keys[k], a);
	}
	if (json_is_object(proxy)) {
		if (!(px = e2b_proxy(proxy, err))) {
			json_decref(net);
			return NULL;
		}
		json_object_set_new(net, "egressProxy", px);
	}
	if (json_array_size(inject))
		json_object_set_new(net, "rules", e2b_inject_rules(inject));
	return net;
}

/* Wipe the header values of E2B's rules in a network object. */
static void
wipe_rules(json_t *net)
{
	json_t *h, *t, *v;
	const char *host, *name;
	size_t i;

	json_object_foreach(json_object_get(net, "rules"), host, h)
		json_array_foreach(h, i, t)
			json_object_foreach(json_object_get(json_object_get(t,
			    "transform"), "headers"), name, v)
				if (json_is_string(v))
					explicit_bzero((char *)
					    json_string_value(v),
					    json_string_length(v));
}

void
sbx_e2b_body_free(json_t *b)
{
	json_t *px = json_object_get(json_object_get(b, "network"),
	    "egressProxy");
	json_t *pw = json_object_get(px ? px : json_object_get(b,
	    "egressProxy"), "password");

	if (json_is_string(pw))
		explicit_bzero((char *)json_string_value(pw),
		    json_string_length(pw));
	wipe_rules(json_object_get(b, "network"));
	wipe_rules(b);
	json_decref(b);
}

/* sbx-net's view of a SandboxDetail's network: E2B omits it when there
 * is none, which is no rules. */
static json_t *
rules_of(const json_t *s)
{
	const json_t *net = json_object_get(s, "network");
	const json_t *px = json_object_get(net, "egressProxy");
	const char *lists[] = {"allowOut", "denyOut"};
	const char *keys[] = {"allow_out", "deny_out"};
	json_t *out = json_object(), *a;
	const char *addr, *user;
	char *u;
	size_t k;

	for (k = 0; k < 2; k++) {
		a = json_object_get(net, lists[k]);
		json_object_set_new(out, keys[k], json_is_array(a) ?
		    json_deep_copy(a) : json_array());
	}
	if ((addr = sbx_json_str(px, "address"))) {
		user = sbx_json_str(px, "username");
		u = sbx_xasprintf("socks5://%s%s%s", user ? user : "",
		    user ? "@" : "", addr);
		json_object_set_new(out, "egress_proxy", json_string(u));
		free(u);
	}
	return out;
}

/* The proxy a sandbox has now, as a set's egress_proxy (its password
 * from where sbx-create took it): PUT would clear it otherwise. */
static json_t *
current_proxy(const json_t *s, struct sbx_err *err)
{
	const json_t *px = json_object_get(json_object_get(s, "network"),
	    "egressProxy");
	const char *addr = sbx_json_str(px, "address");
	const char *user = sbx_json_str(px, "username");
	char *pw = NULL, *where = NULL, *url;
	json_t *o;

	if (!addr)
		return json_null();
	if (user && !(pw = sbx_cred_get("SBX_EGRESS_PROXY_PASSWORD",
	    "egress-proxy", &where))) {
		sbx_err_set(err, SBX_EX_CRED, "the sandbox's egress proxy "
		    "needs its user's password again (set "
		    "SBX_EGRESS_PROXY_PASSWORD or write it to '%s')", where);
		free(where);
		return NULL;
	}
	free(where);
	url = sbx_xasprintf("socks5://%s%s%s", user ? user : "", user ? "@" :
	    "", addr);
	o = json_pack("{s:s,s:s?}", "url", url, "password", pw);
	free(url);
	if (pw) {
		explicit_bzero(pw, strlen(pw));
		free(pw);
	}
	return o;
}

/* The header rules a sandbox has now, into a PUT's body: PUT would clear
 * them otherwise. A server that keeps their values to itself (sbxd
 * answers null for each) cannot have them sent again: refused. */
static int
keep_rules(const json_t *s, json_t *body, const char *id,
    struct sbx_err *err)
{
	json_t *rules = json_object_get(json_object_get(s, "network"),
	    "rules"), *h, *t, *v;
	const char *host, *name;
	size_t i;

	if (!json_is_object(rules) || !json_object_size(rules))
		return 0;
	json_object_foreach(rules, host, h)
		json_array_foreach(h, i, t)
			json_object_foreach(json_object_get(json_object_get(t,
			    "transform"), "headers"), name, v)
				if (!json_is_string(v))
					return sbx_err_set(err, SBX_EX_USAGE,
					    "sandbox '%s' injects headers whose "
					    "values its server does not give "
					    "back: sbx-net would clear them",
					    id);
	json_object_set_new(body, "rules", json_deep_copy(rules));
	return 0;
}

json_t *
sbx_e2b_net_rules(const json_t *ref, const json_t *set, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	struct eb e;
	json_t *s = NULL, *px = NULL, *body = NULL, *out = NULL;
	const char *id, *pw;
	const char *want = set ? sbx_json_str(set, "network") : NULL;
	int mine = 0;

	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return NULL;
	if (!want && json_is_false(json_object_get(s,
	    "allowInternetAccess"))) {
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' has network deny: "
		    "rules need --network allow", id);
		goto out;
	}
	if (!set) {
		out = rules_of(s);
		goto out;
	}
	if (json_array_size(json_object_get(set, "inject"))) {
		sbx_err_set(err, SBX_EX_USAGE, "backend 'e2b' cannot change "
		    "header injections");
		goto out;
	}
	/* -n deny: E2B's allow_internet_access false, nothing allowed. */
	if (want && !strcmp(want, "deny")) {
		body = json_pack("{sb}", "allow_internet_access", 0);
		goto put;
	}
	if ((px = json_object_get(set, "egress_proxy")))
		json_incref(px);
	else
		px = current_proxy(s, err), mine = 1;
	if (!px || !(body = sbx_e2b_net_body(set, px, NULL, err)) ||
	    keep_rules(s, body, id, err) < 0)
		goto out;
	/* E2B's PUT: what it omits is cleared; internet on (the rules say
	 * what of it), turned on when it was off (-n allow). */
	json_object_set_new(body, "allow_internet_access", json_true());
put:
	if (sbx_e2b_req(&e, "PUT", body, &rs, err, "/sandboxes/%s/network",
	    id) < 0)
		goto out;
	if (rs.status != 204 && rs.status != 200) {
		sbx_e2b_fail(&rs, "cannot change the sandbox's network", id,
		    err);
		sbx_http_resp_release(&rs);
		goto out;
	}
	sbx_http_resp_release(&rs);
	json_decref(s);
	if (sbx_e2b_get(&e, id, &s, err) == 0)
		out = rules_of(s);
out:
	sbx_e2b_body_free(body);
	if (mine && (pw = sbx_json_str(px, "password")))
		explicit_bzero((char *)pw, strlen(pw));
	json_decref(px);
	json_decref(s);
	sbx_e2b_close(&e);
	return out;
}

/* --- sbx-port ------------------------------------------------------------ */

/* Where a sandbox's ports answer: the domain its detail names, else E2B's
 * (E2B_DOMAIN) for E2B's own API, else the API's own host and port (a
 * server such as sbxd answers for its sandboxes at its own address). */
static char *
ports_domain(const struct eb *e, const json_t *s)
{
	const char *d = sbx_json_str(s, "domain"), *h;
	char *own = sbx_xasprintf("https://api.%s", sbx_e2b_domain());
	size_t n;

	if (d && *d) {
		free(own);
		return sbx_xstrdup(d);
	}
	if (!strcmp(e->endpoint, own)) {
		free(own);
		return sbx_xstrdup(sbx_e2b_domain());
	}
	free(own);
	h = strstr(e->endpoint, "://") + 3;
	n = strcspn(h, "/?#");
	/* user@ never: the API's key travels in a header. */
	return sbx_xasprintf("%.*s", (int)n, h);
}

json_t *
sbx_e2b_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err)
{
	struct eb e;
	json_t *s, *out;
	const char *id;
	char *dom, *host, *url;

	/* host_port: sbx-port refused it (no SBX_CAP_PUBLISH). */
	(void)host_port;
	if (!port) {
		sbx_err_set(err, SBX_EX_USAGE, "backend 'e2b' publishes no "
		    "ports to list: every port of a sandbox answers at its own "
		    "URL (name one: sbx-port PORT)");
		return NULL;
	}
	if (sbx_e2b_ref_open(&e, ref, &id, &s, err) < 0)
		return NULL;
	dom = ports_domain(&e, s);
	host = sbx_xasprintf("%u-%s.%s", port, id, dom);
	url = sbx_xasprintf("%s://%s", strncmp(e.endpoint, "http://", 7) ?
	    "https" : "http", host);
	out = json_pack("{sIssss}", "port", (json_int_t)port, "host", host,
	    "url", url);
	free(url);
	free(host);
	free(dom);
	json_decref(s);
	sbx_e2b_close(&e);
	return out;
}
