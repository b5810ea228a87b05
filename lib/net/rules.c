/* rules.c - egress rules: parsing them, the protected address classes,
 * and the verdict for one connection (net.h) */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net.h"

static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xff, 0xff};

static int
bad(struct sbx_err *err, const char *text, const char *why)
{
	/* Long enough for any name, short enough to leave room for why. */
	return sbx_err_set(err, SBX_EX_USAGE, "invalid rule '%.300s': %s",
	    text, why);
}

/* Keep the first prefix bits of addr, zero the rest. */
static void
mask(unsigned char *addr, int len, int prefix)
{
	int i;

	for (i = 0; i < len; i++, prefix -= 8)
		if (prefix <= 0)
			addr[i] = 0;
		else if (prefix < 8)
			addr[i] &= (unsigned char)(0xff << (8 - prefix));
}

/* "ADDR" or "ADDR/PREFIX"; 1 when text is no address at all (maybe a
 * domain), -1 when it is one but wrong. Host bits are masked rather than
 * refused: "10.1.2.3/8" is 10.0.0.0/8, as iptables takes it. */
static int
parse_cidr(const char *text, struct sbx_net_rule *r, struct sbx_err *err)
{
	char a[INET6_ADDRSTRLEN];
	const char *slash = strchr(text, '/'), *p;
	size_t n = slash ? (size_t)(slash - text) : strlen(text);
	int max, prefix = 0;

	if (n >= sizeof a)
		return slash ? bad(err, text, "not an address or CIDR") : 1;
	memcpy(a, text, n);
	a[n] = '\0';
	if (inet_pton(AF_INET, a, r->addr) == 1) {
		r->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, a, r->addr) == 1) {
		r->family = AF_INET6;
		max = 128;
	} else {
		return slash ? bad(err, text, "not an address or CIDR") : 1;
	}
	if (!slash) {
		prefix = max;
	} else {
		p = slash + 1;
		if (!*p || strlen(p) > 3)
			return bad(err, text, "bad prefix length");
		for (; *p; p++) {
			if (!isdigit((unsigned char)*p))
				return bad(err, text, "bad prefix length");
			prefix = prefix * 10 + (*p - '0');
		}
		if (prefix > max)
			return bad(err, text, "prefix length out of range");
	}
	/* ::ffff:a.b.c.d/N is the v4 rule a.b.c.d/N-96: destinations are
	 * judged as v4 when they are v4-mapped, so must the rule be. */
	if (r->family == AF_INET6 && prefix >= 96 &&
	    !memcmp(r->addr, v4mapped, 12)) {
		memmove(r->addr, r->addr + 12, 4);
		memset(r->addr + 4, 0, 12);
		r->family = AF_INET;
		prefix -= 96;
	}
	r->kind = SBX_NR_CIDR;
	r->prefix = prefix;
	mask(r->addr, r->family == AF_INET ? 4 : 16, prefix);
	return 0;
}

/* A host name into r->domain, lower case, one trailing dot dropped. A
 * single label ("localhost") is a name. One whose last label is all
 * digits is refused: "1.2.3.256" is a mistyped address, not a name. */
static int
parse_domain(const char *text, const char *s, struct sbx_net_rule *r,
    struct sbx_err *err)
{
	size_t n = strlen(s), i, label = 0;
	int digits = 1;

	if (n && s[n - 1] == '.')
		n--;
	if (!n)
		return bad(err, text, "empty name");
	if (n > 253)
		return bad(err, text, "name longer than 253 characters");
	for (i = 0; i <= n; i++) {
		char c = i < n ? s[i] : '.';

		if (c == '.') {
			if (!label)
				return bad(err, text, "empty label");
			if (s[i - 1] == '-')
				return bad(err, text, "label ends with '-'");
			if (i == n && digits)
				return bad(err, text, "not an address");
			label = 0;
			digits = 1;
		} else if (isalnum((unsigned char)c) || c == '-') {
			if (c == '-' && !label)
				return bad(err, text,
				    "label starts with '-'");
			if (++label > 63)
				return bad(err, text,
				    "label longer than 63 characters");
			if (!isdigit((unsigned char)c))
				digits = 0;
		} else {
			return bad(err, text,
			    "not an address, CIDR or domain name");
		}
		if (i < n)
			r->domain[i] = (char)tolower((unsigned char)c);
	}
	r->domain[n] = '\0';
	return 0;
}

int
sbx_net_rule_parse(const char *text, struct sbx_net_rule *r,
    struct sbx_err *err)
{
	int rc;

