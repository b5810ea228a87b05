/* control.c - sbxd's control plane: E2B's /sandboxes API */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "sbxd.h"
#include "../image/image.h"
#include "../net/net.h"
#include "../secret.h"

#define SBXD_DEFAULT_TIMEOUT 15 /* seconds, when a create names none */
#define SBXD_DEFAULT_TIMEOUT_V2 300 /* the same for the v2 create and connect */

static void
fmt_ms(long long ms, char *buf, size_t n)
{
	char s[32];

	sbx_time_fmt(ms / 1000, s, sizeof s);
	/* "2026-12-02T11:35:34Z" -> "...34.123Z", as E2B prints them */
	if (strlen(s) == 20)
		snprintf(buf, n, "%.19s.%03lldZ", s, ms % 1000);
	else
		snprintf(buf, n, "%s", s);
}

/* The Sandbox of create, connect and resume (mu not held). */
static json_t *
sandbox_json(struct sbxd_box *b)
{
	json_t *j;

	j = json_pack("{s:s,s:s,s:s,s:s}", "templateID", b->template,
	    "sandboxID", b->id, "clientID", SBXD_CLIENT_ID, "envdVersion",
	    SBXD_ENVD_VERSION);
	if (b->token[0])
		json_object_set_new(j, "envdAccessToken",
		    json_string(b->token));
	json_object_set_new(j, "trafficAccessToken", b->traffic[0] ?
	    json_string(b->traffic) : json_null());
	json_object_set_new(j, "domain", sbxd.o.domain ?
	    json_string(sbxd.o.domain) : json_null());
	return j;
}

/* The size a sandbox has (its own, else sbxd.limits): its vCPUs,
 * rounded up, or its memory in MiB; the host's without a limit. */
static json_int_t
size_of(const struct sbxd_box *b, int memory)
{
	long long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	if (memory && b && b->mem_mb)
		return b->mem_mb;
	if (!memory && b && b->cpus)
		return b->cpus;
	if (memory)
		return (json_int_t)(sbxd.limits.memory ? sbxd.limits.memory >>
		    20 : (uint64_t)(pages * psz) >> 20);
	return (json_int_t)(sbxd.limits.cpus_milli ? (sbxd.limits.cpus_milli +
	    999) / 1000 : (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
}

/* Its disk quota in MiB (limits.disk), 0 for none: the default applies
 * to local sandboxes made by root where there are loop devices only, as
 * sbx-create's does. */
static json_int_t
disk_mb(const struct sbxd_box *b)
{
	if (strcmp(sbxd.be->name, "local") || geteuid() ||
	    access("/dev/loop-control", R_OK | W_OK) < 0)
		return 0;
	if (b && b->disk_mb)
		return b->disk_mb;
	return (json_int_t)(sbxd.limits.disk >> 20);
}

/* A ListedSandbox, or with detail a SandboxDetail (mu held). */
static json_t *
listed_json(struct sbxd_box *b, int detail)
{
	char st[40], en[40];
	json_t *j;

	fmt_ms(b->started_ms, st, sizeof st);
	fmt_ms(b->end_ms, en, sizeof en);
	j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:i,s:s,s:O}",
	    "templateID", b->template, "sandboxID", b->id,
	    "clientID", SBXD_CLIENT_ID, "startedAt", st, "endAt", en,
	    "state", b->paused ? "paused" : "running", "cpuCount",
	    size_of(b, 0), "memoryMB", size_of(b, 1), "diskSizeMB", disk_mb(b),
	    "envdVersion", SBXD_ENVD_VERSION, "metadata", b->metadata);
	if (detail) {
		if (b->token[0])
			json_object_set_new(j, "envdAccessToken",
			    json_string(b->token));
		json_object_set_new(j, "allowInternetAccess",
		    json_boolean(b->internet));
		json_object_set(j, "network", b->network ? b->network :
		    json_object());
		json_object_set_new(j, "domain", sbxd.o.domain ?
		    json_string(sbxd.o.domain) : json_null());
		json_object_set_new(j, "lifecycle", json_pack("{s:b,s:s}",
		    "autoResume", 0, "onTimeout", b->auto_pause ? "pause" :
		    "kill"));
		json_object_set(j, "volumeMounts", b->volumes ? b->volumes :
		    json_array());
	}
	return j;
}

static enum MHD_Result
not_found(struct sbxd_req *r, const char *id)
{
	return sbxd_reply_err(r, 404, "Sandbox \"%s\" doesn't exist or you "
	    "don't have access to it", id);
}

/* The box the path's second segment names, with a ref; NULL after
 * answering 404. */
static struct sbxd_box *
path_box(struct sbxd_req *r, int seg, enum MHD_Result *ret)
{
	char *id = sbxd_path_seg(r, seg);
	struct sbxd_box *b = NULL;

	/* The legacy "<id>-<clientID>" form. */
	if (id && strlen(id) > SBXD_ID_LEN && id[SBXD_ID_LEN] == '-')
		id[SBXD_ID_LEN] = 0;
	if (id)
		b = sbxd_box_get(id);
	if (!b)
		*ret = not_found(r, id ? id : "");
	free(id);
	return b;
}

static const char *
template_image(const char *t)
{
	size_t i;

	for (i = 0; sbxd.tmpl[i]; i += 2)
		if (!strcmp(sbxd.tmpl[i], t))
			return sbxd.tmpl[i + 1];
	return NULL;
}

int
sbxd_strmap_ok(const json_t *o)
{
	const char *k;
	json_t *v;

	if (!o)
		return 1;
	if (!json_is_object(o))
		return 0;
	json_object_foreach((json_t *)o, k, v)
		if (!json_is_string(v))
			return 0;
	return 1;
}

/* Room for one more sandbox, and a create within the rate of the key
 * (mu held): a message for 429, or NULL. Each key has a token bucket
 * of create_rate tokens, filled at create_rate a second. */
static const char *
admit(struct sbxd_req *r, char *msg, size_t n)
{
	long long now = sbx_mono_ms();
	double cap = sbxd.o.create_rate;
	struct sbxd_key *k;

	if (sbxd.o.max_sandboxes && sbxd.nboxes >= sbxd.o.max_sandboxes) {
		snprintf(msg, n, "you have reached the maximum number of "
		    "concurrent E2B sandboxes (%u). If you need more, please "
		    "visit 'https://e2b.dev/docs/billing'",
		    sbxd.o.max_sandboxes);
		return msg;
	}
	if (sbxd.o.create_rate && r->key >= 0 &&
	    (size_t)r->key < sbxd.nkeys) {
		k = &sbxd.keys[r->key];
		k->tokens += (double)(now - k->t) * cap / 1000.0;
		if (k->tokens > cap)
			k->tokens = cap;
		k->t = now;
		if (k->tokens < 1) {
			snprintf(msg, n, "Rate limit exceeded: at most %u "
			    "sandboxes a second", sbxd.o.create_rate);
			return msg;
		}
		k->tokens -= 1;
	}
	return NULL;
}

/* An HTTP header name: RFC 9110's token. */
static int
header_name_ok(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~",
		    *s))
			return 0;
	return 1;
}

/* A header value: no CR, LF or NUL, and every "${" one of
 * ${e2b.secrets.NAME}. Sets *tmpl when there is one. The value is never
 * in msg. */
static int
header_value_ok(const json_t *v, const char *host, const char *name,
    int *tmpl, char *msg, size_t n)
{
	const char *s = json_string_value(v), *p, *end;
	char sec[80], canon[65];
	struct sbx_err err;
	size_t len = json_string_length(v);

	*tmpl = 0;
	if (strlen(s) != len || strpbrk(s, "\r\n")) {
		snprintf(msg, n, "network.rules[\"%.100s\"]: the value of header "
		    "'%.80s' holds a line break or NUL", host, name);
		return -1;
	}
	for (p = s; (p = strstr(p, "${")); p = end + 1) {
		if (strncmp(p + 2, "e2b.secrets.", 12) ||
		    !(end = strchr(p, '}')) || (size_t)(end - p - 14) >=
		    sizeof sec) {
			snprintf(msg, n, "network.rules[\"%.100s\"]: header '%.80s' "
			    "has a placeholder other than ${e2b.secrets.NAME}",
			    host, name);
			return -1;
		}
		snprintf(sec, sizeof sec, "%.*s", (int)(end - p - 14), p + 14);
		if (sbx_secret_name(sec, canon, &err) < 0) {
			snprintf(msg, n, "network.rules[\"%.100s\"]: header '%.80s': "
			    "%.200s", host, name, err.msg);
			return -1;
		}
		*tmpl = 1;
	}
	return 0;
}

/* E2B's network.rules, {"<domain>": [{"transform": {"headers": {Name:
 * value}}}]}, as a spec's net_inject: [{"host","name","value"}], or
 * "template" for a value with ${e2b.secrets.NAME}. A later header of the
 * same name for the same host replaces an earlier one. NULL for none;
 * -1 with msg set on bad input. */
static int
inject_of(const json_t *rules, json_t **out, char *msg, size_t n)
{
	const char *dom, *name, *k;
	json_t *list, *rule, *tr, *hdrs, *v, *e, *inj = json_array();
	struct sbx_net_rule nr;
	struct sbx_err err;
	char host[256];
	size_t i, j, d;
	int tmpl;

	*out = NULL;
	if (!json_is_object(rules)) {
		snprintf(msg, n, "Error when parsing request: "
		    "\"network.rules\" must be an object");
		goto bad;
	}
	json_object_foreach((json_t *)rules, dom, list) {
		for (d = 0; dom[d] && d < sizeof host - 1; d++)
			host[d] = (char)tolower((unsigned char)dom[d]);
		host[d] = 0;
		if (dom[d] || sbx_net_rule_parse(host, &nr, &err) < 0 ||
		    (nr.kind != SBX_NR_DOMAIN && nr.kind != SBX_NR_WILDCARD)) {
			snprintf(msg, n, "network.rules: '%.200s' is not a "
			    "domain or *.domain", dom);
			goto bad;
		}
		if (!json_is_array(list)) {
			snprintf(msg, n, "network.rules[\"%.100s\"] must be an "
			    "array of rules", host);
			goto bad;
		}
		json_array_foreach(list, i, rule) {
			if (!json_is_object(rule)) {
				snprintf(msg, n, "network.rules[\"%.100s\"]: a rule "
				    "must be an object", host);
				goto bad;
			}
			json_object_foreach(rule, k, v)
				if (strcmp(k, "transform")) {
					snprintf(msg, n, "network.rules[\"%.100s\"]: "
					    "'%.60s' is not supported (only "
					    "transform)", host, k);
					goto bad;
				}
			if (!(tr = json_object_get(rule, "transform")) ||
			    json_is_null(tr))
				continue;
			hdrs = json_object_get(tr, "headers");
			if (!json_is_object(tr) || json_object_size(tr) !=
			    (hdrs ? 1u : 0u) || (hdrs && !json_is_null(hdrs) &&
			    !json_is_object(hdrs))) {
				snprintf(msg, n, "network.rules[\"%.100s\"]: a "
				    "transform has only \"headers\", an object "
				    "of strings", host);
				goto bad;
			}
			json_object_foreach(hdrs, name, v) {
				if (!header_name_ok(name)) {
					snprintf(msg, n, "network.rules[\"%.100s\"]: "
					    "'%.80s' is not a header name", host,
					    name);
					goto bad;
				}
				if (!json_is_string(v)) {
					snprintf(msg, n, "network.rules[\"%.100s\"]: "
					    "header '%.80s' must be a string", host,
					    name);
					goto bad;
				}
				if (header_value_ok(v, host, name, &tmpl, msg,
				    n) < 0)
					goto bad;
				json_array_foreach(inj, j, e)
					if (!strcmp(sbx_json_str(e, "host"), host) &&
					    !strcasecmp(sbx_json_str(e, "name"),
					    name)) {
						json_array_remove(inj, j);
						break;
					}
				json_array_append_new(inj, json_pack("{s:s,s:s,"
				    "s:O}", "host", host, "name", name, tmpl ?
				    "template" : "value", v));
			}
		}
	}
	if (json_array_size(inj))
		*out = inj;
	else
		json_decref(inj);
	return 0;
bad:
	json_decref(inj);
	return -1;
}

