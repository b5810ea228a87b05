/* resolve.c - the addresses of a host with header injection, asked of the
 * resolvers the sandbox's DNS goes to: an injected value goes to those
 * alone, whatever address the sandbox connected to */
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netd.h"

#define RESOLVE_MS 5000     /* a lookup's whole time, as a query's */
#define RESOLVE_TRY_MS 1000 /* the least a resolver gets before the next */
#define TTL_MAX 300         /* seconds an answer is kept, at most */
#define ADDRS_MAX 32        /* of one host and family */
#define CACHE_N 32
#define ANSWER_MAX 4096

struct addrs {
	char host[256];
	int family;
	size_t n;
	unsigned char a[ADDRS_MAX][16];
	long long until;        /* sbx_mono_ms; 0: a free entry */
};

/* Only an answer that names dest is kept: a miss always asks again, so
 * the cache makes the usual case fast and can never refuse. */
static struct {
	pthread_mutex_t mu;
	struct addrs e[CACHE_N];
	unsigned next;          /* the entry to replace */
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

void
netd_resolve_flush(void)
{
	pthread_mutex_lock(&cache.mu);
	memset(cache.e, 0, sizeof cache.e);
	pthread_mutex_unlock(&cache.mu);
}

/* dest's address (a v4-mapped v6 taken as v4) into a[16]: its family. */
static int
dest_addr(const struct sockaddr *dest, unsigned char *a)
{
	const struct sockaddr_in6 *d6 = (const struct sockaddr_in6 *)dest;

	if (dest->sa_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)dest)->sin_addr, 4);
		return AF_INET;
	}
	if (IN6_IS_ADDR_V4MAPPED(&d6->sin6_addr)) {
		memcpy(a, d6->sin6_addr.s6_addr + 12, 4);
		return AF_INET;
	}
	memcpy(a, &d6->sin6_addr, 16);
	return AF_INET6;
}

static int
addrs_has(const struct addrs *s, const unsigned char *a)
{
	size_t i, len = s->family == AF_INET ? 4 : 16;

	for (i = 0; i < s->n; i++)
		if (!memcmp(s->a[i], a, len))
			return 1;
	return 0;
}

static int
cache_has(const char *host, int family, const unsigned char *a)
{
	long long now = sbx_mono_ms();
	int i, yes = 0;

	pthread_mutex_lock(&cache.mu);
	for (i = 0; i < CACHE_N && !yes; i++)
		yes = cache.e[i].until > now && cache.e[i].family == family &&
		    !strcasecmp(cache.e[i].host, host) &&
		    addrs_has(&cache.e[i], a);
	pthread_mutex_unlock(&cache.mu);
	return yes;
}

static void
cache_put(const struct addrs *s)
{
	int i;

	pthread_mutex_lock(&cache.mu);
	for (i = 0; i < CACHE_N; i++)
		if (cache.e[i].family == s->family &&
		    !strcasecmp(cache.e[i].host, s->host))
			break;
	if (i == CACHE_N)
		i = (int)(cache.next++ % CACHE_N);
	cache.e[i] = *s;
	pthread_mutex_unlock(&cache.mu);
}

/* The query for host's A or AAAA (recursion desired, EDNS0 for 1232
 * bytes) into q; its length, 0 when host is not a name. */
static size_t
query_make(const char *host, int type, unsigned char *q, size_t qsz)
{
	static const unsigned char opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0,
	    0, 0, 0};
	const char *p, *dot;
	size_t i = 12, len;
	unsigned char id[2];

	if (getrandom(id, 2, 0) != 2)
		return 0;
	memset(q, 0, 12);
	q[0] = id[0];
	q[1] = id[1];
	q[2] = 0x01;            /* RD */
	q[5] = 1;               /* one question */
	q[11] = 1;              /* one additional: the OPT */
	for (p = host; *p; p = *dot ? dot + 1 : dot) {
		dot = strchr(p, '.');
		if (!dot)
			dot = p + strlen(p);
		len = (size_t)(dot - p);
		if (len == 0 || len > 63 || i + 1 + len + 5 + sizeof opt > qsz)
			return 0;
		q[i++] = (unsigned char)len;
		memcpy(q + i, p, len);
		i += len;
	}
	q[i++] = 0;
	q[i++] = 0;
	q[i++] = (unsigned char)type;
	q[i++] = 0;
	q[i++] = 1;             /* IN */
	memcpy(q + i, opt, sizeof opt);
	return i + sizeof opt;
}

/* Past the name at r[*i] (labels, ending in a root or a pointer). */
static int
name_skip(const unsigned char *r, size_t n, size_t *i)
{
	while (*i < n) {
		if (r[*i] == 0) {
			(*i)++;
			return 0;
		}
		if ((r[*i] & 0xc0) == 0xc0) {
			*i += 2;
			return *i <= n ? 0 : -1;
		}
		if (r[*i] & 0xc0)
			return -1;
		*i += 1 + (size_t)r[*i];
	}
	return -1;
}