	memset(r, 0, sizeof *r);
	/* Case-blind, so that "ALL" cannot quietly become a domain. */
	if (!strcasecmp(text, "all")) {
		r->kind = SBX_NR_ALL;
		return 0;
	}
	if (text[0] == '*') {
		if (text[1] != '.')
			return bad(err, text,
			    "a wildcard is '*.' and a domain name");
		r->kind = SBX_NR_WILDCARD;
		return parse_domain(text, text + 2, r, err);
	}
	if ((rc = parse_cidr(text, r, err)) <= 0)
		return rc;
	r->kind = SBX_NR_DOMAIN;
	return parse_domain(text, text, r, err);
}

/* The rules of one key: absent or null is none. */
static int
parse_list(const json_t *net, const char *key, struct sbx_net_rule **out,
    size_t *n, struct sbx_err *err)
{
	const json_t *a = json_object_get(net, key), *v;
	size_t i;

	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return sbx_err_set(err, SBX_EX_DATA,
		    "'%s' is not an array of rules", key);
	if (!json_array_size(a))
		return 0;
	*out = sbx_xcalloc(json_array_size(a), sizeof **out);
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return sbx_err_set(err, SBX_EX_DATA,
			    "'%s' holds a rule that is not a string", key);
		if (sbx_net_rule_parse(json_string_value(v), &(*out)[i],
		    err) < 0)
			return -1;
		(*n)++;
	}
	return 0;
}

int
sbx_net_rules_from_json(const json_t *net, struct sbx_net_rules *rs,
    struct sbx_err *err)
{
	memset(rs, 0, sizeof *rs);
	if (!json_is_object(net))
		return sbx_err_set(err, SBX_EX_DATA,
		    "network rules are not a JSON object");
	if (parse_list(net, "allow_out", &rs->allow, &rs->nallow, err) < 0 ||
	    parse_list(net, "deny_out", &rs->deny, &rs->ndeny, err) < 0) {
		sbx_net_rules_free(rs);
		return -1;
	}
	return 0;
}

void
sbx_net_rules_free(struct sbx_net_rules *rs)
{
	free(rs->allow);
	free(rs->deny);
	memset(rs, 0, sizeof *rs);
}

static int
has_domain(const struct sbx_net_rule *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (r[i].kind == SBX_NR_DOMAIN || r[i].kind == SBX_NR_WILDCARD)
			return 1;
	return 0;
}

int
sbx_net_rules_want_host(const struct sbx_net_rules *rs)
{
	return has_domain(rs->allow, rs->nallow) ||
	    has_domain(rs->deny, rs->ndeny);
}

/* dest as family and address bytes, a v4-mapped v6 as v4; 0 if neither. */
static int
dest_addr(const struct sockaddr *dest, const unsigned char **addr)
{
	const struct sockaddr_in6 *s6;

	if (dest->sa_family == AF_INET) {
		*addr = (const unsigned char *)&((const struct sockaddr_in *)
		    dest)->sin_addr;
		return AF_INET;
	}
	if (dest->sa_family != AF_INET6)
		return 0;
	s6 = (const struct sockaddr_in6 *)dest;
	*addr = s6->sin6_addr.s6_addr;
	if (!memcmp(*addr, v4mapped, 12)) {
		*addr += 12;
		return AF_INET;
	}
	return AF_INET6;
}

/* Whether addr is inside net/prefix (both of len bytes). */
static int
within(const unsigned char *addr, const unsigned char *net, int prefix)
{
	int whole = prefix / 8, rest = prefix % 8;

	if (memcmp(addr, net, (size_t)whole))
		return 0;
	return !rest || !((addr[whole] ^ net[whole]) &
	    (unsigned char)(0xff << (8 - rest)));
}

enum sbx_net_protect
sbx_net_protected(const struct sockaddr *dest, int is_host)
{
	static const unsigned char zero[16];
	const unsigned char *a;
	int family = dest_addr(dest, &a);

	if (family == AF_INET) {
		if (a[0] == 127)
			return SBX_NP_LOOPBACK;
		/* 0/8 "this network", 224/4 multicast, 240/4 reserved and
		 * the broadcast address. */
		if (a[0] == 0 || a[0] >= 224)
			return SBX_NP_LOCAL;
		if (a[0] == 169 && a[1] == 254)
			return SBX_NP_LINKLOCAL;
		if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) ||
		    (a[0] == 192 && a[1] == 168) ||
		    (a[0] == 100 && (a[1] & 0xc0) == 64))
			return SBX_NP_PRIVATE;
	} else if (family == AF_INET6) {
		if (!memcmp(a, zero, 15) && a[15] == 1)
			return SBX_NP_LOOPBACK;
		if (!memcmp(a, zero, 16) || a[0] == 0xff)
			return SBX_NP_LOCAL;
		if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
			return SBX_NP_LINKLOCAL;
		if ((a[0] & 0xfe) == 0xfc)
			return SBX_NP_PRIVATE;
	} else {
		return SBX_NP_LOCAL;
	}
	return is_host ? SBX_NP_HOST : SBX_NP_NONE;
}