/* E2B's rules as GET shows them: each header named, its value null
 * (E2B returns the values; sbxd never does), so that a client which
 * sends the rules back on a PUT knows it cannot. */
static json_t *
rules_shown(const json_t *inject)
{
	json_t *rules = json_object(), *v, *h;
	const char *host;
	size_t i;

	json_array_foreach(inject, i, v) {
		host = sbx_json_str(v, "host");
		if (!(h = json_object_get(rules, host))) {
			h = json_pack("[{s{s{}}}]", "transform", "headers");
			json_object_set_new(rules, host, h);
		}
		json_object_set_new(json_object_get(json_object_get(
		    json_array_get(h, 0), "transform"), "headers"),
		    sbx_json_str(v, "name"), json_null());
	}
	return rules;
}

/* The spec's password, wiped before it goes. */
static void
proxy_free(json_t *px)
{
	const char *pw = sbx_json_str(px, "password");

	if (pw)
		explicit_bzero((char *)pw, strlen(pw));
	json_decref(px);
}

/* E2B's egressProxy {address, username, password} as a spec's
 * {"url","password"}; *shown what GET says of it (no password). */
static int
proxy_of(const json_t *v, struct sbx_spec *spec, json_t *shown, char *msg,
    size_t n)
{
	const char *addr = sbx_json_str(v, "address");
	const char *user = sbx_json_str(v, "username");
	const char *pw = sbx_json_str(v, "password");
	struct sbx_net_proxy p;
	struct sbx_err err;
	char *url;

	if (!json_is_object(v) || !addr || (json_object_get(v, "username") &&
	    !user) || (json_object_get(v, "password") && !pw)) {
		snprintf(msg, n, "Error when parsing request: "
		    "\"network.egressProxy\" must be {address, username, "
		    "password} of strings");
		return -1;
	}
	if (pw && !user) {
		snprintf(msg, n, "egressProxy.password needs egressProxy.username");
		return -1;
	}
	if ((user && (!*user || strlen(user) > 255)) || (pw && strlen(pw) >
	    255)) {
		snprintf(msg, n, "egressProxy.username and password are 1 to "
		    "255 bytes");
		return -1;
	}
	if (user && strpbrk(user, "@:/")) {
		snprintf(msg, n, "egressProxy.username cannot hold '@', ':' or "
		    "'/'");
		return -1;
	}
	url = sbx_xasprintf("socks5://%s%s%s", user ? user : "", user ? "@" :
	    "", addr);
	if (sbx_net_proxy_parse(url, &p, &err) < 0) {
		snprintf(msg, n, "invalid egressProxy.address '%.100s' (want "
		    "host:port)", addr);
		free(url);
		return -1;
	}
	spec->egress_proxy = json_pack("{s:s,s:s?}", "url", url, "password",
	    pw);
	free(url);
	json_object_set_new(shown, "egressProxy", json_pack("{s:s}",
	    "address", addr));
	if (user)
		json_object_set_new(json_object_get(shown, "egressProxy"),
		    "username", json_string(user));
	return 0;
}

/* E2B's network object (a create's "network", or a PUT's body) and
 * allow_internet_access (internet) as a spec's network, rules and egress
 * proxy, checked as E2B's API does; what sbx cannot do yet is refused,
 * never dropped. *shown (if asked) is what GET says of it. -1 with msg
 * set on bad input. */
static int
net_parse(const json_t *net, int internet, struct sbx_spec *spec,
    json_t **shown, char *msg, size_t n)
{
	const json_t *v;
	const char *lists[] = {"allowOut", "denyOut"};
	const char *keys[] = {"allow_out", "deny_out"};
	const char *bad;
	struct sbx_err err;
	json_t *rules = json_pack("{s[]s[]}", "allow_out", "deny_out"), *a, *e;
	json_t *show = json_object();
	size_t i, k;

	spec->network = SBX_NET_ALLOW;
	if (net && !json_is_object(net)) {
		snprintf(msg, n, "Error when parsing request: \"network\" "
		    "must be an object");
		goto bad;
	}
	for (k = 0; net && k < 2; k++) {
		v = json_object_get(net, lists[k]);
		if (v && !json_is_array(v) && !json_is_null(v)) {
			snprintf(msg, n, "Error when parsing request: "
			    "\"network.%s\" must be an array", lists[k]);
			goto bad;
		}
	}
	switch (sbx_net_e2b_check(json_object_get(net, lists[0]),
	    json_object_get(net, lists[1]), !internet, &bad, &err)) {
	case SBX_NE_OK:
		break;
	case SBX_NE_RULE:
		snprintf(msg, n, "%.200s", err.msg);
		goto bad;
	case SBX_NE_DENY_DOMAIN:
		snprintf(msg, n, "denyOut takes IP addresses and CIDRs, not "
		    "domains ('%.200s')", bad);
		goto bad;
	case SBX_NE_ALLOW_DOMAIN:
		snprintf(msg, n, "allowOut with domains needs denyOut to hold "
		    "0.0.0.0/0");
		goto bad;
	}
	for (k = 0; net && k < 2; k++) {
		v = json_object_get(net, lists[k]);
		a = json_object_get(rules, keys[k]);
		json_array_foreach(v, i, e)
			json_array_append(a, e);
		if (json_array_size(v))
			json_object_set_new(show, lists[k], json_deep_copy(v));
	}
	if (net && (v = json_object_get(net, "egressProxy")) &&
	    !json_is_null(v) && !(json_is_object(v) && !json_object_size(v)) &&
	    proxy_of(v, spec, show, msg, n) < 0)
		goto bad;
	/* Header rules do not open the way (E2B's rule); with no way out
	 * at all they have nothing to act on and are not carried. */
	if (net && (v = json_object_get(net, "rules")) && !json_is_null(v) &&
	    inject_of(v, &spec->net_inject, msg, n) < 0)
		goto bad;
	/* No internet is E2B's denyOut 0.0.0.0/0: what allowOut names still
	 * goes. Without any, no way out at all. */
	if (!internet) {
		if (!json_array_size(json_object_get(rules, "allow_out"))) {
			spec->network = SBX_NET_DENY;
			json_decref(spec->egress_proxy);
			spec->egress_proxy = NULL;
			json_decref(spec->net_inject);
			spec->net_inject = NULL;
			json_decref(rules);
			rules = NULL;
			goto done;
		}
		json_array_append_new(json_object_get(rules, "deny_out"),
		    json_string("all"));
	}
	if (json_array_size(json_object_get(rules, "allow_out")) ||
	    json_array_size(json_object_get(rules, "deny_out")))
		spec->net_rules = rules;
	else
		json_decref(rules);
	if (spec->net_inject)
		json_object_set_new(show, "rules", rules_shown(
		    spec->net_inject));
done:
	if (shown)
		*shown = show;
	else
		json_decref(show);
	return 0;
bad:
	json_decref(spec->net_inject);
	spec->net_inject = NULL;
	proxy_free(spec->egress_proxy);
	spec->egress_proxy = NULL;
	json_decref(rules);
	json_decref(show);
	return -1;
}

/* network.maskRequestHost: the Host that requests for the sandbox's
 * ports carry (port.c), "${PORT}" standing for the port; a host[:port]
 * as it would be written, so that no header can be smuggled in. "" and
 * null: none. */
static int
mask_of(const json_t *net, json_t *shown, char *msg, size_t n)
{
	const json_t *v = json_object_get(net, "maskRequestHost");
	const char *s = json_string_value(v), *p;

	if (!v || json_is_null(v) || (s && !*s))
		return 0;
	if (!s || json_string_length(v) > 255) {
		snprintf(msg, n, "Error when parsing request: "
		    "\"network.maskRequestHost\" must be a string of at most "
		    "255 bytes");
		return -1;
	}
	for (p = s; *p; p++) {
		if (!strncmp(p, "${PORT}", 7)) {
			p += 6;
			continue;
		}
		if (!isalnum((unsigned char)*p) && !strchr("-._:[]", *p)) {
			/* Not quoted: it may hold a line break. */
			snprintf(msg, n, "network.maskRequestHost is not a "
			    "host[:port] (with ${PORT} for the port)");
			return -1;
		}
	}
	json_object_set(shown, "maskRequestHost", (json_t *)v);
	return 0;
}

/* A create's network field and allow_internet_access. */
static int
net_of(const json_t *j, struct sbx_spec *spec, json_t **shown, char *msg,
    size_t n)
{
	const json_t *v = json_object_get(j, "allow_internet_access");

	const json_t *hp = json_object_get(json_object_get(j, "network"),
	    "httpsPorts");

	/* Ports that serve TLS themselves: sbxd forwards plain HTTP only,
	 * so it refuses rather than drop them. */
	if (hp && !json_is_null(hp) && !(json_is_array(hp) &&
	    !json_array_size(hp))) {
		snprintf(msg, n, "network.httpsPorts is not supported by this "
		    "server");
		return -1;
	}
	/* On failure the caller releases what the spec and *shown hold. */
	if (net_parse(json_object_get(j, "network"), !(v &&
	    json_is_false(v)), spec, shown, msg, n) < 0)
		return -1;
	return mask_of(json_object_get(j, "network"), *shown, msg, n);
}


/* msg: what a request failed with; the status to answer. */
static int
fail(char *msg, size_t n, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, n, fmt, ap);
	va_end(ap);
	return status;
}

/* A new sandbox as the create body j asks: 201 and *out its Sandbox,
 * else the status to answer with emsg. */
