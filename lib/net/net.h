/* net.h - egress rules of a sandbox with network allow: what a rule is,
 * how a connection is judged, and how its first bytes name its host.
 * Pure functions: sbx-create checks rules with them, sbx-netd applies them,
 * sbxd maps E2B's network field onto them. */
#ifndef SBX_NET_H
#define SBX_NET_H

#include <stddef.h>
#include <sys/socket.h>

#include <jansson.h>

#include "../sbx.h"

/* One --allow-out or --deny-out: an IP, a CIDR, a domain, "*.domain", or
 * "all" (0.0.0.0/0 and ::/0). */
enum sbx_net_kind {
	SBX_NR_CIDR,     /* addr/prefix (an IP is /32 or /128) */
	SBX_NR_DOMAIN,   /* exactly this name */
	SBX_NR_WILDCARD, /* any name below domain ("*.example.org") */
	SBX_NR_ALL,      /* everything */
};

struct sbx_net_rule {
	enum sbx_net_kind kind;
	int family;               /* AF_INET or AF_INET6 (CIDR) */
	unsigned char addr[16];   /* network address, host bits zero */
	int prefix;
	char domain[254];         /* lower case, no trailing dot */
};

struct sbx_net_rules {
	struct sbx_net_rule *allow, *deny;
	size_t nallow, ndeny;
};

/* Parse one rule; SBX_EX_USAGE with "invalid rule 'TEXT': WHY" on error.
 * "1.2.3.4", "10.0.0.0/8", "2001:db8::/32", "example.com", "*.example.org",
 * "all". Domains: letters, digits, '-', '.', labels 1-63, total <= 253. */
int sbx_net_rule_parse(const char *text, struct sbx_net_rule *r,
    struct sbx_err *err);
/* {"allow_out": [TEXT...], "deny_out": [TEXT...]} (either may be absent)
 * into rs; on error rs is empty and err says which rule. */
int sbx_net_rules_from_json(const json_t *net, struct sbx_net_rules *rs,
    struct sbx_err *err);
void sbx_net_rules_free(struct sbx_net_rules *rs);
/* Whether any rule names a domain: then connections are sniffed. */
int sbx_net_rules_want_host(const struct sbx_net_rules *rs);

/* E2B's constraints on a network's allowOut and denyOut (arrays of rule
 * strings, or NULL), as its API checks them (the e2b backend before a
 * call, sbxd on a request): every entry a rule; no domain in deny; a
 * domain in allow only when deny holds "all" or 0.0.0.0/0, or
 * all_denied says that is implied. SBX_NE_OK, or what is wrong with
 * *bad the entry (err: a rule's own message). */
enum sbx_net_e2b {
	SBX_NE_OK,
	SBX_NE_RULE,         /* not a string, or not a rule */
	SBX_NE_DENY_DOMAIN,  /* a domain in deny */
	SBX_NE_ALLOW_DOMAIN, /* a domain in allow without deny-all */
};
enum sbx_net_e2b sbx_net_e2b_check(const json_t *allow, const json_t *deny,
    int all_denied, const char **bad, struct sbx_err *err);

/* A published port: "PORT" or "HOSTPORT:PORT", each 1-65535 (host_port
 * 0 when omitted: a free one); SBX_EX_USAGE with "invalid port 'TEXT'
 * (want [HOSTPORT:]PORT, each 1-65535)" on error. */
int sbx_net_port_parse(const char *text, unsigned *port,
    unsigned *host_port, struct sbx_err *err);

/* Why an address is protected (never reachable unless an allow rule that
 * is an IP or CIDR other than "all" contains it; domain rules never open
 * it): SBX_NP_NONE for an ordinary public address. */
enum sbx_net_protect {
	SBX_NP_NONE,
	SBX_NP_LOOPBACK,  /* 127/8, ::1 */
	SBX_NP_LOCAL,     /* unspecified, multicast, broadcast, reserved */
	SBX_NP_LINKLOCAL, /* 169.254/16, fe80::/10 (cloud metadata) */
	SBX_NP_PRIVATE,   /* 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7 */
	SBX_NP_HOST,      /* one of the host's own addresses (is_host) */
};
/* dest: sockaddr_in or sockaddr_in6 (a v4-mapped v6 is taken as v4). */
enum sbx_net_protect sbx_net_protected(const struct sockaddr *dest,
    int is_host);

/* The verdict for a connection to dest, whose host (TLS SNI or HTTP Host,
 * lower case, no port) is host or NULL when unknown:
 * 1. protected (above): allow only if an allow CIDR rule (not "all", nor
 *    a /0, which is "all" in other words) contains dest; else deny.
 * 2. an allow rule matches (CIDR contains dest, or a domain rule matches
 *    host): allow. Allow wins over deny.
 * 3. a deny rule matches (CIDR, domain on host, or "all"): deny.
 * 4. allow. */
int sbx_net_allowed(const struct sbx_net_rules *rs,
    const struct sockaddr *dest, const char *host, int is_host);

/* The host a connection's first bytes name: a TLS ClientHello's SNI or an
 * HTTP/1.x request's Host header (lower case, port and trailing dot
 * removed), copied into host. 1: found; 0: need more bytes; -1: neither
 * (not TLS or HTTP, no name, malformed, or longer than hostsz-1). */
int sbx_net_sniff(const unsigned char *buf, size_t len, char *host,
    size_t hostsz);

/* --inject-header HOST:NAME=SOURCE (lib/net/inject.c): HOST a domain or
 * "*.domain", NAME an HTTP token, SOURCE env:VAR (sbx-create's
 * environment), file:PATH (a regular 0600 file of the user's, one trailing
 * newline dropped) or secret:NAME (the template "${e2b.secrets.NAME}").
 * Appends {"host","name","value"} or {"host","name","template"} to list;
 * SBX_EX_USAGE with a message that never holds the value. */
int sbx_net_inject_parse(const char *text, json_t *list,
    struct sbx_err *err);
/* An HTTP header name (a token); a value without CR, LF or NUL. */
int sbx_net_header_name_ok(const char *s, size_t n);
int sbx_net_header_value_ok(const char *s, size_t n);


/* An egress proxy (--egress-proxy, E2B's egressProxy):
 * "socks5://[user@]host:port", host a name, an IPv4 or "[IPv6]". A
 * password in the URL is refused: it comes from elsewhere (never argv). */
struct sbx_net_proxy {
	char user[256];           /* "" : no authentication */
	char host[256];           /* without the brackets */
	char port[6];
};
int sbx_net_proxy_parse(const char *url, struct sbx_net_proxy *p,
    struct sbx_err *err);
#endif