/* The answer r[0, n) to q (its question qlen - 11 - 12 bytes at 12):
 * 1 and s filled (NOERROR, or NXDOMAIN: none), 0 not ours (wait on),
 * -1 refused (why). Every A or AAAA of the answer section is host's: a
 * resolver gives the addresses the CNAMEs lead to there. */
static int
answer_parse(const unsigned char *r, size_t n, const unsigned char *q,
    size_t qlen, int type, struct addrs *s, long long *ttl, const char **why)
{
	size_t qn = qlen - 11 - 12, i, k, an, rdlen, alen = type == 1 ? 4 : 16;
	unsigned t, cls;
	long long rttl;

	if (n < 12 + qn || r[0] != q[0] || r[1] != q[1] || !(r[2] & 0x80) ||
	    r[4] != 0 || r[5] != 1)
		return 0;
	for (k = 0; k < qn; k++)
		if (tolower(r[12 + k]) != tolower(q[12 + k]))
			return 0;
	switch (r[3] & 15) {
	case 0:
		break;
	case 3:
		return 1;       /* no such name: no addresses */
	case 2:
		*why = "server failure";
		return -1;
	case 5:
		*why = "refused";
		return -1;
	default:
		*why = "an error answer";
		return -1;
	}
	an = (size_t)r[6] << 8 | r[7];
	for (i = 12 + qn; an > 0; an--) {
		if (name_skip(r, n, &i) < 0 || i + 10 > n)
			break;
		t = (unsigned)r[i] << 8 | r[i + 1];
		cls = (unsigned)r[i + 2] << 8 | r[i + 3];
		rttl = (long long)((unsigned long)r[i + 4] << 24 |
		    (unsigned long)r[i + 5] << 16 | (unsigned long)r[i + 6] << 8 |
		    r[i + 7]);
		rdlen = (size_t)r[i + 8] << 8 | r[i + 9];
		i += 10;
		if (i + rdlen > n)
			break;
		if (t == (unsigned)type && cls == 1 && rdlen == alen &&
		    s->n < ADDRS_MAX) {
			memcpy(s->a[s->n++], r + i, alen);
			if (rttl < *ttl)
				*ttl = rttl;
		}
		i += rdlen;
	}
	return 1;
}

/* Ask resolver k of cf until its answer or end; 1 answered (s), 0 no
 * answer in time, -1 refused or broken (why). */
static int
ask(const struct netd_conf *cf, int k, const unsigned char *q, size_t qlen,
    int type, long long end, struct addrs *s, long long *ttl,
    const char **why)
{
	unsigned char r[ANSWER_MAX];
	struct pollfd p;
	long long left;
	ssize_t n;
	int fd, rc = 0;

	fd = socket(cf->dns[k].ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)&cf->dns[k],
	    cf->dnslen[k]) < 0 || send(fd, q, qlen, 0) < 0) {
		*why = strerror(errno);
		rc = -1;
		goto out;
	}
	while ((left = end - sbx_mono_ms()) > 0) {
		p = (struct pollfd){fd, POLLIN, 0};
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		if ((n = recv(fd, r, sizeof r, 0)) < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			*why = strerror(errno);
			rc = -1;
			break;
		}
		if ((rc = answer_parse(r, (size_t)n, q, qlen, type, s, ttl,
		    why)) != 0)
			break;
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int
netd_resolve_has(const struct netd_conf *cf, const char *host,
    const struct sockaddr *dest, char *why, size_t whyn)
{
	unsigned char a[16] = {0}, q[300];
	struct addrs s = {.n = 0};
	long long end = sbx_mono_ms() + RESOLVE_MS, try_end, t, ttl;
	const char *e = "timed out";
	size_t qlen;
	int family = dest_addr(dest, a), type = family == AF_INET ? 1 : 28;
	int k, rc;

	/* Before addrs_has: the family says how many bytes compare. */
	s.family = family;
	if (cache_has(host, family, a))
		return 1;
	if (!(qlen = query_make(host, type, q, sizeof q))) {
		snprintf(why, whyn, "cannot resolve %.200s: not a name", host);
		return -1;
	}
	if (cf->ndns == 0)
		e = "no resolver";
	for (k = 0; k < cf->ndns && sbx_mono_ms() < end; k++) {
		t = RESOLVE_MS / cf->ndns;
		try_end = sbx_mono_ms() + (t < RESOLVE_TRY_MS ?
		    RESOLVE_TRY_MS : t);
		s.n = 0;
		s.family = family;
		ttl = TTL_MAX;
		rc = ask(cf, k, q, qlen, type, try_end < end ? try_end : end,
		    &s, &ttl, &e);
		if (rc <= 0)
			continue;
		if (!addrs_has(&s, a))
			return 0;
		snprintf(s.host, sizeof s.host, "%s", host);
		if (ttl > 0) {
			s.until = sbx_mono_ms() + ttl * 1000;
			cache_put(&s);
		}
		return 1;
	}
	snprintf(why, whyn, "cannot resolve %.200s: %s", host, e);
	return -1;
}