static int
new_box(struct sbxd_req *r, json_t *j, int v2, const struct sbxd_new *o,
    json_t **out, char *emsg, size_t en)
{
	int status = 0;
	json_t *v, *ref = NULL, *shown = NULL;
	const char *tid, *image;
	struct sbx_spec spec = {0};
	struct sbx_err err;
	struct sbxd_box *b;
	long long timeout = v2 ? SBXD_DEFAULT_TIMEOUT_V2 : SBXD_DEFAULT_TIMEOUT;
	char msg[512], **env = NULL, *built = NULL, *start = NULL;
	char *ready = NULL, *tpl_id = NULL;
	int secure, internet = 1;
	json_t *snap = NULL;
	struct sbxd_new size = {0};

	tid = sbx_json_str(j, "templateID");
	if (!tid || !*tid) {
		status = fail(emsg, en, 400, "Error when parsing request: "
		    "property \"templateID\" is missing");
		goto out;
	}
	/* sbxd's own templates, then those built through the API. */
	if (!(image = template_image(tid)) &&
	    (built = sbxd_tpl_image(tid, &tpl_id, &start, &ready))) {
		image = built;
		/* A sandbox names its template by id, as E2B's do. */
		tid = tpl_id;
		/* A Daytona snapshot's size is its sandboxes'. */
		if ((snap = sbxd_tpl_dt_find(tpl_id))) {
			v = json_object_get(json_array_get(snap, 1), "daytona");
			size.cpus = sbx_json_int(v, "cpu", 0);
			size.mem_mb = sbx_json_int(v, "mem", 0) * 1024;
			size.disk_mb = sbx_json_int(v, "disk", 0) * 1024;
			json_decref(snap);
			snap = NULL;
		}
	}
	if (o && (o->cpus || o->mem_mb || o->disk_mb))
		size = *o;
	/* A snapshot (POST /sandboxes/ID/snapshots) is a template too:
	 * its files over its image. */
	if (!image && (sbx_snap_valid_name(tid) || !strncmp(tid, "snp-", 4))) {
		memset(&err, 0, sizeof err);
		if ((snap = sbx_snap_get(tid, &err))) {
			image = sbx_json_str(snap, "image");
			spec.from = sbx_json_str(snap, "snapshot");
			tid = spec.from;
		}
	}
	if (!image) {
		status = fail(emsg, en, 404, "template '%s' not found", tid);
		goto out;
	}
	if ((v = json_object_get(j, "timeout"))) {
		if (!json_is_integer(v)) {
			status = fail(emsg, en, 400, "Error when parsing "
			    "request: \"timeout\" must be an integer");
			goto out;
		}
		timeout = json_integer_value(v);
	}
	if (timeout <= 0) {
		status = fail(emsg, en, 400, "Timeout must be greater than 0");
		goto out;
	}
	if ((uint64_t)timeout > sbxd.o.max_timeout) {
		status = fail(emsg, en, 400, "Timeout cannot be greater than "
		    "%llu hours", (unsigned long long)sbxd.o.max_timeout /
		    3600);
		goto out;
	}
	if (!sbxd_strmap_ok(json_object_get(j, "metadata")) ||
	    !sbxd_strmap_ok(json_object_get(j, "envVars"))) {
		status = fail(emsg, en, 400, "Error when parsing request: "
		    "\"metadata\" and \"envVars\" must map strings to strings");
		goto out;
	}
	/* autoPauseMemory false: its end is a filesystem-only pause (as
	 * POST /pause {"memory":false}), which no traffic can resume. */
	if ((v = json_object_get(j, "autoPauseMemory")) && !json_is_null(v) &&
	    !json_is_boolean(v)) {
		status = fail(emsg, en, 400, "Error when parsing request: "
		    "\"autoPauseMemory\" must be a boolean");
		goto out;
	}
	if (json_is_false(v) && json_is_true(json_object_get(json_object_get(j,
	    "autoResume"), "enabled"))) {
		status = fail(emsg, en, 400, "autoResume cannot be enabled "
		    "with autoPauseMemory false: a filesystem-only snapshot "
		    "must be resumed with connect");
		goto out;
	}
	v = json_object_get(j, "secure");
	secure = v2 || (v ? json_is_true(v) : 0);
	if (net_of(j, &spec, &shown, msg, sizeof msg) < 0) {
		status = fail(emsg, en, 400, "%s", msg);
		goto out;
	}
	internet = spec.network == SBX_NET_ALLOW;
	/* E2B's volumeMounts [{"name","path"}], as --volume NAME:PATH. */
	if ((v = json_object_get(j, "volumeMounts")) && !json_is_null(v)) {
		json_t *one;
		size_t k;

		if (!json_is_array(v)) {
			status = fail(emsg, en, 400, "Error when parsing "
			    "request: \"volumeMounts\" must be an array");
			goto out;
		}
		json_array_foreach(v, k, one) {
			char *text;
			int bad;

			memset(&err, 0, sizeof err);
			if (!sbx_json_str(one, "name") ||
			    !sbx_json_str(one, "path")) {
				status = fail(emsg, en, 400, "Error when parsing "
				    "request: a volume mount needs \"name\" "
				    "and \"path\"");
				goto out;
			}
			text = sbx_xasprintf("%s:%s", sbx_json_str(one,
			    "name"), sbx_json_str(one, "path"));
			bad = sbx_volume_parse(text, &spec.volumes, &err) < 0;
			free(text);
			if (bad) {
				status = fail(emsg, en, 400, "%s", err.msg);
				goto out;
			}
		}
	}
	if ((v = json_object_get(j, "network")) && json_is_object(v) &&
	    json_is_false(json_object_get(v, "allowPublicTraffic")) &&
	    !secure) {
		status = fail(emsg, en, 400, "You cannot create a sandbox "
		    "without public access unless you enable secure envd "
		    "access via 'secure' flag.");
		goto out;
	}
	pthread_mutex_lock(&sbxd.mu);
	if (admit(r, msg, sizeof msg)) {
		pthread_mutex_unlock(&sbxd.mu);
		status = fail(emsg, en, 429, "%s", msg);
		goto out;
	}
	/* Counted now, so that creates under way count against the cap. */
	sbxd.nboxes++;
	pthread_mutex_unlock(&sbxd.mu);

	b = sbx_xcalloc(1, sizeof *b);
	if (o && o->id)
		snprintf(b->id, sizeof b->id, "%s", o->id);
	else
		sbxd_random_id(b->id, SBXD_ID_LEN);
	b->cpus = size.cpus;
	b->mem_mb = size.mem_mb;
	b->disk_mb = size.disk_mb;
	if (secure)
		sbxd_random_id(b->token, 40);
	if ((v = json_object_get(j, "network")) && json_is_object(v) &&
	    json_is_false(json_object_get(v, "allowPublicTraffic")))
		sbxd_random_id(b->traffic, 40);
	b->template = sbx_xstrdup(tid);
	/* A built template's WORKDIR is where its processes start. */
	if (built && (b->workdir = sbx_image_workdir(built)) &&
	    *b->workdir != '/') {
		free(b->workdir);
		b->workdir = NULL;
	}
	b->metadata = json_object_get(j, "metadata") ?
	    json_deep_copy(json_object_get(j, "metadata")) : json_object();
	b->envs = json_object_get(j, "envVars") ?
	    json_deep_copy(json_object_get(j, "envVars")) : json_object();
	b->auto_pause = json_is_true(json_object_get(j, "autoPause"));
	b->pause_files_only = json_is_false(json_object_get(j,
	    "autoPauseMemory"));
	b->internet = internet;
	b->ca = spec.net_inject != NULL;
	b->network = shown;
	shown = NULL;
	if (spec.volumes)
		b->volumes = json_deep_copy(json_object_get(j,
		    "volumeMounts"));
	b->next_pid = 100;
	spec.image = image;
	if (start)
		spec.start = json_pack("{s:s,s:s?}", "cmd", start, "ready",
		    ready);
	spec.workdir = "/home/user";
	spec.memory = sbxd.limits.memory;
	spec.cpus_milli = sbxd.limits.cpus_milli;
	spec.pids = sbxd.limits.pids;
	spec.limits_default = sbxd.limits.limits_default;
	spec.disk = sbxd.limits.disk;
	spec.disk_default = sbxd.limits.disk_default;
	if (size.cpus) {
		spec.cpus_milli = (uint64_t)size.cpus * 1000;
		spec.limits_default &= ~(unsigned)SBX_CAP_CPUS;
	}
	if (size.mem_mb) {
		spec.memory = (uint64_t)size.mem_mb << 20;
		spec.limits_default &= ~(unsigned)SBX_CAP_MEMORY;
	}
	/* A disk quota applies where sbxd's would (root, loop devices:
	 * disk_mb), else it goes as sbxd's does. */
	if (size.disk_mb)
		spec.disk = (uint64_t)size.disk_mb << 20;
	/* Its ports answer at <port>-<id>.<domain> whatever its network:
	 * with none published, the backend's helper still runs (for the
	 * local one, sbx-netd, which then lets nothing out). */
	if (sbxd.be->caps & SBX_CAP_PUBLISH)
		spec.ports = json_array();
	spec.labels = json_pack("{s:s}", "sbxd", b->id);
	env = sbxd_box_env(b, NULL);
	spec.env = env;
	/* One made ahead, when it is as asked: its id is the box's. A
	 * Daytona create names its own id. */
	if ((o && o->id) || !sbxd_warm_take(&spec, b->id, sizeof b->id,
	    &ref)) {
		if (sbxd_box_creating(b->id, &err) < 0 ||
		    sbxd_be_create(&spec, &ref, &err) < 0)
			ref = NULL;
	}
	if (!ref) {
		sbxd_box_reap(b->id);
		pthread_mutex_lock(&sbxd.mu);
		sbxd.nboxes--;
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_log("cannot create a sandbox: %s", err.msg);
		status = fail(emsg, en, 500, "Failed to create sandbox: %s",
		    err.msg);
		b->refs = 1;
		sbxd_box_put(b);
		goto out;
	}
	b->ref = ref;
	b->started_ms = sbxd_now_ms();
	b->end_ms = b->started_ms + timeout * 1000;
	pthread_mutex_lock(&sbxd.mu);
	sbxd.nboxes--;
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_box_add(b);
	*out = sandbox_json(b);
	status = 201;
out:
	json_decref(snap);
	json_decref(spec.volumes);
	json_decref(spec.start);
	free(tpl_id);
	free(built);
	free(start);
	free(ready);
	sbxd_env_free(env);
	json_decref(spec.labels);
	json_decref(spec.net_rules);
	proxy_free(spec.egress_proxy);
	json_decref(shown);
	json_decref(spec.ports);
	json_decref(spec.net_inject);
	return status;
}

/* POST /sandboxes, and v2's POST /v2/sandboxes (which the JS SDK uses
 * since 2.4x): always secure, 300 s unless told. */
static enum MHD_Result
create(struct sbxd_req *r, int v2)
{
	enum MHD_Result ret;
	json_t *j = sbxd_body_json(r, &ret), *out = NULL;
	char emsg[512];
	int status;

	if (!j)
		return ret;
	status = new_box(r, j, v2, NULL, &out, emsg, sizeof emsg);
	json_decref(j);
	return status == 201 ? sbxd_reply_json(r, 201, out) :
	    sbxd_reply_err(r, status, "%s", emsg);
}

static enum MHD_Result
h_create(struct sbxd_req *r)
{
	return create(r, 0);
}

static enum MHD_Result
h_create2(struct sbxd_req *r)
{
	return create(r, 1);
}

static enum MHD_Result
h_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box(r, 1, &ret);
	json_t *j;

	if (!b)
		return ret;
	pthread_mutex_lock(&sbxd.mu);
	j = listed_json(b, 1);
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_box_put(b);
	return sbxd_reply_json(r, 200, j);
}

/* --- metrics: E2B's SandboxMetric, one sample taken now ------------------ */

/* A number of a stats reading, or -1 for its null. */
static double
stat_num(const json_t *st, const char *k)
{
	json_t *v = json_object_get(st, k);

	return json_is_number(v) ? json_number_value(v) : -1;
}

