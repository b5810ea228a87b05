/* dns.c - the sandbox's DNS: each query that reached our UDP socket is
 * sent on to the resolvers from the host's netns and the answer relayed
 * back, one log line per query */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netd.h"

#define DNS_MS 5000         /* a query's whole time */
#define DNS_TRY_MS 1000     /* the least a resolver gets before the next */
#define DNS_PENDING 256     /* queries in flight; more are dropped */
#define DNS_MAX 65535

struct query {
	int up;                 /* connected to the resolver tried, or -1 */
	int resolver;           /* index in cf->dns */
	struct sockaddr_in6 client;
	socklen_t clen;
	struct in6_addr to;     /* the resolver the sandbox asked */
	unsigned char *q;
	size_t qlen;
	long long end, try_end;
	struct netd_conf *cf;
	char name[256];
};

static struct query *pend[DNS_PENDING];
static int npend;

/* The first question's name, lower case, "." for the root; "" when it
 * cannot be read (compressed, cut short, odd bytes): then it goes
 * unnamed in the log, and the query is forwarded all the same. */
static void
qname(const unsigned char *p, size_t n, char *out, size_t outsz)
{
	size_t i = 12, o = 0, len, k;

	out[0] = '\0';
	if (n < 12 || (p[4] == 0 && p[5] == 0))
		return;
	while (i < n && (len = p[i]) != 0) {
		/* 0xc0: a pointer, which no question needs; 0x40: unused. */
		if (len > 63 || i + 1 + len > n || o + len + 2 > outsz) {
			out[0] = '\0';
			return;
		}
		if (o)
			out[o++] = '.';
		for (k = 0; k < len; k++) {
			unsigned char ch = p[i + 1 + k];

			if (ch <= 0x20 || ch >= 0x7f || ch == '.') {
				out[0] = '\0';
				return;
			}
			out[o++] = (char)(ch >= 'A' && ch <= 'Z' ?
			    ch + 32 : ch);
		}
		i += 1 + len;
	}
	if (i >= n) {
		out[0] = '\0';
		return;
	}
	if (o == 0)
		out[o++] = '.';
	out[o] = '\0';
}

static void
query_done(struct query *q, const char *error, size_t answer)
{
	struct sockaddr_storage none = {.ss_family = AF_UNSPEC};
	struct netd_logrec r = {.sandbox = q->cf->id, .proto = "dns",
	    .dest = q->cf->ndns ? (struct sockaddr *)&q->cf->dns[q->resolver] :
	    (struct sockaddr *)&none, .host = q->name[0] ? q->name : NULL,
	    .allow = 1, .bytes_out = q->qlen, .bytes_in = answer,
	    .error = error};
	int i;

	netd_log(&r);
	if (q->up >= 0)
		close(q->up);
	netd_conf_put(q->cf);
	free(q->q);
	for (i = 0; i < npend; i++)
		if (pend[i] == q)
			pend[i] = pend[--npend];
	free(q);
}

/* Send the query to resolver i from a socket of its own (a fresh port
 * for each: an answer must come from where the query went). */
