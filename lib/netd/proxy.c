/* proxy.c - the sandbox's TCP: each connection TPROXY hands our listener
 * is judged by its original destination (and the host its first bytes
 * name, when a rule names domains), then relayed to that destination from
 * the host's netns, or reset */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netd.h"

#define LOG_SNIFF_MS 20     /* the name for the log, without rules */
#define SNIFF_MS 2000       /* how long the first bytes may take */
#define SNIFF_MAX 16384     /* a ClientHello with big key shares fits */
#define CONNECT_MS 10000
#define PIPE_CHUNK 65536

/* The connections being relayed, for netd_proxy_stop to log: they end
 * with us, and a line must say so. */
static struct {
	pthread_mutex_t mu;
	struct conn *head;
	int stopped;            /* their lines are written: no more */
} live = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static atomic_int nconns;

/* --- the host's own addresses: netd_is_host, for sbx_net_protected ---- */

static struct {
	pthread_mutex_t mu;
	long long at;           /* when they were read, 0: never */
	struct sockaddr_storage *a;
	size_t n;
} ha = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0};

static void
host_addrs_refresh(void)
{
	struct ifaddrs *ifa, *i;
	size_t n = 0;

	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i; i = i->ifa_next)
		n++;
	free(ha.a);
	ha.a = sbx_xcalloc(n ? n : 1, sizeof *ha.a);
	ha.n = 0;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
		    i->ifa_addr->sa_family != AF_INET6))
			continue;
		memcpy(&ha.a[ha.n++], i->ifa_addr,
		    i->ifa_addr->sa_family == AF_INET ?
		    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifa);
}

/* Whether dest is one of the host's addresses; they are read again at
 * most once a second (an address added since is seen within one). */
int
netd_is_host(const struct sockaddr *dest)
{
	const struct sockaddr_in *d4 = (const struct sockaddr_in *)dest;
	const struct sockaddr_in6 *d6 = (const struct sockaddr_in6 *)dest;
	long long now = sbx_mono_ms();
	size_t i;
	int yes = 0;

	pthread_mutex_lock(&ha.mu);
	if (!ha.at || now - ha.at >= 1000) {
		host_addrs_refresh();
		ha.at = now;
	}
	for (i = 0; i < ha.n && !yes; i++) {
		const struct sockaddr *a = (const struct sockaddr *)&ha.a[i];

		if (a->sa_family != dest->sa_family)
			continue;
		if (a->sa_family == AF_INET)
			yes = ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
			    d4->sin_addr.s_addr;
		else
			yes = !memcmp(&((const struct sockaddr_in6 *)a)->
			    sin6_addr, &d6->sin6_addr, 16);
	}
	pthread_mutex_unlock(&ha.mu);
	return yes;
}

/* --- one connection --------------------------------------------------- */

/* Our listener's port (network order), set before the first accept. */
static in_port_t tcp_port;

/* Whether a is the sandbox's loopback or one of its own addresses. */
static int
own(const struct in6_addr *a)
{
	struct in6_addr v4, v6;

	inet_pton(AF_INET6, "::ffff:" NETD_SANDBOX_V4, &v4);
	inet_pton(AF_INET6, NETD_SANDBOX_V6, &v6);
	return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) &&
	    a->s6_addr[12] == 127) || IN6_ARE_ADDR_EQUAL(a, &v4) ||
	    IN6_ARE_ADDR_EQUAL(a, &v6);
}

/* Where the sandbox meant to go: the connection's local address, which
 * TPROXY left as the sandbox asked (v4-mapped for IPv4, made plain);
 * -1 for one to an address of the sandbox's own, straight to our port
 * (the ruleset hands us no other: those are the sandbox's). */
static int
original_dest(int fd, struct sockaddr_storage *ss)
{
	struct sockaddr_in6 self;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	socklen_t len = sizeof self;

	memset(ss, 0, sizeof *ss);
	if (getsockname(fd, (struct sockaddr *)&self, &len) < 0 ||
	    self.sin6_family != AF_INET6)
		return -1;
	if (IN6_IS_ADDR_V4MAPPED(&self.sin6_addr)) {
		s4->sin_family = AF_INET;
		s4->sin_port = self.sin6_port;
		memcpy(&s4->sin_addr, &self.sin6_addr.s6_addr[12], 4);
	} else {
		memcpy(ss, &self, sizeof self);
	}
	return self.sin6_port == tcp_port && own(&self.sin6_addr) ? -1 : 0;
}