static json_t *
bytes_or_null(double v)
{
	return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

/* The box's SandboxMetric now, from the backend's stats; NULL when it
 * has none (paused, ended). cpuUsedPct: the CPU time since the last
 * sample (or the start) over the time and the CPUs it had. */
static json_t *
box_metric(struct sbxd_box *b)
{
	struct sbx_err err = {0};
	json_t *ref, *st, *m;
	double cpu, cpus, mem, lim, cache, pct = 0, prev;
	long long now, since, ncpu;
	char ts[32];

	pthread_mutex_lock(&sbxd.mu);
	ref = b->paused || b->gone ? NULL : json_deep_copy(b->ref);
	pthread_mutex_unlock(&sbxd.mu);
	if (!ref)
		return NULL;
	st = sbxd_be_stats(ref, &err);
	json_decref(ref);
	if (!st)
		return NULL;
	now = sbxd_now_ms();
	cpus = stat_num(st, "cpus");
	ncpu = cpus > 0 ? (long long)cpus + (cpus > (double)(long long)cpus) :
	    sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 1)
		ncpu = 1;
	cpu = stat_num(st, "cpu_s");
	pthread_mutex_lock(&sbxd.mu);
	prev = b->metric_ms ? b->metric_cpu_s : 0;
	since = b->metric_ms ? b->metric_ms : b->started_ms;
	if (cpu >= prev && now > since)
		pct = (cpu - prev) * 1e5 / (double)(now - since) /
		    (double)ncpu;
	b->metric_cpu_s = cpu >= 0 ? cpu : 0;
	b->metric_ms = now;
	pthread_mutex_unlock(&sbxd.mu);
	if (pct > 100)
		pct = 100;
	mem = stat_num(st, "memory_bytes");
	cache = stat_num(st, "memory_cache");
	lim = stat_num(st, "memory_limit");
	if (lim < 0)
		lim = (double)sysconf(_SC_PHYS_PAGES) *
		    (double)sysconf(_SC_PAGESIZE);
	sbx_time_fmt(now / 1000, ts, sizeof ts);
	m = json_pack("{ss,sI,sI,sf,so,sI,so,so,so}", "timestamp", ts,
	    "timestampUnix", (json_int_t)(now / 1000), "cpuCount",
	    (json_int_t)ncpu, "cpuUsedPct", (double)(long long)(pct * 100 +
	    0.5) / 100, "memUsed", bytes_or_null(mem >= 0 ? mem -
	    (cache > 0 && cache < mem ? cache : 0) : -1), "memTotal",
	    (json_int_t)lim, "memCache", bytes_or_null(cache), "diskUsed",
	    bytes_or_null(stat_num(st, "disk_bytes")), "diskTotal",
	    bytes_or_null(stat_num(st, "disk_limit")));
	json_decref(st);
	return m;
}

/* A unix time of the query, or def without it; -1 when malformed. */
static long long
query_time(struct sbxd_req *r, const char *k, long long def)
{
	const char *v = sbxd_query(r, k);
	uint64_t t;

	if (!v)
		return def;
	return sbx_parse_u64(v, 0, 1ULL << 40, &t) < 0 ? -1 : (long long)t;
}

/* GET /sandboxes/{id}/metrics?start=&end=: no history is kept, so the
 * sample taken now, when now is between start and end; none for a
 * paused sandbox. */
static enum MHD_Result
h_metrics(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box(r, 1, &ret);
	long long now = sbxd_now_ms() / 1000, start, end;
	json_t *a, *m;

	if (!b)
		return ret;
	start = query_time(r, "start", 0);
	end = query_time(r, "end", now);
	if (start < 0 || end < 0) {
		sbxd_box_put(b);
		return sbxd_reply_err(r, 400, "Error when parsing request: "
		    "start and end are unix seconds");
	}
	a = json_array();
	if (start <= now + 1 && end + 1 >= now && (m = box_metric(b)))
		json_array_append_new(a, m);
	sbxd_box_put(b);
	return sbxd_reply_json(r, 200, a);
}

/* GET /sandboxes/metrics?sandbox_ids=a,b (up to 100): the latest
 * sample of each that has one, by id. */
static enum MHD_Result
h_metrics_many(struct sbxd_req *r)
{
	const char *q = sbxd_query(r, "sandbox_ids");
	char *ids, *id, *save = NULL;
	struct sbxd_box *b;
	json_t *all, *m;
	int n = 0;

	if (!q || !*q)
		return sbxd_reply_err(r, 400, "Error when parsing request: "
		    "sandbox_ids is required");
	ids = sbx_xstrdup(q);
	all = json_object();
	for (id = strtok_r(ids, ",", &save); id; id = strtok_r(NULL, ",",
	    &save)) {
		if (++n > 100) {
			json_decref(all);
			free(ids);
			return sbxd_reply_err(r, 400, "Error when parsing "
			    "request: at most 100 sandbox_ids");
		}
		if (!(b = sbxd_box_get(id)))
			continue;
		if ((m = box_metric(b)))
			json_object_set_new(all, b->id, m);
		sbxd_box_put(b);
	}
	free(ids);
	return sbxd_reply_json(r, 200, json_pack("{so}", "sandboxes", all));
}

/* --- GET /sandboxes/{id}/logs, /v2/sandboxes/{id}/logs ---------------- */

/* E2B's levels, least first. */
static const char *const log_levels[] = {"debug", "info", "warn", "error",
    NULL};

static int
log_level(const char *s)
{
	int i;

	for (i = 0; s && log_levels[i]; i++)
		if (!strcasecmp(s, log_levels[i]))
			return i;
	return -1;
}

/* A field of an entry, a string whatever the log's line holds. */
static void
log_field(json_t *f, const char *k, const json_t *v)
{
	char *s;

	if (!v || json_is_null(v) || json_is_false(v))
		return;
	if (json_is_string(v)) {
		json_object_set(f, k, (json_t *)v);
	} else if ((s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT))) {
		json_object_set_new(f, k, json_string(s));
		free(s);
	}
}

/* One entry: {ms, level, message, fields}. */
static void
log_entry(json_t *a, long long ms, const char *level, json_t *msg,
    json_t *fields)
{
	json_array_append_new(a, json_pack("{s:I,s:s,s:o,s:o}", "ms",
	    (json_int_t)ms, "level", level, "message", msg, "fields",
	    fields));
}

/* The entries of one line of the log: the command (its line joined by
 * spaces), "error" when it failed, then a detached command's output a
 * line an entry, at the command's time (no line has a time of its own). */
static void
log_entries(json_t *a, const json_t *l)
{
	const json_t *v, *argv = json_object_get(l, "argv");
	const char *t = sbx_json_str(l, "time"), *logger;
	struct sbx_buf cmd = SBX_BUF_INIT;
	struct tm tm = {0};
	long long ms = 0, code = sbx_json_int(l, "exit_code", 0);
	const char *out, *nl, *end;
	json_t *f;
	size_t i;
	int failed;

	if (t && strptime(t, "%Y-%m-%dT%H:%M:%SZ", &tm))
		ms = (long long)timegm(&tm) * 1000;
	json_array_foreach(argv, i, v) {
		if (i)
			sbx_buf_add(&cmd, " ", 1);
		if (json_is_string(v))
			sbx_buf_add(&cmd, json_string_value(v),
			    json_string_length(v));
	}
	logger = json_is_true(json_object_get(l, "start")) ? "startCmd" :
	    "processSvc";
	failed = code != 0 || json_is_integer(json_object_get(l, "signal")) ||
	    json_is_true(json_object_get(l, "timed_out"));
	f = json_pack("{s:s}", "logger", logger);
	log_field(f, "cmdID", json_object_get(l, "id"));
	log_field(f, "detached", json_object_get(l, "detached"));
	if (json_is_true(json_object_get(l, "ended")))
		log_field(f, "exitCode", json_object_get(l, "exit_code"));
	log_field(f, "signal", json_object_get(l, "signal"));
	log_field(f, "timedOut", json_object_get(l, "timed_out"));
	log_field(f, "durationMs", json_object_get(l, "duration_ms"));
	log_entry(a, ms, failed ? "error" : "info", sbx_json_bytes(cmd.len ?
	    cmd.data : "", cmd.len), f);
	sbx_buf_release(&cmd);
	if (!(out = sbx_json_str(l, "output")))
		return;
	end = out + strlen(out);
	for (; out < end; out = nl + 1) {
		if (!(nl = memchr(out, '\n', (size_t)(end - out))))
			nl = end;
		log_entry(a, ms, "info", json_stringn(out, (size_t)(nl - out)),
		    json_pack("{s:s,s:O,s:s}", "logger", logger, "cmdID",
		    json_object_get(l, "id"), "stream", "output"));
	}
}

static int
by_ms_seq(const void *x, const void *y)
{
	const json_t *p = *(json_t *const *)x, *q = *(json_t *const *)y;
	long long a = sbx_json_int(p, "ms", 0), b = sbx_json_int(q, "ms", 0);

	if (a != b)
		return a < b ? -1 : 1;
	a = sbx_json_int(p, "seq", 0);
	b = sbx_json_int(q, "seq", 0);
	return a < b ? -1 : a > b;
}

/* The log's lines have the time their command started, to the second, and
 * a detached command's output none: an entry no listing saw before is of
 * now (E2B's CLI follows with start = the last time + 1 ms, and would
 * never show a line that comes later with an earlier time); then the
 * entries by time, in their order within one. The first listing keeps
 * the times the log has. */
static void
log_times(struct sbxd_box *b, json_t *a)
{
	struct timespec now;
	json_t *e, *count = json_object(), *seen, **v;
	const char *cmd;
	char key[128];
	long long ms, at, nowms;
	size_t i, n = json_array_size(a);

	clock_gettime(CLOCK_REALTIME, &now);
	nowms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	pthread_mutex_lock(&sbxd.mu);
	if (!b->log_seen)
		b->log_seen = json_object();
	json_array_foreach(a, i, e) {
		cmd = sbx_json_str(json_object_get(e, "fields"), "cmdID");
		at = sbx_json_int(count, cmd ? cmd : "", 0);
		json_object_set_new(count, cmd ? cmd : "", json_integer(at + 1));
		snprintf(key, sizeof key, "%.100s:%lld", cmd ? cmd : "", at);
		ms = sbx_json_int(e, "ms", 0);
		if ((seen = json_object_get(b->log_seen, key))) {
			at = json_integer_value(seen);
		} else {
			at = b->log_listed && nowms > ms ? nowms : ms;
			json_object_set_new(b->log_seen, key, json_integer(at));
		}
		if (at > ms)
			json_object_set_new(e, "ms", json_integer(at));
	}
	b->log_listed = 1;
	pthread_mutex_unlock(&sbxd.mu);
	json_decref(count);
	/* A stable sort: the array's order where the times are equal. */
	if (n > 1) {
		v = sbx_xcalloc(n, sizeof *v);
		for (i = 0; i < n; i++) {
			v[i] = json_incref(json_array_get(a, i));
			json_object_set_new(v[i], "seq", json_integer((json_int_t)i));
		}
		qsort(v, n, sizeof *v, by_ms_seq);
		json_array_clear(a);
		for (i = 0; i < n; i++) {
			json_object_del(v[i], "seq");
			json_array_append_new(a, v[i]);
		}
		free(v);
	}
}

/* The sandbox's log (sbx-logs(1)'s) as entries, in its order; the
 * detached commands' ends and output read in the sandbox while it runs. */
