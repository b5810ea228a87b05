/* sniff.c - TAP unit tests of the host a connection's first bytes name:
 * TLS SNI and HTTP Host (lib/net/sniff.c) */
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "sbx.h"
#include "tap.h"

/* What `openssl s_client -connect 127.0.0.1:PORT -servername
 * a.example.test` (OpenSSL 3.0) sent first, caught on a loopback socket. */
static const unsigned char hello[] = {
	0x16, 0x03, 0x01, 0x01, 0x3b, 0x01, 0x00, 0x01, 0x37, 0x03,
	0x03, 0x35, 0x26, 0xcc, 0xc6, 0x04, 0x9d, 0x04, 0x46, 0x87,
	0xc7, 0xb9, 0x47, 0x7a, 0x6d, 0x5e, 0xe3, 0xf3, 0xa4, 0xb9,
	0x16, 0x49, 0xd8, 0x4f, 0xc2, 0x09, 0x28, 0xf2, 0x08, 0x5c,
	0x6e, 0xc0, 0x65, 0x20, 0x1a, 0x72, 0xeb, 0x75, 0x8b, 0x56,
	0xc0, 0x59, 0x1c, 0x6d, 0x3a, 0x9f, 0x3e, 0x25, 0xca, 0xbb,
	0x7e, 0xff, 0x81, 0xde, 0x43, 0x0b, 0x2a, 0x3a, 0x8a, 0x6d,
	0x5b, 0x49, 0xd6, 0x55, 0xec, 0x30, 0x00, 0x3e, 0x13, 0x02,
	0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f,
	0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b, 0xc0, 0x2f,
	0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23,
	0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c,
	0x00, 0x3d, 0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff,
	0x01, 0x00, 0x00, 0xb0, 0x00, 0x00, 0x00, 0x13, 0x00, 0x11,
	0x00, 0x00, 0x0e, 0x61, 0x2e, 0x65, 0x78, 0x61, 0x6d, 0x70,
	0x6c, 0x65, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x00, 0x0b, 0x00,
	0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00,
	0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00,
	0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01,
	0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00,
	0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04,
	0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08,
	0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08,
	0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03,
	0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00,
	0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02,
	0x03, 0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33,
	0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0xe9, 0x38,
	0x05, 0x47, 0xad, 0x2b, 0x1f, 0x8e, 0x15, 0xff, 0x01, 0x5d,
	0xd7, 0xc8, 0x01, 0xe8, 0x74, 0xb3, 0x6a, 0xec, 0x72, 0x5b,
	0xf8, 0xdd, 0x15, 0x20, 0xd5, 0xac, 0x81, 0xb6, 0x43, 0x70,
};

/* Offsets in hello, found by walking it as sniff.c does. */
struct layout {
	size_t sid, suites, comp, exts, sni; /* each at its length field */
};

static struct layout
layout_of(const unsigned char *h)
{
	struct layout l;
	size_t p, end;

	l.sid = 5 + 4 + 2 + 32;
	l.suites = l.sid + 1 + h[l.sid];
	l.comp = l.suites + 2 + (h[l.suites] << 8 | h[l.suites + 1]);
	l.exts = l.comp + 1 + h[l.comp];
	end = l.exts + 2 + (h[l.exts] << 8 | h[l.exts + 1]);
	for (p = l.exts + 2; p < end; p += 4 + (h[p + 2] << 8 | h[p + 3]))
		if (h[p] == 0 && h[p + 1] == 0)
			break;
	l.sni = p; /* the server_name extension's type */
	return l;
}

static int
sniff(const unsigned char *b, size_t n, char *host, size_t hostsz)
{
	int r = sbx_net_sniff(b, n, host, hostsz);

	/* Whatever comes in, the answer is one of three and a name found
	 * fits. */
	if (r < -1 || r > 1 || (r == 1 && strlen(host) >= hostsz)) {
		printf("# sniff gave %d\n", r);
		exit(3);
	}
	return r;
}

/* b (n bytes) names want; want NULL: -1. */
static int
names(const void *b, size_t n, const char *want)
{
	char host[256];
	int r = sniff(b, n, host, sizeof host);

	if (!want)
		return r == -1;
	if (r != 1)
		printf("# %d, not 1\n", r);
	else if (strcmp(host, want))
		printf("# '%s', not '%s'\n", host, want);
	return r == 1 && !strcmp(host, want);
}

/* Every proper prefix of b needs more bytes; the whole names want. */
static int
prefixes_wait(const void *b, size_t n, const char *want)
{
	char host[256];
	size_t i;

	for (i = 0; i < n; i++)
		if (sniff(b, i, host, sizeof host) != 0) {
			printf("# prefix of %zu bytes is not 0\n", i);
			return 0;
		}
	return names(b, n, want);
}