/* The host the first bytes name, waiting for them up to SNIFF_MS; "" when
 * none does (not TLS or HTTP, too slow, too long). MSG_PEEK: the bytes
 * stay for the upstream. */
static void
sniff(struct conn *c)
{
	unsigned char *buf = sbx_xmalloc(SNIFF_MAX);
	long long end = sbx_mono_ms() + SNIFF_MS, left;
	struct pollfd p = {c->fd, POLLIN | POLLRDHUP, 0};
	ssize_t n = 0, got;
	int lowat;

	c->host[0] = '\0';
	while ((left = end - sbx_mono_ms()) > 0) {
		/* Wake only when there is more than what was judged. */
		lowat = (int)n + 1;
		setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat,
		    sizeof lowat);
		if (poll(&p, 1, (int)left) <= 0)
			break;
		got = recv(c->fd, buf, SNIFF_MAX, MSG_PEEK | MSG_DONTWAIT);
		if (got <= 0 || got == n) {
			if (got < 0 && errno == EAGAIN)
				continue;
			break;          /* closed, or its end came */
		}
		n = got;
		switch (sbx_net_sniff(buf, (size_t)n, c->host,
		    sizeof c->host)) {
		case 1:
			goto out;
		case 0:
			if (n < SNIFF_MAX)
				continue;
			/* fall through */
		default:
			c->host[0] = '\0';
			goto out;
		}
	}
	c->host[0] = '\0';
out:
	lowat = 1;
	setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
	free(buf);
}

/* Without a domain rule nothing waits for the name, but the log still
 * wants it: by the time the upstream has answered, a TLS or HTTP client
 * has sent its first bytes. Waits LOG_SNIFF_MS at most (a server-first
 * protocol, such as SSH, pays that once). */
static void
peek_host(struct conn *c)
{
	unsigned char *buf;
	struct pollfd p = {c->fd, POLLIN, 0};
	ssize_t n;

	c->host[0] = '\0';
	if (poll(&p, 1, LOG_SNIFF_MS) <= 0)
		return;
	buf = sbx_xmalloc(SNIFF_MAX);
	n = recv(c->fd, buf, SNIFF_MAX, MSG_PEEK | MSG_DONTWAIT);
	if (n <= 0 || sbx_net_sniff(buf, (size_t)n, c->host,
	    sizeof c->host) != 1)
		c->host[0] = '\0';
	free(buf);
}

void
netd_reset(int fd)
{
	struct linger l = {1, 0};

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	close(fd);
}

/* Connect to dest from the host's netns within CONNECT_MS, through the
 * egress proxy when there is one (socks.c); NULL or why not. */