static int
query_send(struct query *q, int i)
{
	struct sockaddr_storage *a = &q->cf->dns[i];
	long long now = sbx_mono_ms(), t = DNS_MS / q->cf->ndns;

	if (q->up >= 0)
		close(q->up);
	q->resolver = i;
	q->up = socket(a->ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (q->up < 0 || connect(q->up, (struct sockaddr *)a,
	    q->cf->dnslen[i]) < 0 || send(q->up, q->q, q->qlen, 0) < 0)
		return -1;
	q->try_end = now + (t < DNS_TRY_MS ? DNS_TRY_MS : t);
	if (q->try_end > q->end)
		q->try_end = q->end;
	return 0;
}

/* The next resolver, or the end of the query. */
static void
query_next(struct query *q, const char *why)
{
	while (q->resolver + 1 < q->cf->ndns && sbx_mono_ms() < q->end)
		if (query_send(q, q->resolver + 1) == 0)
			return;
	query_done(q, why, 0);
}

static void
query_new(const unsigned char *p, size_t n, const struct sockaddr_in6 *from,
    socklen_t flen, const struct in6_addr *to)
{
	struct query *q;

	/* Too short for a header, or an answer (QR): nothing to forward. */
	if (n < 12 || (p[2] & 0x80) || npend >= DNS_PENDING)
		return;
	q = sbx_xcalloc(1, sizeof *q);
	q->up = -1;
	q->client = *from;
	q->clen = flen;
	q->to = *to;
	q->q = sbx_xmalloc(n);
	memcpy(q->q, p, n);
	q->qlen = n;
	q->cf = netd_conf_get();
	q->end = sbx_mono_ms() + DNS_MS;
	qname(p, n, q->name, sizeof q->name);
	pend[npend++] = q;
	if (q->cf->ndns == 0) {
		query_done(q, "no resolver", 0);
		return;
	}
	if (query_send(q, 0) < 0)
		query_next(q, strerror(errno));
}

/* The Internet checksum (RFC 1071) of n bytes, added to sum. */
static uint64_t
csum_add(uint64_t sum, const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += (uint64_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint64_t)p[n - 1] << 8;
	return sum;
}

static uint16_t
csum_fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Send the answer from the resolver the sandbox asked, port 53: a client
 * whose socket is connected to it (glibc's) takes nothing else. A whole
 * packet through a raw socket of the sandbox's netns: a socket bound to
 * port 53 could take it from the sandbox's own servers. NULL, or why
 * not. */
static const char *
reply(const struct query *q, const void *buf, size_t n)
{
	const struct in6_addr *to = &q->to, *cl = &q->client.sin6_addr;
	int v4 = IN6_IS_ADDR_V4MAPPED(to), fd = v4 ? netd.raw4 : netd.raw6;
	size_t alen = v4 ? 4 : 16, hl = v4 ? 20 : 40, ulen = 8 + n;
	const unsigned char *src = v4 ? &to->s6_addr[12] : to->s6_addr;
	const unsigned char *dst = v4 ? &cl->s6_addr[12] : cl->s6_addr;
	struct sockaddr_in d4 = {.sin_family = AF_INET};
	struct sockaddr_in6 d6 = {.sin6_family = AF_INET6};
	unsigned char *pkt, *u;
	uint64_t sum;
	uint16_t c;
	ssize_t w;

	if (fd < 0 || v4 != IN6_IS_ADDR_V4MAPPED(cl))
		return "no way back to the sandbox for the answer";
	if (ulen + hl > 65535)
		return "answer too long";
	pkt = sbx_xcalloc(1, hl + ulen);
	u = pkt + hl;
	u[1] = 53;
	memcpy(&u[2], &q->client.sin6_port, 2);
	u[4] = (unsigned char)(ulen >> 8);
	u[5] = (unsigned char)ulen;
	memcpy(&u[8], buf, n);
	/* The pseudo-header: both addresses, the protocol, the length. */
	sum = csum_add(csum_add(IPPROTO_UDP + ulen, src, alen), dst, alen);
	c = csum_fold(csum_add(sum, u, ulen));
	c = c ? c : 0xffff;
	u[6] = (unsigned char)(c >> 8);
	u[7] = (unsigned char)c;
	if (v4) {
		/* The kernel fills in the length, the id, the checksum. */
		pkt[0] = 0x45;
		pkt[8] = 64;
		pkt[9] = IPPROTO_UDP;
		memcpy(&pkt[12], src, 4);
		memcpy(&pkt[16], dst, 4);
		memcpy(&d4.sin_addr, dst, 4);
		w = sendto(fd, pkt, hl + ulen, MSG_DONTWAIT,
		    (struct sockaddr *)&d4, sizeof d4);
	} else {
		pkt[0] = 0x60;
		pkt[4] = (unsigned char)(ulen >> 8);
		pkt[5] = (unsigned char)ulen;
		pkt[6] = IPPROTO_UDP;
		pkt[7] = 64;
		memcpy(&pkt[8], src, 16);
		memcpy(&pkt[24], dst, 16);
		memcpy(&d6.sin6_addr, dst, 16);
		w = sendto(fd, pkt, hl + ulen, MSG_DONTWAIT,
		    (struct sockaddr *)&d6, sizeof d6);
	}
	free(pkt);
	return w < 0 ? strerror(errno) : NULL;
}

/* One query from the sandbox, with where it landed; -1 when none waits. */
static ssize_t
query_recv(unsigned char *buf, struct sockaddr_in6 *from, socklen_t *flen,
    struct in6_addr *to)
{
	union {
		char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {buf, DNS_MAX};
	struct msghdr mh = {.msg_name = from, .msg_namelen = sizeof *from,
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
	    .msg_controllen = sizeof u.b};
	struct cmsghdr *c;
	ssize_t n;

	if ((n = recvmsg(netd.udp, &mh, MSG_DONTWAIT)) < 0)
		return -1;
	*flen = mh.msg_namelen;
	memset(to, 0, sizeof *to);
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == IPPROTO_IPV6 &&
		    c->cmsg_type == IPV6_PKTINFO)
			memcpy(to, &((struct in6_pktinfo *)CMSG_DATA(c))->
			    ipi6_addr, sizeof *to);
	return n;
}

static void
query_answer(struct query *q, unsigned char *buf)
{
	ssize_t n = recv(q->up, buf, DNS_MAX, 0);

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			query_next(q, strerror(errno));
		return;
	}
	/* Not the answer to this query (same id, QR set): wait on. */
	if (n < 12 || buf[0] != q->q[0] || buf[1] != q->q[1] ||
	    !(buf[2] & 0x80))
		return;
	query_done(q, reply(q, buf, (size_t)n), (size_t)n);
}

static void *
dns_main(void *arg)
{
	struct pollfd p[DNS_PENDING + 1];
	struct query *q[DNS_PENDING];
	unsigned char *buf = sbx_xmalloc(DNS_MAX);
	struct sockaddr_in6 from;
	struct in6_addr to;
	socklen_t flen;
	long long now, wait;
	ssize_t n;
	int i, np, k;

	(void)arg;
	for (;;) {
		now = sbx_mono_ms();
		wait = LLONG_MAX;
		/* A copy: the calls below take queries out of pend. */
		np = npend;
		memcpy(q, pend, (size_t)np * sizeof *q);
		for (i = 0; i < np; i++) {
			p[i + 1] = (struct pollfd){q[i]->up, POLLIN, 0};
			if (q[i]->try_end - now < wait)
				wait = q[i]->try_end - now;
		}
		p[0] = (struct pollfd){netd.udp, POLLIN, 0};
		if (poll(p, (nfds_t)np + 1, np == 0 ? -1 : wait < 0 ? 0 :
		    (int)wait) < 0)
			continue;
		now = sbx_mono_ms();
		for (i = 0; i < np; i++) {
			if (p[i + 1].revents)
				query_answer(q[i], buf);
			else if (now >= q[i]->try_end)
				query_next(q[i], "timed out");
		}
		/* A burst at a time, so that answers are not starved. */
		for (k = 0; k < 64 && (p[0].revents & POLLIN); k++) {
			if ((n = query_recv(buf, &from, &flen, &to)) < 0)
				break;
			query_new(buf, (size_t)n, &from, flen, &to);
		}
	}
	return NULL;
}

int
netd_dns_start(struct sbx_err *err)
{
	pthread_t th;
	int on = 1;

	if (setsockopt(netd.udp, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on,
	    sizeof on) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot set "
		    "IPV6_RECVPKTINFO:");

	if ((errno = pthread_create(&th, NULL, dns_main, NULL)) != 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
	pthread_detach(th);
	return 0;
}
