/* socks.c - an egress proxy's URL, "socks5://[user@]host:port": checked
 * by sbx-create, read by sbx-netd and by the e2b backend */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

static int
bad(struct sbx_err *err, const char *url, const char *why)
{
	return sbx_err_set(err, SBX_EX_USAGE, "invalid egress proxy '%s': %s",
	    url, why);
}

int
sbx_net_proxy_parse(const char *url, struct sbx_net_proxy *p,
    struct sbx_err *err)
{
	const char *s = url, *at, *hp, *colon, *end;
	unsigned char a[16];
	uint64_t port;
	size_t n;

	memset(p, 0, sizeof *p);
	if (strncmp(s, "socks5://", 9))
		return bad(err, url, "want socks5://[user@]host:port");
	s += 9;
	if ((end = strpbrk(s, "/?#")) && end[strspn(end, "/")])
		return bad(err, url, "no path after host:port");
	n = end ? (size_t)(end - s) : strlen(s);
	if ((at = memchr(s, '@', n))) {
		if (memchr(s, ':', (size_t)(at - s)))
			/* A password here would be in argv and the state. */
			return bad(err, url, "no password in the URL (it comes "
			    "from SBX_EGRESS_PROXY_PASSWORD or the credentials "
			    "file egress-proxy)");
		if (at == s || at - s > 255)
			return bad(err, url, "a user is 1 to 255 bytes");
		memcpy(p->user, s, (size_t)(at - s));
		hp = at + 1;
	} else {
		hp = s;
	}
	n -= (size_t)(hp - s);
	if (n && *hp == '[') {
		if (!(end = memchr(hp, ']', n)) || (size_t)(end - hp) + 1 >= n ||
		    end[1] != ':')
			return bad(err, url, "want [IPv6]:port");
		colon = end + 1;
		if ((size_t)(end - hp - 1) >= sizeof p->host)
			return bad(err, url, "host too long");
		memcpy(p->host, hp + 1, (size_t)(end - hp - 1));
		if (inet_pton(AF_INET6, p->host, a) != 1)
			return bad(err, url, "invalid IPv6 address");
	} else {
		if (!(colon = memchr(hp, ':', n)) || colon == hp)
			return bad(err, url, "want host:port");
		if ((size_t)(colon - hp) >= sizeof p->host)
			return bad(err, url, "host too long");
		memcpy(p->host, hp, (size_t)(colon - hp));
		if (strspn(p->host, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
		    strlen(p->host))
			return bad(err, url, "invalid host");
	}
	n -= (size_t)(colon + 1 - hp);
	if (n == 0 || n > 5)
		return bad(err, url, "want a port 1 to 65535");
	memcpy(p->port, colon + 1, n);
	if (sbx_parse_u64(p->port, 1, 65535, &port) < 0)
		return bad(err, url, "want a port 1 to 65535");
	return 0;
}