const char *
netd_connect_up(struct conn *c, const struct netd_conf *cf)
{
	socklen_t len = c->dest.ss_family == AF_INET ?
	    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	struct pollfd p;
	int e = 0, r;
	socklen_t elen = sizeof e;

	if (cf->proxy)
		return netd_socks_connect(cf, (struct sockaddr *)&c->dest,
		    &c->up, sbx_mono_ms() + CONNECT_MS, c->why, sizeof c->why);
	c->up = socket(c->dest.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (c->up < 0)
		return strerror(errno);
	if (connect(c->up, (struct sockaddr *)&c->dest, len) == 0)
		return NULL;
	if (errno != EINPROGRESS)
		return strerror(errno);
	p.fd = c->up;
	p.events = POLLOUT;
	while ((r = poll(&p, 1, CONNECT_MS)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return "connect timed out";
	if (r < 0 || getsockopt(c->up, SOL_SOCKET, SO_ERROR, &e, &elen) < 0)
		return strerror(errno);
	return e ? strerror(e) : NULL;
}

/* One direction of the relay: src -> pipe -> dst. */
struct half {
	int src, dst;
	int p[2];
	size_t pending;          /* bytes in the pipe */
	int full;                /* the pipe took no more: wait for dst */
	int eof;                 /* src ended */
	int shut;                /* dst got its SHUT_WR */
	uint64_t *count;
};

static int
half_in(struct half *h)
{
	ssize_t n = splice(h->src, NULL, h->p[1], NULL, PIPE_CHUNK,
	    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

	if (n > 0)
		h->pending += (size_t)n;
	else if (n == 0)
		h->eof = 1;
	else if (errno == EAGAIN)
		/* src empty or the pipe full: if data waits, the pipe. */
		h->full = h->pending > 0;
	else if (errno != EINTR)
		return -1;
	return 0;
}

static int
half_out(struct half *h)
{
	ssize_t n = splice(h->p[0], NULL, h->dst, NULL, h->pending,
	    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

	if (n > 0) {
		h->pending -= (size_t)n;
		__atomic_fetch_add(h->count, (uint64_t)n, __ATOMIC_RELAXED);
		h->full = 0;
	} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
		return -1;
	}
	return 0;
}

/* Relay both ways until both have ended; an end (FIN) is passed on as
 * SHUT_WR, so a half-closed connection stays half-open. */
int
netd_relay(int a, int b, uint64_t *a_to_b, uint64_t *b_to_a)
{
	struct half h[2] = {
		{a, b, {-1, -1}, 0, 0, 0, 0, a_to_b},
		{b, a, {-1, -1}, 0, 0, 0, 0, b_to_a},
	};
	struct pollfd p[2];
	int i, rc = -1;

	for (i = 0; i < 2; i++)
		if (pipe2(h[i].p, O_NONBLOCK | O_CLOEXEC) < 0)
			goto out;
	fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK);
	fcntl(b, F_SETFL, fcntl(b, F_GETFL) | O_NONBLOCK);
	while (!h[0].shut || !h[1].shut) {
		/* p[0] is a (the sandbox's side), p[1] b: half i reads from
		 * p[i] and writes to p[1 - i]. A socket is polled while we
		 * want something of it, or while we still write to it (to
		 * learn that it is gone); else its POLLHUP, which poll
		 * reports unasked, would spin us. */
		for (i = 0; i < 2; i++) {
			p[i] = (struct pollfd){i ? b : a, 0, 0};
			if (!h[i].eof && !h[i].full)
				p[i].events |= POLLIN | POLLRDHUP;
			if (h[1 - i].pending)
				p[i].events |= POLLOUT;
			if (!p[i].events && h[1 - i].shut)
				p[i].fd = -1;
		}
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		for (i = 0; i < 2; i++) {
			if (p[i].revents & POLLERR)
				goto out;
			if ((p[i].revents & (POLLIN | POLLRDHUP | POLLHUP)) &&
			    !h[i].eof && !h[i].full && half_in(&h[i]) < 0)
				goto out;
			if ((p[i].revents & POLLOUT) && h[1 - i].pending &&
			    half_out(&h[1 - i]) < 0)
				goto out;
			/* Closed both ways: what we would write to it has
			 * nowhere to go; what it sent is still passed on. */
			if ((p[i].revents & POLLHUP) && !h[1 - i].shut) {
				h[1 - i].eof = h[1 - i].shut = 1;
				h[1 - i].pending = 0;
			}
		}
		for (i = 0; i < 2; i++) {
			if (h[i].eof && !h[i].pending && !h[i].shut) {
				shutdown(h[i].dst, SHUT_WR);
				h[i].shut = 1;
			}
		}
	}
	rc = 0;
out:
	for (i = 0; i < 2; i++) {
		if (h[i].p[0] >= 0)
			close(h[i].p[0]);
		if (h[i].p[1] >= 0)
			close(h[i].p[1]);
	}
	return rc;
}

static void
live_add(struct conn *c)
{
	pthread_mutex_lock(&live.mu);
	c->next = live.head;
	if (live.head)
		live.head->prev = c;
	live.head = c;
	pthread_mutex_unlock(&live.mu);
}

/* Out of live; 0 when netd_proxy_stop has logged it already. */
static int
live_del(struct conn *c)
{
	int stopped;

	pthread_mutex_lock(&live.mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		live.head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	stopped = live.stopped;
	pthread_mutex_unlock(&live.mu);
	return !stopped;
}

static void *
conn_main(void *arg)
{
	struct conn *c = arg;
	struct netd_conf *cf = netd_conf_get();
	struct netd_logrec *r = &c->r;
	const char *e;
	int host;

	*r = (struct netd_logrec){.sandbox = cf->id, .proto = "tcp",
	    .dest = (struct sockaddr *)&c->dest};
	if (original_dest(c->fd, &c->dest) < 0) {
		/* Straight to our port from inside, not redirected: nothing
		 * to judge, nothing to log. */
		netd_reset(c->fd);
		goto out;
	}
	if (cf->want_host)
		sniff(c);
	r->host = c->host[0] ? c->host : NULL;
	host = netd_is_host(r->dest);
	r->allow = sbx_net_allowed(&cf->rules, r->dest, r->host, host);
	/* Allowed for its name alone (an --allow-out domain, where the
	 * address would be denied): the name is the sandbox's word, so the
	 * address must be one of that name's, as our resolvers answer. Else
	 * any program could reach any address by naming an allowed host. */
	if (r->allow && r->host && !sbx_net_allowed(&cf->rules, r->dest,
	    NULL, host)) {
		switch (netd_resolve_has(cf, r->host, r->dest, c->why,
		    sizeof c->why)) {
		case 1:
			break;
		case 0:
			snprintf(c->why, sizeof c->why, "destination is not "
			    "%.200s's", r->host);
			/* fall through */
		default:
			r->allow = 0;
			r->error = c->why;
		}
	}
	if (!r->allow) {
		netd_reset(c->fd);
		netd_log(r);
		goto out;
	}
	if (r->host && netd_inject_wanted(cf, r->host)) {
		live_add(c);
		netd_inject_serve(c, cf);
		c->up = -1;
		if (live_del(c)) {
			r->bytes_out = c->out;
			r->bytes_in = c->in;
			netd_log(r);
		}
		goto out;
	}
	if ((e = netd_connect_up(c, cf))) {
		r->error = e;
		netd_reset(c->fd);
		netd_log(r);
		goto out;
	}
	if (!cf->want_host) {
		peek_host(c);
		r->host = c->host[0] ? c->host : NULL;
	}
	live_add(c);
	if (netd_relay(c->fd, c->up, &c->out, &c->in) < 0) {
		/* One side broke: the other learns it as it would have
		 * without us in between. */
		netd_reset(c->fd);
		netd_reset(c->up);
	} else {
		close(c->fd);
		close(c->up);
	}
	c->up = -1;
	if (live_del(c)) {
		r->bytes_out = c->out;
		r->bytes_in = c->in;
		netd_log(r);
	}
out:
	if (c->up >= 0)
		close(c->up);
	netd_conf_put(cf);
	free(c);
	atomic_fetch_sub(&nconns, 1);
	return NULL;
}

void
netd_proxy_stop(void)
{
	struct conn *c;

	pthread_mutex_lock(&live.mu);
	live.stopped = 1;
	for (c = live.head; c; c = c->next) {
		c->r.bytes_out = __atomic_load_n(&c->out, __ATOMIC_RELAXED);
		c->r.bytes_in = __atomic_load_n(&c->in, __ATOMIC_RELAXED);
		c->r.error = "cut: sbx-netd stopped";
		netd_log(&c->r);
	}
	pthread_mutex_unlock(&live.mu);
}

/* --- the listener ----------------------------------------------------- */

static void *
accept_main(void *arg)
{
	pthread_attr_t at;
	pthread_t th;
	struct conn *c;
	long long warned = 0;
	int fd;

	(void)arg;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	/* A relay needs little stack; a thousand of them, little memory. */
	pthread_attr_setstacksize(&at, 256 << 10);
	for (;;) {
		fd = accept4(netd.tcp, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* EMFILE and the like: pause rather than spin. */
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(100000);
			continue;
		}
		if (atomic_load(&nconns) >= NETD_MAX_CONNS) {
			if (sbx_mono_ms() - warned > 60000) {
				warned = sbx_mono_ms();
				sbx_warn("%d connections at once: refusing more",
				    NETD_MAX_CONNS);
			}
			netd_reset(fd);
			continue;
		}
		c = sbx_xcalloc(1, sizeof *c);
		c->fd = fd;
		c->up = -1;
		atomic_fetch_add(&nconns, 1);
		if ((errno = pthread_create(&th, &at, conn_main, c)) != 0) {
			sbx_warn("cannot start a thread:");
			atomic_fetch_sub(&nconns, 1);
			netd_reset(fd);
			free(c);
		}
	}
	return NULL;
}

int
netd_proxy_start(struct sbx_err *err)
{
	struct sockaddr_in6 sa;
	socklen_t len = sizeof sa;
	pthread_t th;

	if (getsockname(netd.tcp, (struct sockaddr *)&sa, &len) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read the TCP "
		    "socket's port:");
	tcp_port = sa.sin6_port;
	if ((errno = pthread_create(&th, NULL, accept_main, NULL)) != 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
	pthread_detach(th);
	return 0;
}