/* Whether rule r matches a connection to family/addr naming host. */
static int
matches(const struct sbx_net_rule *r, int family, const unsigned char *addr,
    const char *host)
{
	size_t hn, dn;

	switch (r->kind) {
	case SBX_NR_ALL:
		return 1;
	case SBX_NR_CIDR:
		return r->family == family && within(addr, r->addr, r->prefix);
	case SBX_NR_DOMAIN:
		return host && !strcasecmp(host, r->domain);
	case SBX_NR_WILDCARD:
		if (!host)
			return 0;
		hn = strlen(host);
		dn = strlen(r->domain);
		return hn > dn + 1 && host[hn - dn - 1] == '.' &&
		    !strcasecmp(host + hn - dn, r->domain);
	}
	return 0;
}

int
sbx_net_allowed(const struct sbx_net_rules *rs, const struct sockaddr *dest,
    const char *host, int is_host)
{
	const unsigned char *addr;
	int family = dest_addr(dest, &addr);
	size_t i;

	if (!family)
		return 0;
	/* Only a rule naming addresses opens a protected one: a name is the
	 * client's word, and 0.0.0.0/0 is "all" in other words. */
	if (sbx_net_protected(dest, is_host) != SBX_NP_NONE) {
		for (i = 0; i < rs->nallow; i++)
			if (rs->allow[i].kind == SBX_NR_CIDR &&
			    rs->allow[i].prefix > 0 &&
			    matches(&rs->allow[i], family, addr, NULL))
				return 1;
		return 0;
	}
	for (i = 0; i < rs->nallow; i++)
		if (matches(&rs->allow[i], family, addr, host))
			return 1;
	for (i = 0; i < rs->ndeny; i++)
		if (matches(&rs->deny[i], family, addr, host))
			return 0;
	return 1;
}

int
sbx_net_port_parse(const char *text, unsigned *port, unsigned *host_port,
    struct sbx_err *err)
{
	const char *colon = strchr(text, ':');
	char hp[8];
	uint64_t a = 0, b;
	size_t n;

	if (colon) {
		n = (size_t)(colon - text);
		if (n == 0 || n >= sizeof hp)
			goto bad;
		memcpy(hp, text, n);
		hp[n] = '\0';
		if (sbx_parse_u64(hp, 1, 65535, &a) < 0)
			goto bad;
	}
	if (sbx_parse_u64(colon ? colon + 1 : text, 1, 65535, &b) < 0)
		goto bad;
	*port = (unsigned)b;
	*host_port = (unsigned)a;
	return 0;
bad:
	return sbx_err_set(err, SBX_EX_USAGE, "invalid port '%s' (want "
	    "[HOSTPORT:]PORT, each 1-65535)", text);
}

enum sbx_net_e2b
sbx_net_e2b_check(const json_t *allow, const json_t *deny, int all_denied,
    const char **bad, struct sbx_err *err)
{
	const json_t *lists[] = {allow, deny};
	const char *domain = NULL;
	struct sbx_net_rule r;
	const json_t *v;
	size_t i, k;

	*bad = NULL;
	for (k = 0; k < 2; k++)
		json_array_foreach(lists[k], i, v) {
			*bad = json_string_value(v);
			if (!*bad) {
				sbx_err_set(err, SBX_EX_USAGE, "network rules "
				    "must be strings");
				return SBX_NE_RULE;
			}
			if (sbx_net_rule_parse(*bad, &r, err) < 0)
				return SBX_NE_RULE;
			if (r.kind == SBX_NR_DOMAIN || r.kind ==
			    SBX_NR_WILDCARD) {
				if (k == 1)
					return SBX_NE_DENY_DOMAIN;
				if (!domain)
					domain = *bad;
			}
			if (k == 1 && (r.kind == SBX_NR_ALL || (r.kind ==
			    SBX_NR_CIDR && r.family == AF_INET &&
			    r.prefix == 0)))
				all_denied = 1;
		}
	*bad = domain;
	return domain && !all_denied ? SBX_NE_ALLOW_DOMAIN : SBX_NE_OK;
}