static json_t *
box_log(struct sbxd_box *b)
{
	struct sbx_err err = {0};
	json_t *ref, *lines = json_array(), *det = json_array(), *out, *l, *o;
	json_t *a = json_array();
	char *path, *buf = NULL;
	size_t n = 0, i, j;
	ssize_t len;
	FILE *f;
	int paused;

	pthread_mutex_lock(&sbxd.mu);
	ref = json_deep_copy(b->ref);
	paused = b->paused;
	pthread_mutex_unlock(&sbxd.mu);
	path = sbx_cmdlog_path(sbxd.be->name, sbx_json_str(ref, "id"));
	if (path && (f = fopen(path, "re"))) {
		while ((len = getline(&buf, &n, f)) > 0) {
			l = json_loadb(buf, (size_t)len, 0, NULL);
			if (json_is_object(l) && sbx_json_str(l, "id")) {
				json_array_append(lines, l);
				if (json_is_true(json_object_get(l,
				    "detached")))
					json_array_append(det, l);
			}
			json_decref(l);
		}
		fclose(f);
	}
	if (!paused && json_array_size(det) &&
	    (out = sbxd_be_output(ref, det, &err))) {
		json_array_foreach(out, i, o)
			json_array_foreach(lines, j, l)
				if (sbx_json_str(o, "id") && !strcmp(
				    sbx_json_str(o, "id"), sbx_json_str(l,
				    "id")))
					json_array_set(lines, j, o);
		json_decref(out);
	}
	json_array_foreach(lines, i, l)
		log_entries(a, l);
	log_times(b, a);
	free(buf);
	free(path);
	json_decref(det);
	json_decref(lines);
	json_decref(ref);
	return a;
}

/* A SandboxLogEntry of an entry. */
static json_t *
log_e2b(const json_t *e)
{
	char ts[32], *z;
	long long ms = sbx_json_int(e, "ms", 0);

	/* To the millisecond: a client's next start is its last time. */
	sbx_time_fmt(ms / 1000, ts, sizeof ts);
	if ((z = strchr(ts, 'Z')) && (size_t)(z - ts) + 6 <= sizeof ts)
		snprintf(z, sizeof ts - (size_t)(z - ts), ".%03dZ",
		    (int)(ms % 1000));
	return json_pack("{s:s,s:O,s:s,s:O}", "timestamp", ts, "message",
	    json_object_get(e, "message"), "level", sbx_json_str(e, "level"),
	    "fields", json_object_get(e, "fields"));
}

/* A query's count, def without it; -1 when not a number up to max. */
static long long
query_count(struct sbxd_req *r, const char *k, long long def,
    long long max)
{
	const char *v = sbxd_query(r, k);
	uint64_t n;

	if (!v)
		return def;
	return sbx_parse_u64(v, 0, (uint64_t)max, &n) < 0 ? -1 :
	    (long long)n;
}

/* GET /sandboxes/{id}/logs?start=MS&limit=N (deprecated; E2B's CLI):
 * {"logs":[{timestamp,line}],"logEntries":[SandboxLogEntry]}, the entries
 * from start on, oldest first; a line is the entry as one JSON object
 * ({"level","logger","msg",...fields}), envd's log line's shape. */
static enum MHD_Result
h_logs1(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box(r, 1, &ret);
	long long start, limit;
	json_t *all, *logs, *ents, *e, *line, *le;
	size_t i;
	char *s;

	if (!b)
		return ret;
	start = query_count(r, "start", 0, 1LL << 50);
	limit = query_count(r, "limit", 1000, 1LL << 31);
	if (start < 0 || limit < 0) {
		sbxd_box_put(b);
		return sbxd_reply_err(r, 400, "Error when parsing request: "
		    "start is unix milliseconds, limit a count");
	}
	all = box_log(b);
	sbxd_box_put(b);
	logs = json_array();
	ents = json_array();
	json_array_foreach(all, i, e) {
		if (sbx_json_int(e, "ms", 0) < start)
			continue;
		if ((long long)json_array_size(ents) >= limit)
			break;
		le = log_e2b(e);
		line = json_deep_copy(json_object_get(e, "fields"));
		json_object_set(line, "level", json_object_get(e, "level"));
		json_object_set(line, "msg", json_object_get(e, "message"));
		s = json_dumps(line, JSON_COMPACT);
		json_array_append_new(logs, json_pack("{s:O,s:s}", "timestamp",
		    json_object_get(le, "timestamp"), "line", s ? s : "{}"));
		free(s);
		json_decref(line);
		json_array_append_new(ents, le);
	}
	json_decref(all);
	return sbxd_reply_json(r, 200, json_pack("{s:o,s:o}", "logs", logs,
	    "logEntries", ents));
}

/* GET /v2/sandboxes/{id}/logs?cursor=MS&limit=N&direction=forward|
 * backward&level=L&search=S: {"logs":[SandboxLogEntry]}, from the
 * cursor on (forward, oldest first; the default) or back (newest
 * first, the cursor now by default); at level L or above; with S in the
 * message. */
static enum MHD_Result
h_logs2(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box(r, 2, &ret);
	const char *dir = sbxd_query(r, "direction");
	const char *lv = sbxd_query(r, "level");
	const char *search = sbxd_query(r, "search");
	long long cursor, limit, ms;
	json_t *all, *logs, *e;
	size_t i, n;
	int back, min = 0;

	if (!b)
		return ret;
	back = dir && !strcmp(dir, "backward");
	cursor = query_count(r, "cursor", back ? sbxd_now_ms() : 0,
	    1LL << 50);
	limit = query_count(r, "limit", 1000, 1000);
	if ((dir && !back && strcmp(dir, "forward")) || (lv && (min =
	    log_level(lv)) < 0) || cursor < 0 || limit < 0) {
		sbxd_box_put(b);
		return sbxd_reply_err(r, 400, "Error when parsing request: "
		    "cursor is unix milliseconds, limit 0 to 1000, direction "
		    "forward or backward, level debug, info, warn or error");
	}
	all = box_log(b);
	sbxd_box_put(b);
	logs = json_array();
	n = json_array_size(all);
	for (i = 0; i < n && (long long)json_array_size(logs) < limit; i++) {
		e = json_array_get(all, back ? n - 1 - i : i);
		ms = sbx_json_int(e, "ms", 0);
		if ((back ? ms > cursor : ms < cursor) ||
		    log_level(sbx_json_str(e, "level")) < min ||
		    (search && *search && !strstr(json_string_value(
		    json_object_get(e, "message")), search)))
			continue;
		json_array_append_new(logs, log_e2b(e));
	}
	json_decref(all);
	return sbxd_reply_json(r, 200, json_pack("{s:o}", "logs", logs));
}

/* Undo a query escape in place: %XX, and + as a space (Go's
 * url.QueryUnescape); a malformed %-sequence is -1. */
static int
query_unescape(char *s)
{
	char *w = s, h[3] = {0};

	for (; *s; s++) {
		if (*s == '+') {
			*w++ = ' ';
		} else if (*s == '%') {
			if (!isxdigit((unsigned char)s[1]) ||
			    !isxdigit((unsigned char)s[2]))
				return -1;
			h[0] = s[1];
			h[1] = s[2];
			*w++ = (char)strtol(h, NULL, 16);
			s += 2;
		} else {
			*w++ = *s;
		}
	}
	*w = 0;
	return 0;
}

/* The metadata filter, as E2B's SDKs send it and its API reads it: the
 * pairs "k=v&k2=v2" with k and v escaped, the whole escaped once more,
 * and that as the query value (escaped again on the wire; MHD has undone
 * that one). So: unescape the whole, split, unescape each part. */
static json_t *
parse_meta(const char *q)
{
	json_t *m = json_object();
	char *s = sbx_xstrdup(q), *p, *save = NULL, *eq;

	if (query_unescape(s) < 0) {
		json_decref(m);
		free(s);
		return NULL;
	}
	for (p = strtok_r(s, "&", &save); p; p = strtok_r(NULL, "&", &save)) {
		if (!(eq = strchr(p, '=')) || strchr(eq + 1, '=')) {
			json_decref(m);
			m = NULL;
			break;
		}
		*eq = 0;
		if (query_unescape(p) < 0 || query_unescape(eq + 1) < 0) {
			json_decref(m);
			m = NULL;
			break;
		}
		json_object_set_new(m, p, json_string(eq + 1));
	}
	free(s);
	return m;
}

static int
meta_match(const json_t *have, const json_t *want)
{
	const char *k;
	json_t *v;
	const char *h;

	json_object_foreach((json_t *)want, k, v) {
		h = sbx_json_str(have, k);
		if (!h || strcmp(h, json_string_value(v)))
			return 0;
	}
	return 1;
}

/* An RFC 3339 date-time ("2026-12-06T01:02:03.5Z", "...+02:00") into
 * milliseconds since the epoch; -1 if s is none. */
static int
parse_datetime(const char *s, long long *ms)
{
	struct tm tm = {0};
	int n = 0, hh, mm, i;
	long long frac = 0, scale = 1000;
	char z;

	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
	    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 19 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
	    tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
	    tm.tm_sec > 60)
		return -1;
	s += n;
	if (*s == '.') {
		for (i = 0, s++; isdigit((unsigned char)*s); i++, s++)
			if (i < 3) {
				frac = frac * 10 + (*s - '0');
				scale /= 10;
			}
		if (!i)
			return -1;
		frac *= scale;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*ms = (long long)timegm(&tm) * 1000 + frac;
	if (!strcmp(s, "Z"))
		return 0;
	n = 0;
	if (sscanf(s, "%c%2d:%2d%n", &z, &hh, &mm, &n) != 3 || s[n] ||
	    n != 6 || (z != '+' && z != '-') || hh > 23 || mm > 59)
		return -1;
	*ms -= (z == '-' ? -1 : 1) * (hh * 3600LL + mm * 60) * 1000;
	return 0;
}

static int
by_start_desc(const void *a, const void *b)
{
	const struct sbxd_box *x = *(struct sbxd_box *const *)a;
	const struct sbxd_box *y = *(struct sbxd_box *const *)b;

	if (x->started_ms != y->started_ms)
		return x->started_ms < y->started_ms ? 1 : -1;
	return strcmp(x->id, y->id);
}

