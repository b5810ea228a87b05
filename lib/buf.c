/* buf.c - allocators that die, the growable buffer, and the small
 * helpers sbx-init shares */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"

static void *
oom(void *p)
{
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", sbx_prog_get());
		exit(SBX_EX_FAIL);
	}
	return p;
}

void *
sbx_xmalloc(size_t n)
{
	return oom(malloc(n ? n : 1));
}

void *
sbx_xcalloc(size_t n, size_t m)
{
	return oom(calloc(n ? n : 1, m ? m : 1));
}

void *
sbx_xrealloc(void *p, size_t n)
{
	return oom(realloc(p, n ? n : 1));
}

char *
sbx_xstrdup(const char *s)
{
	return oom(strdup(s));
}

char *
sbx_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = sbx_xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}

char *
sbx_xvasprintf(const char *fmt, va_list ap)
{
	char *s;

	if (vasprintf(&s, fmt, ap) < 0)
		oom(NULL);
	return s;
}

void
sbx_buf_add(struct sbx_buf *b, const void *p, size_t n)
{
	if (b->limit && b->len + n > b->limit) {
		b->truncated = 1;
		n = b->limit - b->len;
	}
	if (!n)
		return;
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->data = sbx_xrealloc(b->data, b->cap);
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
sbx_buf_release(struct sbx_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

int
sbx_read_all(int fd, void *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

int
sbx_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	ssize_t w;

	while (n) {
		if ((w = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

uint64_t
sbx_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	if (!p)
		return 0xcbf29ce484222325ULL;
	while (n--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

long long
sbx_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

void
sbx_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void
sbx_hex_put(struct sbx_buf *b, const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *q = p;
	char pair[2];
	size_t i;

	for (i = 0; i < n; i++) {
		pair[0] = digits[q[i] >> 4];
		pair[1] = digits[q[i] & 15];
		sbx_buf_add(b, pair, 2);
	}
}

static int
hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
	    c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int
sbx_hex_get(const char *p, size_t n, struct sbx_buf *b)
{
	size_t i;
	char c;

	while (n && (p[n - 1] == '\n' || p[n - 1] == '\r'))
		n--;
	if (n % 2)
		return -1;
	for (i = 0; i < n; i += 2) {
		if (hexval(p[i]) < 0 || hexval(p[i + 1]) < 0)
			return -1;
		c = (char)(hexval(p[i]) << 4 | hexval(p[i + 1]));
		sbx_buf_add(b, &c, 1);
	}
	return 0;
}
