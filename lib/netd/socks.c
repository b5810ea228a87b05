/* socks.c - an allowed connection through the user's SOCKS5 proxy
 * (--egress-proxy): RFC 1928 CONNECT to the original destination's
 * address, with RFC 1929 user and password when a user is given.
 *
 * The address, not the host name sniffed: the verdict was taken on where
 * the sandbox connected, and the connection goes there, as it would
 * without a proxy. A name would let the proxy's resolver pick another
 * address than the one the sandbox resolved (through our DNS) and was
 * judged on, and most connections have no name (SSH, a server-first
 * protocol, TLS without SNI). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netd.h"

/* Wait for fd to be ready for ev until deadline: 0, or -1 with errno
 * (ETIMEDOUT). */
static int
wait_fd(int fd, short ev, long long deadline)
{
	struct pollfd p = {fd, ev, 0};
	long long left;
	int r;

	for (;;) {
		if ((left = deadline - sbx_mono_ms()) <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if ((r = poll(&p, 1, (int)left)) > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

static int
send_all(int fd, const unsigned char *b, size_t n, long long deadline)
{
	ssize_t w;

	while (n) {
		if ((w = send(fd, b, n, MSG_NOSIGNAL)) > 0) {
			b += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			if (wait_fd(fd, POLLOUT, deadline) < 0)
				return -1;
		} else if (w < 0 && errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

/* Exactly n bytes; a close before them is ECONNRESET. */
static int
recv_all(int fd, unsigned char *b, size_t n, long long deadline)
{
	ssize_t r;

	while (n) {
		if ((r = recv(fd, b, n, 0)) > 0) {
			b += r;
			n -= (size_t)r;
		} else if (r == 0) {
			errno = ECONNRESET;
			return -1;
		} else if (errno == EAGAIN) {
			if (wait_fd(fd, POLLIN, deadline) < 0)
				return -1;
		} else if (errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

/* The proxy's address: the user's choice, so connected to whatever it
 * is (loopback too), outside the rules. */
static int
proxy_dial(const struct netd_conf *c, long long deadline, char *why,
    size_t n)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_NUMERICSERV}, *ai, *a;
	int fd = -1, r, e = 0;
	socklen_t elen = sizeof e;

	if ((r = getaddrinfo(c->px.host, c->px.port, &hints, &ai)) != 0) {
		snprintf(why, n, "socks5: cannot resolve '%s': %s", c->px.host,
		    gai_strerror(r));
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 ||
		    (errno == EINPROGRESS && wait_fd(fd, POLLOUT,
		    deadline) == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR,
		    &e, &elen) == 0 && !(errno = e)))
			break;
		e = errno;
		close(fd);
		fd = -1;
		errno = e;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		snprintf(why, n, "socks5: cannot connect to the proxy %s:%s: "
		    "%s", c->px.host, c->px.port, strerror(errno));
	return fd;
}

static const char *
reply_text(unsigned rep)
{
	static const char *const t[] = {"succeeded",
	    "general SOCKS server failure", "connection not allowed by "
	    "ruleset", "network unreachable", "host unreachable",
	    "connection refused", "TTL expired", "command not supported",
	    "address type not supported"};

	return rep < sizeof t / sizeof t[0] ? t[rep] : "unknown reply";
}

const char *
netd_socks_connect(const struct netd_conf *c, const struct sockaddr *dest,
    int *out, long long deadline, char *why, size_t n)
{
	const struct sockaddr_in *d4 = (const struct sockaddr_in *)dest;
	const struct sockaddr_in6 *d6 = (const struct sockaddr_in6 *)dest;
	unsigned char b[3 + 2 * 256], *p;
	size_t ulen = strlen(c->px.user), plen;
	int fd;

	*out = -1;
	if ((fd = proxy_dial(c, deadline, why, n)) < 0)
		return why;
	/* Greeting: only user/password when there is a user, so that a
	 * proxy cannot take the connection without them. */
	b[0] = 5;
	b[1] = 1;
	b[2] = ulen ? 2 : 0;
	if (send_all(fd, b, 3, deadline) < 0 || recv_all(fd, b, 2,
	    deadline) < 0)
		goto io;
	if (b[0] != 5 || b[1] != (ulen ? 2 : 0)) {
		snprintf(why, n, "socks5: the proxy %s", b[0] != 5 ? "does "
		    "not speak SOCKS5" : "accepts none of our authentication "
		    "methods");
		goto fail;
	}
	if (ulen) {
		plen = c->px_pass ? strlen(c->px_pass) : 0;
		p = b;
		*p++ = 1;
		*p++ = (unsigned char)ulen;
		memcpy(p, c->px.user, ulen);
		p += ulen;
		*p++ = (unsigned char)plen;
		memcpy(p, c->px_pass, plen);
		p += plen;
		if (send_all(fd, b, (size_t)(p - b), deadline) < 0) {
			explicit_bzero(b, sizeof b);
			goto io;
		}
		explicit_bzero(b, sizeof b);
		if (recv_all(fd, b, 2, deadline) < 0)
			goto io;
		if (b[1] != 0) {
			snprintf(why, n, "socks5: the proxy refused user '%s'",
			    c->px.user);
			goto fail;
		}
	}
	p = b;
	*p++ = 5;
	*p++ = 1;               /* CONNECT */
	*p++ = 0;
	if (dest->sa_family == AF_INET) {
		*p++ = 1;
		memcpy(p, &d4->sin_addr, 4);
		p += 4;
		memcpy(p, &d4->sin_port, 2);
	} else {
		*p++ = 4;
		memcpy(p, &d6->sin6_addr, 16);
		p += 16;
		memcpy(p, &d6->sin6_port, 2);
	}
	p += 2;
	if (send_all(fd, b, (size_t)(p - b), deadline) < 0 ||
	    recv_all(fd, b, 5, deadline) < 0)
		goto io;
	if (b[0] != 5 || b[1] != 0) {
		snprintf(why, n, "socks5: %s", b[0] != 5 ? "a malformed reply" :
		    reply_text(b[1]));
		goto fail;
	}
	/* The bound address, which we do not need: 4 or 16 bytes, or a
	 * name's length and the rest of it; one byte of it came already. */
	switch (b[3]) {
	case 1:
		plen = 3 + 2;
		break;
	case 4:
		plen = 15 + 2;
		break;
	case 3:
		plen = (size_t)b[4] + 2;
		break;
	default:
		snprintf(why, n, "socks5: a malformed reply");
		goto fail;
	}
	if (recv_all(fd, b, plen, deadline) < 0)
		goto io;
	*out = fd;
	return NULL;
io:
	snprintf(why, n, "socks5: %s", errno == ETIMEDOUT ? "the proxy did "
	    "not answer in time" : strerror(errno));
fail:
	close(fd);
	return why;
}