static enum MHD_Result
list(struct sbxd_req *r, int v2)
{
	const char *q = sbxd_query(r, "metadata"), *st = sbxd_query(r, "state");
	const char *lim = sbxd_query(r, "limit"), *tok = sbxd_query(r,
	    "nextToken"), *order = sbxd_query(r, "order");
	/* v2's startedAfter (date-time) and template (ID or alias) */
	const char *after = v2 ? sbxd_query(r, "startedAfter") : NULL;
	const char *tq = v2 ? sbxd_query(r, "template") : NULL;
	char *tid = NULL;
	long long after_ms = 0;
	json_t *want = NULL, *arr;
	struct sbxd_box *b, **all = NULL;
	int running = 1, paused = v2, asc = 0;
	uint64_t limit = 100;
	size_t n = 0, i, start = 0, total_running = 0;
	struct MHD_Response *rs;
	enum MHD_Result ret;
	char *s, next[64] = "", rbuf[32];

	if (q && *q && !(want = parse_meta(q)))
		return sbxd_reply_err(r, 400, "Error parsing metadata");
	if (v2 && st && *st) {
		running = !!strstr(st, "running");
		paused = !!strstr(st, "paused");
		if (!running && !paused) {
			json_decref(want);
			return sbxd_reply_err(r, 400, "bad state '%s' (want "
			    "running, paused)", st);
		}
	}
	if (v2 && lim && sbx_parse_u64(lim, 1, 100, &limit) < 0) {
		json_decref(want);
		return sbxd_reply_err(r, 400, "limit must be 1 to 100");
	}
	if (after && parse_datetime(after, &after_ms) < 0) {
		json_decref(want);
		return sbxd_reply_err(r, 400, "parameter \"startedAfter\" in "
		    "query has an error: string doesn't match the format "
		    "\"date-time\"");
	}
	/* A template named by alias is its id's; one unknown matches
	 * none. */
	if (tq && *tq)
		tid = template_image(tq) ? sbx_xstrdup(tq) : sbxd_tpl_id(tq);
	if (order && !strcmp(order, "asc"))
		asc = 1;
	pthread_mutex_lock(&sbxd.mu);
	for (b = sbxd.boxes; b; b = b->next) {
		if (!b->paused)
			total_running++;
		if ((b->paused ? !paused : !running) ||
		    (want && !meta_match(b->metadata, want)) ||
		    (after && b->started_ms < after_ms) ||
		    (tq && *tq && (!tid || strcmp(b->template, tid))))
			continue;
		all = sbx_xrealloc(all, (n + 1) * sizeof *all);
		all[n++] = b;
	}
	if (n)
		qsort(all, n, sizeof *all, by_start_desc);
	if (asc)
		for (i = 0; i < n / 2; i++) {
			b = all[i];
			all[i] = all[n - 1 - i];
			all[n - 1 - i] = b;
		}
	/* The token is the id of the first sandbox of the next page. */
	if (v2 && tok && *tok) {
		for (start = 0; start < n; start++)
			if (!strcmp(all[start]->id, tok))
				break;
	}
	arr = json_array();
	for (i = start; i < n && (!v2 || i - start < limit); i++)
		json_array_append_new(arr, listed_json(all[i], 0));
	if (v2 && i < n)
		snprintf(next, sizeof next, "%s", all[i]->id);
	pthread_mutex_unlock(&sbxd.mu);
	free(all);
	free(tid);
	json_decref(want);
	s = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	rs = MHD_create_response_from_buffer(strlen(s), s,
	    MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(rs, "Content-Type", "application/json");
	if (v2 && *next)
		MHD_add_response_header(rs, "X-Next-Token", next);
	if (running) {
		snprintf(rbuf, sizeof rbuf, "%zu", total_running);
		MHD_add_response_header(rs, "X-Total-Running", rbuf);
	}
	r->status = 200;
	ret = MHD_queue_response(r->c, 200, rs);
	MHD_destroy_response(rs);
	return ret;
}

static enum MHD_Result
h_list1(struct sbxd_req *r)
{
	return list(r, 0);
}

static enum MHD_Result
h_list2(struct sbxd_req *r)
{
	return list(r, 1);
}

/* Take a box for a change of state: NULL (after answering 409) when one
 * is under way. */
int
sbxd_box_take(struct sbxd_box *b)
{
	int rc = -1;

	pthread_mutex_lock(&sbxd.mu);
	if (!b->busy && !b->gone) {
		b->busy = 1;
		rc = 0;
	}
	pthread_mutex_unlock(&sbxd.mu);
	return rc;
}

void
sbxd_box_give(struct sbxd_box *b)
{
	pthread_mutex_lock(&sbxd.mu);
	b->busy = 0;
	pthread_cond_broadcast(&sbxd.cv);
	pthread_mutex_unlock(&sbxd.mu);
}

int
sbxd_box_kill(struct sbxd_box *b, struct sbx_err *err)
{
	pthread_mutex_lock(&sbxd.mu);
	b->dying = 1;
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_proc_end_all(b);
	if (sbxd_be_kill(b->ref, err) < 0 && err->code != SBX_EX_NOSANDBOX) {
		pthread_mutex_lock(&sbxd.mu);
		b->dying = 0;
		pthread_mutex_unlock(&sbxd.mu);
		return -1;
	}
	sbxd_box_unlink(b);
	return 0;
}

static int
box_begin(struct sbxd_req *r, struct sbxd_box *b, enum MHD_Result *ret)
{
	if (sbxd_box_take(b) == 0)
		return 0;
	*ret = sbxd_reply_err(r, 409, "Sandbox \"%s\" is %s", b->id,
	    b->gone ? "being killed" : "changing state");
	return -1;
}

static void
box_end(struct sbxd_box *b)
{
	sbxd_box_give(b);
}

/* path_box and box_begin: the box, with a ref and taken; NULL after
 * answering 404 or 409. */
static struct sbxd_box *
path_box_begin(struct sbxd_req *r, int seg, enum MHD_Result *ret)
{
	struct sbxd_box *b = path_box(r, seg, ret);

	if (b && box_begin(r, b, ret) < 0) {
		sbxd_box_put(b);
		return NULL;
	}
	return b;
}

static enum MHD_Result
h_kill(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b = path_box_begin(r, 1, &ret);
	struct sbx_err err;

	if (!b)
		return ret;
	ret = sbxd_box_kill(b, &err) < 0 ? sbxd_reply_err(r, 500, "Error "
	    "killing sandbox: %s", err.msg) : sbxd_reply_empty(r, 204);
	box_end(b);
	sbxd_box_put(b);
	return ret;
}

/* The seconds of a body's key; -1 after answering 400. */
static long long
body_secs(struct sbxd_req *r, const char *key, int required,
    long long def, enum MHD_Result *ret)
{
	json_t *j, *v;
	long long s = def;

	if (!r->body.len && !required)
		return def;
	if (!(j = sbxd_body_json(r, ret)))
		return -1;
	v = json_object_get(j, key);
	if (v && json_is_integer(v))
		s = json_integer_value(v);
	else if (v || required) {
		json_decref(j);
		*ret = sbxd_reply_err(r, 400, "Error when parsing request: "
		    "\"%s\" must be an integer", key);
		return -1;
	}
	json_decref(j);
	return s;
}

/* A new end for a box, capped by the longest life; 0, or -1 when the
 * cap is already past. allow_shorter as set-timeout. */
static int
set_end(struct sbxd_box *b, long long secs, int allow_shorter)
{
	long long now = sbxd_now_ms(), end = now + secs * 1000;
	long long cap = b->started_ms + (long long)sbxd.o.max_timeout * 1000;
	int rc = 0;

	pthread_mutex_lock(&sbxd.mu);
	if (now >= cap) {
		rc = -1;
	} else {
		if (end > cap)
			end = cap;
		if (allow_shorter || end > b->end_ms)
			b->end_ms = end;
	}
	pthread_cond_broadcast(&sbxd.cv);
	pthread_mutex_unlock(&sbxd.mu);
	return rc;
}

/* The path's running box to end s seconds from now: set-timeout and
 * refresh. */
static enum MHD_Result
extend(struct sbxd_req *r, long long s, int allow_shorter)
{
	enum MHD_Result ret;
	struct sbxd_box *b;

	if (!(b = path_box(r, 1, &ret)))
		return ret;
	if (b->paused) {
		ret = not_found(r, b->id);
	} else if (s <= 0) {
		ret = sbxd_reply_err(r, 400, "Timeout must be greater than 0");
	} else if (set_end(b, s, allow_shorter) < 0) {
		ret = sbxd_reply_err(r, 400, "Max instance length exceeded");
	} else {
		sbxd_box_save(b);
		ret = sbxd_reply_empty(r, 204);
	}
	sbxd_box_put(b);
	return ret;
}

static enum MHD_Result
h_timeout(struct sbxd_req *r)
{
	enum MHD_Result ret;
	long long s = body_secs(r, "timeout", 1, 0, &ret);

	if (s < 0)
		return ret;
	return extend(r, s, 1);
}

static enum MHD_Result
h_refresh(struct sbxd_req *r)
{
	enum MHD_Result ret;
	long long s = body_secs(r, "duration", 0, 15, &ret);

	if (s < 0)
		return ret;
	if (s < 15)
		s = 15;
	if (s > 3600)
		return sbxd_reply_err(r, 400, "Duration cannot be greater "
		    "than 3600 seconds");
	return extend(r, s, 0);
}

/* E2B's pause; {"memory": false}, a filesystem-only pause, stops the
 * sandbox's processes and keeps its files: its resume is a cold start. */
static enum MHD_Result
h_pause(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b;
	struct sbx_err err;
	json_t *j, *v;
	int stop = 0;

	if (r->body.len) {
		if (!(j = sbxd_body_json(r, &ret)))
			return ret;
		v = json_object_get(j, "memory");
		stop = v && !json_is_boolean(v) && !json_is_null(v) ? -1 :
		    json_is_false(v);
		json_decref(j);
		if (stop < 0)
			return sbxd_reply_err(r, 400, "Error when parsing "
			    "request: \"memory\" must be a boolean");
	}
	if (!(b = path_box_begin(r, 1, &ret)))
		return ret;
	if (b->paused) {
		ret = sbxd_reply_err(r, 409, "Error pausing sandbox - sandbox "
		    "'%s' is already paused", b->id);
	} else if ((stop ? sbxd_be_stop(b->ref, &err) : sbxd_be_pause(b->ref,
	    &err)) < 0) {
		ret = sbxd_reply_err(r, 500, "Error pausing sandbox: %s",
		    err.msg);
	} else {
		pthread_mutex_lock(&sbxd.mu);
		b->paused = 1;
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_box_save(b);
		ret = sbxd_reply_empty(r, 204);
	}
	box_end(b);
	sbxd_box_put(b);
	return ret;
}

/* connect (resume or attach), v2's connect (the body optional, 300 s
 * unless told; "memory": false, a cold boot, sbxd cannot do), and the
 * older resume. */
static enum MHD_Result
resume(struct sbxd_req *r, int connect, int v2)
{
	enum MHD_Result ret;
	long long s = body_secs(r, "timeout", connect && !v2,
	    v2 ? SBXD_DEFAULT_TIMEOUT_V2 : 15, &ret);
	struct sbxd_box *b;
	struct sbx_err err;
	json_t *j;
	int cold = 0;

	if (s < 0)
		return ret;
	if (s <= 0)
		return sbxd_reply_err(r, 400, "Timeout must be greater than 0");
	/* v2's "memory": false (the SDK's onResume: 'reboot'): a paused
	 * sandbox is resumed from its files alone, its processes gone. */
	if (v2 && r->body.len) {
		j = json_loadb(r->body.data, r->body.len, 0, NULL);
		cold = j && json_is_false(json_object_get(j, "memory"));
		json_decref(j);
	}
	if (!(b = path_box_begin(r, v2 ? 2 : 1, &ret)))
		return ret;
	if (!b->paused) {
		box_end(b);
		if (!connect) {
			ret = sbxd_reply_err(r, 409, "Sandbox \"%s\" is already "
			    "running", b->id);
		} else {
			set_end(b, s, 0);
			sbxd_box_save(b);
			ret = sbxd_reply_json(r, 200, sandbox_json(b));
		}
		sbxd_box_put(b);
		return ret;
	}
	if (!connect && r->body.len) {
		j = json_loadb(r->body.data, r->body.len, 0, NULL);
		if (j && json_is_boolean(json_object_get(j, "autoPause")))
			b->auto_pause = json_is_true(json_object_get(j,
			    "autoPause"));
		json_decref(j);
	}
	/* Cold: its processes end (a stop of the thawed sandbox), then it
	 * starts again over its files. A stopped one is cold already. */
	if (sbxd_be_resume(b->ref, &err) < 0 || (cold &&
	    (sbxd_be_stop(b->ref, &err) < 0 || sbxd_be_resume(b->ref,
	    &err) < 0))) {
		ret = sbxd_reply_err(r, 500, "Error resuming sandbox: %s",
		    err.msg);
	} else {
		pthread_mutex_lock(&sbxd.mu);
		b->paused = 0;
		/* A resumed sandbox's life starts again. */
		b->started_ms = sbxd_now_ms();
		b->end_ms = b->started_ms + s * 1000;
		pthread_mutex_unlock(&sbxd.mu);
		sbxd_box_save(b);
		ret = sbxd_reply_json(r, 201, sandbox_json(b));
	}
	box_end(b);
	sbxd_box_put(b);
	return ret;
}

static enum MHD_Result
h_connect(struct sbxd_req *r)
{
	return resume(r, 1, 0);
}

static enum MHD_Result
h_connect2(struct sbxd_req *r)
{
	return resume(r, 1, 1);
}

static enum MHD_Result
h_resume(struct sbxd_req *r)
{
	return resume(r, 0, 0);
}

/* E2B's network update j (a PUT's body: what it omits is cleared, a
 * proxy too) applied to b, taken, through the backend's net_rules: 0,
 * or the status to answer with msg. */
int
sbxd_net_put(struct sbxd_box *b, const json_t *j, char *msg, size_t n)
{
	json_t *shown = NULL, *set = NULL, *out;
	struct sbx_spec spec = {0};
	struct sbx_err err;
	const json_t *v;
	int st = 0;

	v = json_object_get(j, "allow_internet_access");
	if (v && !json_is_boolean(v)) {
		snprintf(msg, n, "Error when parsing request: "
		    "\"allow_internet_access\" must be a boolean");
		return 400;
	}
	if (net_parse(j, !(v && json_is_false(v)), &spec, &shown, msg,
	    n) < 0) {
		st = 400;
		goto out;
	}
	/* Not one of E2B's update's fields: what the sandbox was made with
	 * stays. */
	if ((v = json_object_get(j, "maskRequestHost")) && !json_is_null(v)) {
		snprintf(msg, n, "network.maskRequestHost is set at create "
		    "only");
		st = 400;
		goto out;
	}
	/* Given a network (made without internet), or a CA (made without
	 * rules) while paused: at resume would surprise; refused. */
	if (b->paused && ((!b->internet && spec.network == SBX_NET_ALLOW) ||
	    (spec.net_inject && !b->ca))) {
		snprintf(msg, n, "Sandbox \"%s\" is paused: resume it to give "
		    "it a network or network.rules", b->id);
		st = 409;
		goto out;
	}
	/* Made without internet: the backend gives it a network now (for
	 * the local one, a sbx-netd that lets out); made without rules: a CA
	 * now, in its trust store. No internet at all: every connection
	 * denied, the helper stays. What the body omits is cleared: the
	 * proxy, the header rules. */
	set = spec.network == SBX_NET_DENY ? json_pack("{s:[],s:[s],s:n,"
	    "s:[],s:s}", "allow_out", "deny_out", "all", "egress_proxy",
	    "inject", "network", "deny") : json_pack("{s:o,s:o,s:O,s:o,s:s}",
	    "allow_out", spec.net_rules ? json_incref(json_object_get(
	    spec.net_rules, "allow_out")) : json_array(), "deny_out",
	    spec.net_rules ? json_incref(json_object_get(spec.net_rules,
	    "deny_out")) : json_array(), "egress_proxy", spec.egress_proxy ?
	    spec.egress_proxy : json_null(), "inject", spec.net_inject ?
	    json_incref(spec.net_inject) : json_array(), "network", "allow");
	if (!(out = sbxd_be_net_rules(b->ref, set, &err))) {
		sbxd_log("cannot change the network of %s: %s", b->id, err.msg);
		snprintf(msg, n, "Error updating the sandbox's network: %s",
		    err.msg);
		st = err.code == SBX_EX_USAGE ? 400 : 500;
		goto out;
	}
	json_decref(out);
	pthread_mutex_lock(&sbxd.mu);
	b->internet = spec.network == SBX_NET_ALLOW;
	if (spec.net_inject)
		b->ca = 1;
	if ((v = json_object_get(b->network, "maskRequestHost")))
		json_object_set(shown, "maskRequestHost", (json_t *)v);
	json_decref(b->network);
	b->network = shown;
	shown = NULL;
	pthread_mutex_unlock(&sbxd.mu);
	sbxd_box_save(b);
out:
	json_decref(set);
	json_decref(shown);
	json_decref(spec.net_rules);
	json_decref(spec.net_inject);
	proxy_free(spec.egress_proxy);
	return st;
}

/* PUT /sandboxes/ID/network: E2B's update (sbxd_net_put). */
static enum MHD_Result
h_network(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_body_json(r, &ret);
	struct sbxd_box *b;
	char msg[256];
	int st;

	if (!j)
		return ret;
	if ((b = path_box_begin(r, 1, &ret))) {
		st = sbxd_net_put(b, j, msg, sizeof msg);
		ret = st ? sbxd_reply_err(r, st, "%s", msg) :
		    sbxd_reply_empty(r, 204);
		box_end(b);
		sbxd_box_put(b);
	}
	json_decref(j);
	return ret;
}

/* POST /sandboxes/ID/fork {"timeout","count"}: count (1..100, 1 when
 * not given) new sandboxes from one snapshot of its files (no process
 * goes with them), with its metadata, environment and envd security:
 * [{"sandbox":Sandbox} | {"error":{"code","message"}}], one per copy. The
 * snapshot stays, listed, as sbx-fork's does. A sandbox with network
 * rules is not forked yet (501): its copies would have to carry them. */
static enum MHD_Result
h_fork(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = NULL, *v, *meta, *body = NULL, *all, *out;
	struct sbxd_box *b;
	struct sbx_err err = {0};
	long long count = 1, timeout = SBXD_DEFAULT_TIMEOUT, i;
	char emsg[512];
	int status;

	if (r->body.len && !(j = sbxd_body_json(r, &ret)))
		return ret;
	if ((v = json_object_get(j, "count")) && !json_is_null(v))
		count = json_is_integer(v) ? json_integer_value(v) : 0;
	if ((v = json_object_get(j, "timeout")) && !json_is_null(v))
		timeout = json_is_integer(v) ? json_integer_value(v) : 0;
	json_decref(j);
	if (count < 1 || count > 100 || timeout <= 0)
		return sbxd_reply_err(r, 400, "Error when parsing request: "
		    "\"count\" must be 1 to 100 and \"timeout\" a positive "
		    "integer");
	if (!(b = path_box_begin(r, 1, &ret)))
		return ret;
	if (b->ca || json_array_size(json_object_get(b->network,
	    "allowOut")) || json_array_size(json_object_get(b->network,
	    "denyOut")) || json_object_get(b->network, "egressProxy") ||
	    json_object_get(b->network, "maskRequestHost")) {
		ret = sbxd_reply_err(r, 501, "sbxd does not support forking a "
		    "sandbox with network rules (see sbxd(8))");
	} else if (!(meta = sbxd_be_snapshot(b->ref, NULL, &err))) {
		ret = sbxd_reply_err(r, 500, "Error forking sandbox: %s",
		    err.msg);
	} else {
		body = json_pack("{s:s,s:I,s:O,s:O,s:b,s:b}", "templateID",
		    sbx_json_str(meta, "snapshot"), "timeout",
		    (json_int_t)timeout, "metadata", b->metadata, "envVars",
		    b->envs, "secure", b->token[0] != '\0',
		    "allow_internet_access", b->internet);
		json_decref(meta);
		ret = MHD_NO;
	}
	box_end(b);
	sbxd_box_put(b);
	if (!body)
		return ret;
	all = json_array();
	for (i = 0; i < count; i++) {
		out = NULL;
		status = new_box(r, body, 0, NULL, &out, emsg, sizeof emsg);
		json_array_append_new(all, status == 201 ? json_pack("{s:o}",
		    "sandbox", out) : json_pack("{s:{s:i,s:s}}", "error",
		    "code", status, "message", emsg));
	}
	json_decref(body);
	return sbxd_reply_json(r, 201, all);
}

/* --- volumes: the backend's (sbx-volume(1)), a volume's id its name -- */

static json_t *
vol_json(const json_t *v)
{
	return json_pack("{s:s,s:s}", "volumeID", sbx_json_str(v, "name"),
	    "name", sbx_json_str(v, "name"));
}

json_t *
sbxd_vol_find(const char *id, struct sbx_err *err)
{
	json_t *all = sbxd_be_volume("ls", NULL, err), *v, *found = NULL;
	size_t i;

	json_array_foreach(all, i, v)
		if (!strcmp(sbx_json_str(v, "name") ? sbx_json_str(v, "name") :
		    "", id))
			found = json_incref(v);
	json_decref(all);
	return found;
}

/* {"volumeID","name","token"}: E2B's VolumeAndToken, the token the one
 * of its content API (volume.c). */
static enum MHD_Result
vol_reply(struct sbxd_req *r, int status, const json_t *v, const char *id)
{
	char tok[65];
	enum MHD_Result ret;

	if (!v || sbxd_vol_token(v, tok) < 0)
		return sbxd_reply_err(r, 500, "cannot make volume '%s''s token",
		    id);
	ret = sbxd_reply_json(r, status, json_pack("{s:s,s:s,s:s}",
	    "volumeID", id, "name", id, "token", tok));
	explicit_bzero(tok, sizeof tok);
	return ret;
}

/* POST /volumes {"name"}: 201 {"volumeID","name","token"}; a name in use
 * 409. */
static enum MHD_Result
h_volume_new(struct sbxd_req *r)
{
	enum MHD_Result ret;
	json_t *j = sbxd_body_json(r, &ret), *v, *out;
	struct sbx_err err = {0};
	const char *name;

	if (!j)
		return ret;
	name = sbx_json_str(j, "name");
	if (!name || !sbx_volume_valid_name(name)) {
		ret = sbxd_reply_err(r, 400, "volume name '%s' is not valid: a "
		    "letter or digit, then letters, digits, '_', '.' or '-', "
		    "at most 64", name ? name : "");
	} else if ((v = sbxd_vol_find(name, &err))) {
		json_decref(v);
		ret = sbxd_reply_err(r, 409, "volume '%s' already exists",
		    name);
	} else if (!(out = sbxd_be_volume("create", name, &err))) {
		ret = sbxd_reply_err(r, 500, "cannot create the volume: %s",
		    err.msg);
	} else {
		ret = vol_reply(r, 201, json_array_get(out, 0), name);
		json_decref(out);
	}
	json_decref(j);
	return ret;
}

static enum MHD_Result
h_volumes(struct sbxd_req *r)
{
	struct sbx_err err = {0};
	json_t *all = sbxd_be_volume("ls", NULL, &err), *a, *v;
	size_t i;

	if (!all)
		return sbxd_reply_err(r, 500, "cannot list the volumes: %s",
		    err.msg);
	a = json_array();
	json_array_foreach(all, i, v)
		json_array_append_new(a, vol_json(v));
	json_decref(all);
	return sbxd_reply_json(r, 200, a);
}

static enum MHD_Result
h_volume_get(struct sbxd_req *r)
{
	char *id = sbxd_path_seg(r, 1);
	struct sbx_err err = {0};
	enum MHD_Result ret;
	json_t *v = sbxd_vol_find(id, &err);

	ret = v ? vol_reply(r, 200, v, id) :
	    sbxd_reply_err(r, 404, "volume '%s' not found", id);
	json_decref(v);
	free(id);
	return ret;
}

/* 409 for volume id in use, naming sbxd's sandboxes that mount it (the
 * backend's message names its own ids). */
static enum MHD_Result
vol_busy(struct sbxd_req *r, const char *id, const char *msg)
{
	struct sbxd_box *b;
	struct sbx_buf ids = {0};
	enum MHD_Result ret;
	json_t *m;
	size_t i;

	pthread_mutex_lock(&sbxd.mu);
	for (b = sbxd.boxes; b; b = b->next)
		json_array_foreach(b->volumes, i, m)
			if (!strcmp(sbx_json_str(m, "name") ? sbx_json_str(m,
			    "name") : "", id)) {
				if (ids.len)
					sbx_buf_add(&ids, ", ", 2);
				sbx_buf_add(&ids, b->id, strlen(b->id));
				break;
			}
	pthread_mutex_unlock(&sbxd.mu);
	if (!ids.len) {
		sbx_buf_release(&ids);
		return sbxd_reply_err(r, 409, "%s", msg);
	}
	sbx_buf_add(&ids, "", 1);
	ret = sbxd_reply_err(r, 409, "volume '%s' is in use by %s", id,
	    ids.data);
	sbx_buf_release(&ids);
	return ret;
}

/* DELETE /volumes/ID: 204; 409 while a sandbox not gone mounts it. */
static enum MHD_Result
h_volume_rm(struct sbxd_req *r)
{
	char *id = sbxd_path_seg(r, 1);
	struct sbx_err err = {0};
	enum MHD_Result ret;
	json_t *out;

	if (!sbx_volume_valid_name(id)) {
		ret = sbxd_reply_err(r, 404, "volume '%s' not found", id);
	} else if (!(out = sbxd_be_volume("rm", id, &err))) {
		ret = err.code == SBX_EX_NOSANDBOX ? sbxd_reply_err(r, 404,
		    "volume '%s' not found", id) : err.code == SBX_EX_FAIL &&
		    strstr(err.msg, "in use") ? vol_busy(r, id, err.msg) :
		    sbxd_reply_err(r, 500, "%s", err.msg);
	} else {
		json_decref(out);
		ret = sbxd_reply_empty(r, 204);
	}
	free(id);
	return ret;
}

/* A snapshot as E2B lists it: {"snapshotID","names":[its name, if any]}. */
static json_t *
snap_json(const json_t *meta)
{
	json_t *names = json_array();

	if (sbx_json_str(meta, "name"))
		json_array_append_new(names, json_string(sbx_json_str(meta,
		    "name")));
	return json_pack("{s:s,s:o}", "snapshotID", sbx_json_str(meta,
	    "snapshot"), "names", names);
}

/* POST /sandboxes/ID/snapshots {"name"}: the sandbox's files as a
 * snapshot (sbx-snapshot(1)), usable as a template. */
static enum MHD_Result
h_snapshot(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct sbxd_box *b;
	struct sbx_err err = {0};
	struct sbx_err ignored = {0};
	json_t *j = NULL, *meta;
	const char *name = NULL;

	if (r->body.len) {
		if (!(j = sbxd_body_json(r, &ret)))
			return ret;
		name = sbx_json_str(j, "name");
		if (json_object_get(j, "name") && !json_is_null(json_object_get(
		    j, "name")) && (!name || !sbx_snap_valid_name(name))) {
			json_decref(j);
			return sbxd_reply_err(r, 400, "snapshot name is not "
			    "valid: letters and digits, then '.', '_' or '-' "
			    "too, at most 63, not snp-...");
		}
	}
	if (!(b = path_box_begin(r, 1, &ret))) {
		json_decref(j);
		return ret;
	}
	/* A name in use is E2B's "a new build of that template": the new
	 * snapshot takes the name, the old one goes unless a sandbox stands
	 * on it (then it stays, unnamed, until deleted). */
	if (name && (meta = sbx_snap_get(name, &err))) {
		json_decref(meta);
		if ((meta = sbxd_be_snapshot(b->ref, NULL, &err))) {
			char *was = NULL;

			if (sbx_snap_take_name(sbx_json_str(meta, "snapshot"),
			    name, &was, &err) < 0) {
				sbx_snap_rm(sbx_json_str(meta, "snapshot"),
				    &ignored);
				json_decref(meta);
				meta = NULL;
			} else {
				json_object_set_new(meta, "name",
				    json_string(name));
				if (was && sbx_snap_rm(was, &ignored) == 0)
					sbxd_log("snapshot %s replaced by %s "
					    "as '%s'", was, sbx_json_str(meta,
					    "snapshot"), name);
				free(was);
			}
		}
	} else {
		memset(&err, 0, sizeof err);
		meta = sbxd_be_snapshot(b->ref, name, &err);
	}
	if (!meta)
		ret = sbxd_reply_err(r, err.code == SBX_EX_FAIL &&
		    name && strstr(err.msg, "in use") ? 409 : err.code ==
		    SBX_EX_USAGE ? 400 : 500, "Error creating snapshot: %s",
		    err.msg);
	else
		ret = sbxd_reply_json(r, 201, snap_json(meta));
	json_decref(meta);
	json_decref(j);
	box_end(b);
	sbxd_box_put(b);
	return ret;
}

struct snap_list {
	json_t *all;
	const char *box, *name;
};

static int
snap_each(json_t *meta, void *arg)
{
	struct snap_list *l = arg;
	const char *box = sbx_json_str(json_object_get(meta, "labels"),
	    "sbxd");

	if (l->box && (!box || strcmp(box, l->box)))
		return 0;
	if (l->name && (!sbx_json_str(meta, "name") ||
	    strcmp(sbx_json_str(meta, "name"), l->name)))
		return 0;
	json_array_append(l->all, meta);
	return 0;
}

static int
by_created_desc(const void *a, const void *b)
{
	long long x = sbx_json_int(*(json_t *const *)a, "created_epoch", 0);
	long long y = sbx_json_int(*(json_t *const *)b, "created_epoch", 0);

	return x < y ? 1 : x > y ? -1 : 0;
}

/* GET /snapshots?sandboxID=&name=&limit=&nextToken=: newest first, a
 * page at a time (nextToken: where the next page starts). */
static enum MHD_Result
h_snapshots(struct sbxd_req *r)
{
	struct snap_list l = {NULL, sbxd_query(r, "sandboxID"),
	    sbxd_query(r, "name")};
	struct sbx_err err = {0};
	long long limit = query_count(r, "limit", 100, 1000);
	long long from = query_count(r, "nextToken", 0, 1LL << 31);
	json_t **v, *page;
	struct MHD_Response *rs;
	enum MHD_Result ret;
	char next[32], *s;
	size_t i, n;

	if (limit <= 0 || from < 0)
		return sbxd_reply_err(r, 400, "invalid limit or nextToken");
	l.all = json_array();
	if (sbx_snap_list(snap_each, &l, &err) < 0) {
		json_decref(l.all);
		return sbxd_reply_err(r, 500, "cannot list the snapshots: %s",
		    err.msg);
	}
	n = json_array_size(l.all);
	v = sbx_xcalloc(n + 1, sizeof *v);
	for (i = 0; i < n; i++)
		v[i] = json_array_get(l.all, i);
	qsort(v, n, sizeof *v, by_created_desc);
	page = json_array();
	for (i = (size_t)from; i < n && i < (size_t)(from + limit); i++)
		json_array_append_new(page, snap_json(v[i]));
	next[0] = '\0';
	if ((size_t)(from + limit) < n)
		snprintf(next, sizeof next, "%lld", from + limit);
	free(v);
	json_decref(l.all);
	s = json_dumps(page, JSON_COMPACT);
	json_decref(page);
	rs = MHD_create_response_from_buffer(strlen(s), s,
	    MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(rs, "Content-Type", "application/json");
	if (*next)
		MHD_add_response_header(rs, "X-Next-Token", next);
	r->status = 200;
	ret = MHD_queue_response(r->c, 200, rs);
	MHD_destroy_response(rs);
	return ret;
}

static enum MHD_Result
h_health(struct sbxd_req *r)
{
	return sbxd_reply_empty(r, 204);
}

static enum MHD_Result
h_unsupported(struct sbxd_req *r)
{
	char *first = sbxd_path_seg(r, 0);
	const char *what = "this endpoint";
	enum MHD_Result ret;

	if (first && (strstr(first, "templates") || !strcmp(first, "v2") ||
	    !strcmp(first, "v3")))
		what = "the v1 template builds (POST /templates: an image "
		    "pushed to E2B's registry, which sbxd has not; build with "
		    "POST /v3/templates, the SDK's Template.build)";
	if (first && !strcmp(first, "teams"))
		what = "team metrics";
	ret = sbxd_reply_err(r, 501, "sbxd does not support %s (see sbxd(8))",
	    what);
	free(first);
	return ret;
}

const struct sbxd_route sbxd_control_routes[] = {
	{"GET", "/health", 0, h_health, NULL},
	{"POST", "/sandboxes", 0, h_create, NULL},
	{"GET", "/sandboxes", 0, h_list1, NULL},
	{"GET", "/v2/sandboxes", 0, h_list2, NULL},
	{"POST", "/v2/sandboxes", 0, h_create2, NULL},
	{"POST", "/v2/sandboxes/*/connect", 0, h_connect2, NULL},
	{"GET", "/sandboxes/metrics", 0, h_metrics_many, NULL},
	{"GET", "/sandboxes/*", 0, h_get, NULL},
	{"DELETE", "/sandboxes/*", 0, h_kill, NULL},
	{"POST", "/sandboxes/*/timeout", 0, h_timeout, NULL},
	{"POST", "/sandboxes/*/refreshes", 0, h_refresh, NULL},
	{"POST", "/sandboxes/*/pause", 0, h_pause, NULL},
	{"POST", "/sandboxes/*/connect", 0, h_connect, NULL},
	{"POST", "/sandboxes/*/resume", 0, h_resume, NULL},
	{"POST", "/sandboxes/*/fork", 0, h_fork, NULL},
	{"POST", "/sandboxes/*/snapshots", 0, h_snapshot, NULL},
	{"GET", "/snapshots", 0, h_snapshots, NULL},
	{"PUT", "/sandboxes/*/network", 0, h_network, NULL},
	{"GET", "/sandboxes/*/metrics", 0, h_metrics, NULL},
	{"GET", "/sandboxes/*/logs", 0, h_logs1, NULL},
	{"GET", "/v2/sandboxes/*/logs", 0, h_logs2, NULL},
	{"POST", "/templates", 0, h_unsupported, NULL},
	{"POST", "/v2/templates", 0, h_unsupported, NULL},
	{"GET", "/volumes", 0, h_volumes, NULL},
	{"POST", "/volumes", 0, h_volume_new, NULL},
	{"GET", "/volumes/*", 0, h_volume_get, NULL},
	{"DELETE", "/volumes/*", 0, h_volume_rm, NULL},
	{NULL, NULL, 0, NULL, NULL},
};

int
sbxd_e2b_new_box(struct sbxd_req *r, json_t *j, const struct sbxd_new *o,
    json_t **out, char *emsg, size_t en)
{
	return new_box(r, j, 1, o, out, emsg, en);
}

void
sbxd_box_size(const struct sbxd_box *b, json_int_t *cpus, json_int_t *mem_mb,
    json_int_t *disk)
{
	*cpus = size_of(b, 0);
	*mem_mb = size_of(b, 1);
	*disk = disk_mb(b);
}
