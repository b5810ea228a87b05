/* sniff.c - the host name a connection's first bytes give: a TLS
 * ClientHello's SNI or an HTTP/1.x request's Host header (net.h) */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "net.h"

/* What we wait for before giving up: a ClientHello (2^14, the most one
 * record holds; post-quantum key shares make them 2 KiB now) or an HTTP
 * request's header block. */
#define SNIFF_MAX 16384

/* name (n bytes) lower case, without its trailing dot, into host. */
static int
put_name(const unsigned char *name, size_t n, char *host, size_t hostsz)
{
	size_t i;

	if (n && name[n - 1] == '.')
		n--;
	if (!n || n >= hostsz)
		return -1;
	for (i = 0; i < n; i++) {
		if (!isalnum(name[i]) && name[i] != '.' && name[i] != '-' &&
		    name[i] != ':')
			return -1;
		host[i] = (char)tolower(name[i]);
	}
	host[n] = '\0';
	return 1;
}

/* A bounded reader over a ClientHello: any read past its end fails. */
struct rd {
	const unsigned char *p;
	size_t n;
};

static int
rd_num(struct rd *r, size_t len, size_t *v)
{
	size_t i;

	if (r->n < len)
		return -1;
	for (*v = 0, i = 0; i < len; i++)
		*v = *v << 8 | r->p[i];
	r->p += len;
	r->n -= len;
	return 0;
}

/* A length of len bytes, then that many bytes into sub. */
static int
rd_vec(struct rd *r, size_t len, struct rd *sub)
{
	size_t n;

	if (rd_num(r, len, &n) < 0 || r->n < n)
		return -1;
	sub->p = r->p;
	sub->n = n;
	r->p += n;
	r->n -= n;
	return 0;
}

/* The SNI of a whole ClientHello body (after the handshake header). */
static int
hello_sni(struct rd b, char *host, size_t hostsz)
{
	struct rd skip, exts, ext, list, name;
	size_t type, ntype;

	if (b.n < 34)
		return -1;
	b.p += 34; /* legacy_version, random */
	b.n -= 34;
	if (rd_vec(&b, 1, &skip) < 0 || skip.n > 32 || /* session id */
	    rd_vec(&b, 2, &skip) < 0 ||                /* cipher suites */
	    rd_vec(&b, 1, &skip) < 0 ||                /* compression */
	    rd_vec(&b, 2, &exts) < 0)
		return -1;
	while (exts.n) {
		if (rd_num(&exts, 2, &type) < 0 || rd_vec(&exts, 2, &ext) < 0)
			return -1;
		if (type != 0)
			continue;
		if (rd_vec(&ext, 2, &list) < 0)
			return -1;
		while (list.n) {
			if (rd_num(&list, 1, &ntype) < 0 ||
			    rd_vec(&list, 2, &name) < 0)
				return -1;
			if (ntype == 0)
				return put_name(name.p, name.n, host, hostsz);
		}
		return -1;
	}
	return -1;
}

/* A ClientHello may span several handshake records (rare, but legal):
 * their payloads are joined until the message is whole. */
static int
sniff_tls(const unsigned char *buf, size_t len, char *host, size_t hostsz)
{
	unsigned char hs[4 + SNIFF_MAX];
	size_t hn = 0, need = 4, rl, take;

	while (hn < need) {
		if (len < 5) {
			/* What there is of a record header must fit one. */
			if ((len > 0 && buf[0] != 22) ||
			    (len > 1 && buf[1] != 3))
				return -1;
			return 0;
		}
		rl = (size_t)buf[3] << 8 | buf[4];
		if (buf[0] != 22 || buf[1] != 3 || rl == 0 || rl > SNIFF_MAX)
			return -1;
		/* Bytes past a whole ClientHello are never needed. */
		take = rl < len - 5 ? rl : len - 5;
		if (take > sizeof hs - hn)
			take = sizeof hs - hn;
		memcpy(hs + hn, buf + 5, take);
		hn += take;
		if (hn && hs[0] != 1) /* client_hello */
			return -1;
		if (hn >= 4) {
			need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 |
			    hs[3]);
			if (need > sizeof hs)
				return -1;
		}
		if (take < rl)
			break;
		buf += 5 + rl;
		len -= 5 + rl;
	}
	if (hn < need)
		return 0;
	return hello_sni((struct rd){hs + 4, need - 4}, host, hostsz);
}

