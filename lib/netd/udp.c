/* udp.c - the sandbox's UDP other than DNS: TPROXY hands each datagram to
 * our transparent socket with the destination it was sent to; a flow (the
 * sandbox's address and port, the destination's) is judged once, by the
 * rules of its time, then relayed from a socket of the host's netns
 * connected to the destination, and the answers are sent back from a
 * socket of the sandbox's bound to that destination (the binder's, which
 * then takes the flow's next datagrams straight); one log line when the
 * flow has been idle for UDP_IDLE_MS */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netd.h"

#define UDP_MAX 65535
#define UDP_IDLE_MS 60000
#define UDP_BURST 64        /* datagrams read from one socket at a time */

struct flow {
	struct sockaddr_storage client, dest;  /* v4 as sockaddr_in */
	int in, up;             /* the sandbox's side, the host's; -1: a
	                         * denied or failed flow, whose datagrams are
	                         * dropped until it is idle */
	long long last;         /* sbx_mono_ms of its last datagram */
	uint64_t out, back;     /* bytes sandbox->destination, and back */
	struct netd_conf *cf;   /* the snapshot it was judged by */
	struct netd_logrec r;
	int logged;             /* its line is written */
};

static struct {
	pthread_mutex_t mu;
	struct flow *f[NETD_MAX_UDP];
	int n;
	int stopped;            /* netd_udp_stop wrote the lines */
} ft = {PTHREAD_MUTEX_INITIALIZER, {NULL}, 0, 0};

/* A v4-mapped sockaddr_in6 as the sockaddr_in it is. */
static void
unmap(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	if (ss->ss_family != AF_INET6)
		return;
	memcpy(&s6, ss, sizeof s6);
	if (!IN6_IS_ADDR_V4MAPPED(&s6.sin6_addr))
		return;
	memset(ss, 0, sizeof *ss);
	s4->sin_family = AF_INET;
	s4->sin_port = s6.sin6_port;
	memcpy(&s4->sin_addr, &s6.sin6_addr.s6_addr[12], 4);
}

static int
sa_eq(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const struct sockaddr_in *a4 = (const void *)a, *b4 = (const void *)b;
	const struct sockaddr_in6 *a6 = (const void *)a, *b6 = (const void *)b;

	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return a4->sin_port == b4->sin_port &&
		    a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	return a6->sin6_port == b6->sin6_port &&
	    !memcmp(&a6->sin6_addr, &b6->sin6_addr, 16);
}

static socklen_t
sa_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
	    sizeof(struct sockaddr_in6);
}

/* The verdict of the rules of f->cf. UDP is judged by its address alone
 * (no name to read), and only without rules: a rule given says what may
 * be reached, and it is said of names UDP does not carry. */
static int
judge(struct flow *f)
{
	const struct sockaddr *d = (const struct sockaddr *)&f->dest;
	struct netd_conf *cf = f->cf;

	if (cf->proxy) {
		f->r.error = "UDP does not go through the egress proxy";
		return 0;
	}
	if (cf->rules.nallow || cf->rules.ndeny) {
		f->r.error = "UDP other than DNS is denied when rules are given";
		return 0;
	}
	return sbx_net_allowed(&cf->rules, d, NULL, netd_is_host(d));
}

static void
flow_log(struct flow *f, const char *error)
{
	if (f->logged || ft.stopped)
		return;
	f->logged = 1;
	f->r.bytes_out = f->out;
	f->r.bytes_in = f->back;
	if (error)
		f->r.error = error;
	netd_log(&f->r);
}

/* Out of the table (index i), its line written, its sockets closed. */
static void
flow_end(int i)
{
	struct flow *f = ft.f[i];

	flow_log(f, NULL);
	if (f->in >= 0)
		close(f->in);
	if (f->up >= 0)
		close(f->up);
	netd_conf_put(f->cf);
	free(f);
	ft.f[i] = ft.f[--ft.n];
}