static void
put16(unsigned char *p, size_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

/* A ClientHello record with one server_name entry of type ntype and name
 * (none when name is NULL), after a supported_groups extension. */
static size_t
build_hello(unsigned char *b, const char *name, int ntype)
{
	static const unsigned char groups[] = {0x00, 0x0a, 0x00, 0x04, 0x00,
	    0x02, 0x00, 0x1d};
	size_t n = 9, nl = name ? strlen(name) : 0, ext;

	memcpy(b, "\x16\x03\x01\0\0\x01\0\0\0\x03\x03", 11);
	n = 11;
	memset(b + n, 0xaa, 32);
	n += 32;
	b[n++] = 0;                             /* session id */
	memcpy(b + n, "\x00\x02\x13\x01", 4);   /* cipher suites */
	n += 4;
	memcpy(b + n, "\x01\x00", 2);           /* compression */
	n += 2;
	ext = n;
	n += 2;
	memcpy(b + n, groups, sizeof groups);
	n += sizeof groups;
	if (name) {
		put16(b + n, 0);
		put16(b + n + 2, nl + 5);
		put16(b + n + 4, nl + 3);
		b[n + 6] = (unsigned char)ntype;
		put16(b + n + 7, nl);
		memcpy(b + n + 9, name, nl);
		n += 9 + nl;
	}
	put16(b + ext, n - ext - 2);
	put16(b + 3, n - 5);
	b[6] = (unsigned char)((n - 9) >> 16);
	put16(b + 7, n - 9);
	return n;
}

static void
t_real_hello(void)
{
	char host[64];

	CHECK(names(hello, sizeof hello, "a.example.test"));
	CHECK(sniff(hello, sizeof hello, host, 15) == 1);
	CHECK(sniff(hello, sizeof hello, host, 14) == -1);
	/* Early data or more records after it change nothing. */
	{
		unsigned char b[sizeof hello + 10];

		memcpy(b, hello, sizeof hello);
		memcpy(b + sizeof hello, "\x17\x03\x03\x00\x05hello", 10);
		CHECK(names(b, sizeof b, "a.example.test"));
	}
}

static void
t_real_hello_truncated(void)
{
	CHECK(prefixes_wait(hello, sizeof hello, "a.example.test"));
}

/* The same handshake message cut into two records, then three. */
static void
t_fragmented(void)
{
	unsigned char b[sizeof hello + 10];
	size_t hs = sizeof hello - 5, cut = 100, cut2 = 200;

	memcpy(b, "\x16\x03\x01", 3);
	put16(b + 3, cut);
	memcpy(b + 5, hello + 5, cut);
	memcpy(b + 5 + cut, "\x16\x03\x01", 3);
	put16(b + 8 + cut, hs - cut);
	memcpy(b + 10 + cut, hello + 5 + cut, hs - cut);
	CHECK(prefixes_wait(b, sizeof hello + 5, "a.example.test"));

	/* A record of only the first two bytes of the handshake header. */
	put16(b + 3, 2);
	memcpy(b + 5, hello + 5, 2);
	memcpy(b + 7, "\x16\x03\x01", 3);
	put16(b + 10, cut2);
	memcpy(b + 12, hello + 7, cut2);
	memcpy(b + 12 + cut2, "\x16\x03\x01", 3);
	put16(b + 15 + cut2, hs - 2 - cut2);
	memcpy(b + 17 + cut2, hello + 7 + cut2, hs - 2 - cut2);
	CHECK(prefixes_wait(b, sizeof hello + 10, "a.example.test"));

	/* Something else before the message is whole. */
	memcpy(b + 12 + cut2, "\x17\x03\x01", 3);
	CHECK(names(b, sizeof hello + 10, NULL));
}

static void
t_built_hellos(void)
{
	unsigned char b[1024];
	char longname[300];
	size_t n;

	n = build_hello(b, "a.example.test", 0);
	CHECK(prefixes_wait(b, n, "a.example.test"));
	n = build_hello(b, "Api.EXAMPLE.test.", 0);
	CHECK(names(b, n, "api.example.test"));
	n = build_hello(b, "localhost", 0);
	CHECK(names(b, n, "localhost"));
	n = build_hello(b, "a_b.test", 0);
	CHECK(names(b, n, NULL));
	n = build_hello(b, "a b", 0);
	CHECK(names(b, n, NULL));
	n = build_hello(b, "a.test\n", 0);
	CHECK(names(b, n, NULL));
	n = build_hello(b, "", 0);
	CHECK(names(b, n, NULL));
	n = build_hello(b, ".", 0);
	CHECK(names(b, n, NULL));
	n = build_hello(b, "a.test", 1); /* not host_name */
	CHECK(names(b, n, NULL));
	n = build_hello(b, NULL, 0);
	CHECK(names(b, n, NULL));
	/* Longer than host[256] holds, but for its trailing dot. */
	memset(longname, 'a', 256);
	longname[256] = '\0';
	n = build_hello(b, longname, 0);
	CHECK(names(b, n, NULL));
	longname[255] = '.';
	n = build_hello(b, longname, 0);
	longname[255] = '\0';
	CHECK(names(b, n, longname));
	/* No extensions at all. */
	n = build_hello(b, NULL, 0);
	n -= 2 + 8;
	put16(b + 3, n - 5);
	put16(b + 7, n - 9);
	CHECK(names(b, n, NULL));
}

/* A copy of hello with byte i set to v. */
static int
hello_with(size_t i, unsigned v, const char *want)
{
	unsigned char b[sizeof hello];

	memcpy(b, hello, sizeof b);
	b[i] = (unsigned char)v;
	return names(b, sizeof b, want);
}

static void
t_corrupt_lengths(void)
{
	struct layout l = layout_of(hello);
	char host[256];
	unsigned char b[sizeof hello];

	CHECK(l.sni < sizeof hello - 9 && hello[l.sni + 1] == 0);
	CHECK(hello_with(0, 0x17, NULL));
	CHECK(hello_with(1, 0x02, NULL));
	memcpy(b, hello, sizeof b);
	b[3] = b[4] = 0; /* an empty record */
	CHECK(names(b, sizeof b, NULL));
	CHECK(hello_with(3, 0x40, NULL));  /* record over 16 KiB */
	CHECK(hello_with(5, 0x02, NULL));  /* not a ClientHello */
	CHECK(hello_with(6, 0x01, NULL));  /* a message over 16 KiB */
	CHECK(hello_with(7, 0x00, NULL));  /* shorter than its fields */
	CHECK(hello_with(l.sid, 33, NULL));
	CHECK(hello_with(l.sid, 0xff, NULL));
	CHECK(hello_with(l.suites, 0xff, NULL));
	CHECK(hello_with(l.comp, 0xff, NULL));
	CHECK(hello_with(l.exts, 0xff, NULL));
	CHECK(hello_with(l.exts + 1, hello[l.exts + 1] + 1, NULL));
	CHECK(hello_with(l.sni + 2, 0xff, NULL));       /* extension */
	CHECK(hello_with(l.sni + 5, hello[l.sni + 5] + 1, NULL)); /* list */
	CHECK(hello_with(l.sni + 8, hello[l.sni + 8] + 1, NULL)); /* name */
	CHECK(hello_with(l.sni + 7, 0xff, NULL));
	/* A message longer than its record waits for the next record. */
	memcpy(b, hello, sizeof b);
	b[8]++;
	CHECK(sniff(b, sizeof b, host, sizeof host) == 0);
}

/* Every byte at every value, at every length: never a crash (the SAN
 * build checks every read), always -1, 0 or 1. */
static void
t_every_byte(void)
{
	unsigned char b[sizeof hello];
	char host[256];
	size_t i, n;
	unsigned v;

	for (i = 0; i < sizeof b; i++)
		for (v = 0; v < 256; v += (i < 9 || i > 300) ? 1 : 51) {
			memcpy(b, hello, sizeof b);
			b[i] = (unsigned char)v;
			for (n = 0; n <= sizeof b; n += n < 16 ? 1 : 37)
				sniff(b, n, host, sizeof host);
			sniff(b, sizeof b, host, sizeof host);
		}
	CHECK(1);
}

#define NAMES(s, want) names(s, sizeof(s) - 1, want)

static void
t_http_host(void)
{
	CHECK(NAMES("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "a.test"));
	CHECK(NAMES("GET / HTTP/1.1\r\nhOsT:A.Test\r\n\r\n", "a.test"));
	CHECK(NAMES("GET / HTTP/1.1\r\nHOST: \t a.test \t\r\n\r\n", "a.test"));
	CHECK(NAMES("GET / HTTP/1.1\r\nHost: a.test:8080\r\n\r\n", "a.test"));
	CHECK(NAMES("GET / HTTP/1.1\r\nHost: a.test.:80\r\n\r\n", "a.test"));
	CHECK(NAMES("GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", "a.test"));
	CHECK(NAMES("GET / HTTP/1.1\r\nHost: 198.18.0.1:80\r\n\r\n",
	    "198.18.0.1"));
	CHECK(NAMES("GET / HTTP/1.1\r\nHost: [2001:DB8::1]:443\r\n\r\n",
	    "2001:db8::1"));
	CHECK(NAMES("GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", "::1"));
	CHECK(NAMES("GET /x?y=1 HTTP/1.0\r\nUser-Agent: t\r\nHost: b.test\r\n"
	    "Accept: */*\r\n\r\n", "b.test"));
	CHECK(NAMES("POST /p HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3"
	    "\r\n\r\nabc", "a.test"));
	CHECK(NAMES("GET http://other.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
	    "a.test"));
	CHECK(NAMES("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
	    "a.test"));
	CHECK(NAMES("OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", "a.test"));
}

static void
t_http_truncated(void)
{
	static const char req[] = "GET /index.html HTTP/1.1\r\n"
	    "User-Agent: curl/8\r\nHost: a.test\r\nAccept: */*\r\n\r\n";

	CHECK(prefixes_wait(req, sizeof req - 1, "a.test"));
}

static void
t_http_bad(void)
{
	static const char *bad[] = {
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.0\r\nUser-Agent: t\r\n\r\n",
		"GET / HTTP/1.1\r\nHost:\r\n\r\n",
		"GET / HTTP/1.1\r\nHost:   \r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nhost: b.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a_b.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test:80x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test:123456\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a:b:c\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [1.2.3.4]\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test/x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a .test\r\n\r\n",
		"GET / HTTP/1.1\r\nX: 1\r\n Host: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nX: 1\r\n\tfolded\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nNo colon\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\n: v\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\nHost: b.test\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nX: a\rHost: b.test\r\n\r\n",
		"GET / HTTP/1.1\nHost: a.test\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: a.test\r\n\r\n",
		"GET / HTTP/1.1 \r\nHost: a.test\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET /a b HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"get / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"G3T / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		" GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"SSH-2.0-OpenSSH_9.2\r\n",
		"\x01\x02\x03",
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (!names(bad[i], strlen(bad[i]), NULL)) {
			printf("# not refused: %zu\n", i);
			CHECK(0);
		}
	/* A NUL in the header block. */
	CHECK(names("GET / HTTP/1.1\r\nX: \0\r\nHost: a.test\r\n\r\n", 38,
	    NULL));
	/* Not a request at all: known from the first bytes. */
	CHECK(names("SSH-", 4, NULL));
	CHECK(names("get", 3, NULL));
	CHECK(names("GET", 3, NULL) == 0);
}

static void
t_http_host_too_long(void)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: abc.test\r\n\r\n";
	char host[16];

	CHECK(sniff((const unsigned char *)req, sizeof req - 1, host, 9) ==
	    1);
	CHECK(!strcmp(host, "abc.test"));
	CHECK(sniff((const unsigned char *)req, sizeof req - 1, host, 8) ==
	    -1);
}

/* The header block is waited for up to 16 KiB, and no further. */
static void
t_http_huge(void)
{
	size_t n = 20000, head;
	unsigned char *b = malloc(n);
	char host[256];

	head = (size_t)snprintf((char *)b, n, "GET / HTTP/1.1\r\nHost: a.test"
	    "\r\nX-Pad: ");
	memset(b + head, 'a', n - head);
	CHECK(sniff(b, 16383, host, sizeof host) == 0);
	CHECK(sniff(b, 16384, host, sizeof host) == -1);
	CHECK(sniff(b, n, host, sizeof host) == -1);
	/* Complete, but its end past 16 KiB. */
	memcpy(b + 16400, "\r\n\r\n", 4);
	CHECK(sniff(b, 16404, host, sizeof host) == -1);
	/* Complete in exactly 16 KiB. */
	memcpy(b + 16380, "\r\n\r\n", 4);
	CHECK(sniff(b, 16384, host, sizeof host) == 1);
	CHECK(!strcmp(host, "a.test"));
	free(b);
}

static void
t_neither(void)
{
	char host[16];

	CHECK(sniff((const unsigned char *)"", 0, host, sizeof host) == 0);
	CHECK(names("\x00\x00\x00", 3, NULL));
	CHECK(names("\x16", 1, NULL) == 0);
	CHECK(names("\x16\x03", 2, NULL) == 0);
	CHECK(names("\x16\x02", 2, NULL));
	CHECK(names("\x16\x03\x01\x00\x00", 5, NULL));
}

static const struct tap_test tests[] = {
	{"a real ClientHello gives its SNI", t_real_hello},
	{"a ClientHello cut anywhere needs more bytes", t_real_hello_truncated},
	{"a ClientHello over several records", t_fragmented},
	{"SNI names: case, trailing dot, bad bytes, none, too long",
	    t_built_hellos},
	{"corrupted TLS lengths give -1", t_corrupt_lengths},
	{"any byte changed, any length: never a crash", t_every_byte},
	{"HTTP Host in its forms", t_http_host},
	{"an HTTP request cut anywhere needs more bytes", t_http_truncated},
	{"HTTP without a usable Host, or not HTTP, gives -1", t_http_bad},
	{"a Host longer than the buffer gives -1", t_http_host_too_long},
	{"an HTTP header block over 16 KiB gives -1", t_http_huge},
	{"neither TLS nor HTTP", t_neither},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