/* An HTTP token character (RFC 9110 tchar). */
static int
tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The host of a Host header's value (OWS already trimmed): "name",
 * "name:port", "[v6]" or "[v6]:port". */
static int
host_of(const unsigned char *v, size_t n, char *host, size_t hostsz)
{
	const unsigned char *end = v + n, *port;

	if (n && v[0] == '[') {
		port = memchr(v, ']', n);
		if (!port || !memchr(v, ':', (size_t)(port - v)))
			return -1; /* [1.2.3.4] is no v6 literal */
		n = (size_t)(port - v - 1);
		v++;
		port++;
	} else {
		port = memchr(v, ':', n);
		if (!port)
			port = end;
		n = (size_t)(port - v);
	}
	/* What follows is ":" and up to five digits, or nothing. */
	if (port < end) {
		if (*port++ != ':' || end - port > 5)
			return -1;
		for (; port < end; port++)
			if (!isdigit(*port))
				return -1;
	}
	return put_name(v, n, host, hostsz);
}

/* Request line "METHOD SP target SP HTTP/1.x", then header fields up to
 * an empty line, all ending in CRLF. Strict on purpose: what we read as
 * the Host must be what the server reads, so folded lines, a field
 * without a name or two Host fields make it -1. */
static int
sniff_http(const unsigned char *buf, size_t len, char *host, size_t hostsz)
{
	const unsigned char *end, *line, *eol, *sp, *colon, *v, *ve;
	size_t scan = len < SNIFF_MAX ? len : SNIFF_MAX, i;
	int found = -1;

	/* Fail early on what is no request (SSH, binary) rather than wait. */
	for (i = 0; i < scan && buf[i] != ' '; i++)
		if (!isupper(buf[i]))
			return -1;
	end = memmem(buf, scan, "\r\n\r\n", 4);
	if (!end)
		return len < SNIFF_MAX ? 0 : -1;
	end += 2; /* the last header line's CRLF stays */
	/* A lone CR or LF may end a line for a lenient server but not for
	 * us: refuse it rather than read the fields differently. */
	for (v = buf; v + 1 < end; v++)
		if (!*v || (*v == '\r') != (v[1] == '\n'))
			return -1;

	eol = memmem(buf, (size_t)(end - buf), "\r\n", 2);
	sp = memchr(buf, ' ', (size_t)(eol - buf));
	if (!sp || sp == buf)
		return -1;
	line = sp + 1;
	sp = memchr(line, ' ', (size_t)(eol - line));
	if (!sp || sp == line || (size_t)(eol - sp) != 9 ||
	    memcmp(sp + 1, "HTTP/1.", 7) || !isdigit(sp[8]))
		return -1;
	for (; line < sp; line++)
		if (*line <= ' ' || *line == 0x7f)
			return -1;

	for (line = eol + 2; line < end; line = eol + 2) {
		eol = memmem(line, (size_t)(end - line), "\r\n", 2);
		colon = memchr(line, ':', (size_t)(eol - line));
		if (!colon || colon == line)
			return -1;
		for (v = line; v < colon; v++)
			if (!tchar(*v))
				return -1;
		if (colon - line != 4 || strncasecmp((const char *)line,
		    "host", 4))
			continue;
		if (found != -1)
			return -1;
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t');
		    ve--)
			;
		found = host_of(v, (size_t)(ve - v), host, hostsz);
		if (found < 0)
			return -1;
	}
	return found;
}

int
sbx_net_sniff(const unsigned char *buf, size_t len, char *host,
    size_t hostsz)
{
	if (!len)
		return 0;
	if (buf[0] == 22)
		return sniff_tls(buf, len, host, hostsz);
	if (isupper(buf[0]))
		return sniff_http(buf, len, host, hostsz);
	return -1;
}