/* A new flow, judged and, when allowed, its two sockets made; NULL when
 * the table is full of live flows. */
static struct flow *
flow_new(const struct sockaddr_storage *client,
    const struct sockaddr_storage *dest, long long now)
{
	static long long warned;
	struct flow *f;
	const char *why;
	int i, old = -1;

	if (ft.n >= NETD_MAX_UDP) {
		/* Room made from the oldest dead flow, if any. */
		for (i = 0; i < ft.n; i++)
			if (ft.f[i]->in < 0 && (old < 0 ||
			    ft.f[i]->last < ft.f[old]->last))
				old = i;
		if (old < 0) {
			if (!warned || now - warned > 60000) {
				warned = now;
				sbx_warn("%d UDP flows at once: dropping new "
				    "ones", NETD_MAX_UDP);
			}
			return NULL;
		}
		flow_end(old);
	}
	f = sbx_xcalloc(1, sizeof *f);
	f->client = *client;
	f->dest = *dest;
	f->in = f->up = -1;
	f->last = now;
	f->cf = netd_conf_get();
	f->r = (struct netd_logrec){.sandbox = f->cf->id, .proto = "udp",
	    .dest = (struct sockaddr *)&f->dest};
	ft.f[ft.n++] = f;
	if (!(f->r.allow = judge(f))) {
		flow_log(f, NULL);
		return f;
	}
	f->up = socket(dest->ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (f->up < 0 || connect(f->up, (const struct sockaddr *)dest,
	    sa_len(dest)) < 0) {
		flow_log(f, strerror(errno));
		goto dead;
	}
	if ((f->in = netd_udp_bind(dest, client, &why)) < 0) {
		flow_log(f, why);
		goto dead;
	}
	return f;
dead:
	if (f->up >= 0)
		close(f->up);
	f->up = -1;
	return f;
}

/* One datagram that came to the listener: the first of a flow, or one
 * that came before the flow's own socket was there. */
static void
from_listener(const unsigned char *buf, size_t n,
    struct sockaddr_storage *client, struct sockaddr_storage *dest,
    long long now)
{
	struct netd_conf *cur;
	struct flow *f = NULL;
	int i;

	unmap(client);
	unmap(dest);
	for (i = 0; i < ft.n; i++) {
		if (sa_eq(&ft.f[i]->client, client) &&
		    sa_eq(&ft.f[i]->dest, dest)) {
			f = ft.f[i];
			break;
		}
	}
	/* A dead flow is judged again once the rules have changed. */
	if (f && f->in < 0) {
		cur = netd_conf_get();
		if (cur != f->cf) {
			flow_end(i);
			f = NULL;
		}
		netd_conf_put(cur);
	}
	if (!f && !(f = flow_new(client, dest, now)))
		return;
	f->last = now;
	if (f->up >= 0 && send(f->up, buf, n, MSG_DONTWAIT) >= 0)
		f->out += n;
}

/* A datagram from the listener and where it was going; -1 when none
 * waits. */
static ssize_t
listener_recv(unsigned char *buf, struct sockaddr_storage *client,
    struct sockaddr_storage *dest)
{
	union {
		char b[CMSG_SPACE(sizeof(struct sockaddr_in6))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {buf, UDP_MAX};
	struct msghdr mh = {.msg_name = client, .msg_namelen = sizeof *client,
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
	    .msg_controllen = sizeof u.b};
	struct cmsghdr *c;
	ssize_t n;

	memset(client, 0, sizeof *client);
	if ((n = recvmsg(netd.udpx, &mh, MSG_DONTWAIT)) < 0)
		return -1;
	memset(dest, 0, sizeof *dest);
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_IP && c->cmsg_type == IP_ORIGDSTADDR)
			memcpy(dest, CMSG_DATA(c), sizeof(struct sockaddr_in));
		else if (c->cmsg_level == SOL_IPV6 &&
		    c->cmsg_type == IPV6_ORIGDSTADDR)
			memcpy(dest, CMSG_DATA(c),
			    sizeof(struct sockaddr_in6));
	}
	return n;
}

/* Up to UDP_BURST datagrams from src to dst, counted in *count. */
static void
relay(int src, int dst, uint64_t *count, unsigned char *buf,
    long long *last, long long now)
{
	ssize_t n;
	int k;

	for (k = 0; k < UDP_BURST; k++) {
		n = recv(src, buf, UDP_MAX, MSG_DONTWAIT);
		if (n < 0) {
			/* EAGAIN: done; ECONNREFUSED and the like: an ICMP
			 * error about an earlier datagram, which UDP drops. */
			if (errno == EAGAIN || errno == EINTR)
				return;
			continue;
		}
		*last = now;
		if (send(dst, buf, (size_t)n, MSG_DONTWAIT) >= 0)
			*count += (uint64_t)n;
	}
}

static void *
udp_main(void *arg)
{
	struct pollfd p[1 + 2 * NETD_MAX_UDP];
	struct flow *pf[NETD_MAX_UDP];
	unsigned char *buf = sbx_xmalloc(UDP_MAX);
	struct sockaddr_storage client, dest;
	long long now, wait;
	ssize_t n;
	int i, np, k;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&ft.mu);
		now = sbx_mono_ms();
		wait = LLONG_MAX;
		np = ft.n;
		for (i = 0; i < np; i++) {
			pf[i] = ft.f[i];
			p[1 + 2 * i] = (struct pollfd){pf[i]->in, POLLIN, 0};
			p[2 + 2 * i] = (struct pollfd){pf[i]->up, POLLIN, 0};
			if (pf[i]->last + UDP_IDLE_MS - now < wait)
				wait = pf[i]->last + UDP_IDLE_MS - now;
		}
		pthread_mutex_unlock(&ft.mu);
		p[0] = (struct pollfd){netd.udpx, POLLIN, 0};
		if (poll(p, 1 + 2 * (nfds_t)np, np == 0 ? -1 : wait < 0 ? 0 :
		    wait > INT_MAX ? INT_MAX : (int)wait) < 0)
			continue;
		pthread_mutex_lock(&ft.mu);
		now = sbx_mono_ms();
		/* Only this thread takes flows out: pf[i] are still there. */
		for (i = 0; i < np; i++) {
			if (p[1 + 2 * i].revents)
				relay(pf[i]->in, pf[i]->up, &pf[i]->out, buf,
				    &pf[i]->last, now);
			if (p[2 + 2 * i].revents)
				relay(pf[i]->up, pf[i]->in, &pf[i]->back, buf,
				    &pf[i]->last, now);
		}
		for (i = 0; i < ft.n; i++)
			if (now - ft.f[i]->last >= UDP_IDLE_MS)
				flow_end(i--);
		for (k = 0; k < UDP_BURST && (p[0].revents & POLLIN); k++) {
			if ((n = listener_recv(buf, &client, &dest)) < 0)
				break;
			/* No destination: not by TPROXY. Nothing to do. */
			if (dest.ss_family == AF_INET ||
			    dest.ss_family == AF_INET6)
				from_listener(buf, (size_t)n, &client, &dest,
				    now);
		}
		pthread_mutex_unlock(&ft.mu);
	}
	return NULL;
}

int
netd_udp_start(struct sbx_err *err)
{
	pthread_t th;

	if ((errno = pthread_create(&th, NULL, udp_main, NULL)) != 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
	pthread_detach(th);
	return 0;
}

void
netd_udp_stop(void)
{
	int i;

	pthread_mutex_lock(&ft.mu);
	for (i = 0; i < ft.n; i++)
		flow_log(ft.f[i], "cut: sbx-netd stopped");
	ft.stopped = 1;
	pthread_mutex_unlock(&ft.mu);
}
