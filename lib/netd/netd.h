/* netd.h - the inside of sbx-netd: its configuration, the setup of the
 * sandbox's netns, the TCP proxy, the DNS forwarder and the log */
#ifndef NETD_H
#define NETD_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../net/net.h"
#include "../netd.h"

#define NETD_MAX_DNS 8
#define NETD_MAX_CONNS 1024
#define NETD_MAX_PORTS 64
#define NETD_MAX_UDP 256        /* UDP flows at once */
/* The sandbox's own addresses: what its programs see as theirs, and the
 * sources of the default routes that make every address reachable. */
#define NETD_SANDBOX_V4 "10.0.2.100"
#define NETD_SANDBOX_V6 "fd00::100"
/* The mark of what leaves the sandbox for us (its TCP and UDP to
 * addresses not its own, its DNS), and the routing table its rule sends
 * it to (setup.c). */
#define NETD_MARK 0x5b8
#define NETD_TABLE 0x5b8

/* One header injection (DIR/net.secret.json): host a domain or
 * "*.domain"; value, or template with ${e2b.secrets.NAME} in it. */
struct netd_inject {
	char *host, *name, *value, *template;
};

/* What DIR/net.json says, as one snapshot: SIGHUP makes a new one and
 * swaps it in, and each connection or query holds a ref to the one it
 * started with, so that it is judged by one version of the rules. */
struct netd_conf {
	char *id;                  /* the sandbox's, for the log */
	struct sbx_net_rules rules;
	int want_host;             /* a domain rule or an injection: sniff */
	struct netd_inject *inject;
	size_t ninject;
	struct sockaddr_storage dns[NETD_MAX_DNS];
	socklen_t dnslen[NETD_MAX_DNS];
	int ndns;
	int egress;                /* 0: "network":"deny", published ports
	                            * in and no way out */
	/* net.json's egress_proxy (and net.secret.json's password): allowed
	 * TCP is connected through it. */
	int proxy;
	struct sbx_net_proxy px;
	char *px_pass;             /* NULL: none */
	int refs;                  /* under netd.mu */
};

struct netd {
	const char *dir;
	pid_t pid;
	int pidfd;                 /* the sandbox's init */
	/* The listeners, in the sandbox's netns: TCP, DNS, other UDP
	 * (transparent); the binder's socket (setup.c); the raw sockets
	 * of the DNS answers, IPv4 and IPv6 (-1: no IPv6). */
	int tcp, udp, udpx, binder, raw4, raw6;
	int egress;                /* as the first net.json said */
	int inside;                /* the connector's socket (setup.c) */
	int injecting;             /* the CA and the TLS client are ready */
	pthread_mutex_t mu;
	struct netd_conf *conf;    /* the current snapshot */
};

extern struct netd netd;

/* conf.c */
int netd_conf_load(const char *dir, struct netd_conf **out,
    struct sbx_err *err);
/* A ref to the current snapshot; give it back with netd_conf_put. */
struct netd_conf *netd_conf_get(void);
void netd_conf_put(struct netd_conf *c);
/* Make c the current snapshot (taking its ref). */
void netd_conf_set(struct netd_conf *c);
/* "198.18.0.2" or "fd00::1" and the port, from a sockaddr_in(6). */
void netd_addr_fmt(const struct sockaddr *sa, char *buf, size_t n,
    int *port);

struct conn;
struct netd_logrec;
/* socks.c: a connection through the proxy of c to dest (RFC 1928
 * CONNECT, RFC 1929 user and password), within deadline (sbx_mono_ms);
 * *fd the connected socket; NULL, or why not ("socks5: ...") in why. */
const char *netd_socks_connect(const struct netd_conf *c,
    const struct sockaddr *dest, int *fd, long long deadline, char *why,
    size_t n);

/* setup.c: fork the child that will set the sandbox's netns up, before
 * the sandbox exists (before any thread: it joins a user namespace). */
int netd_setup_fork(struct sbx_err *err);
/* From that child (forked now if it was not), in the namespaces of pid
 * (whose ns files are userfd and netfd), set its netns up (with egress;
 * without, nothing is set up); the listeners come back in fds (tcp, udp,
 * udpx, binder, raw4, raw6; fds[5] stays -1 without IPv6). The child
 * stays there as the connector, whose socket is *inside. */
int netd_setup(int userfd, int netfd, int egress, int fds[6], int *inside,
    struct sbx_err *err);
/* A UDP socket of the sandbox's netns bound to self and connected to
 * peer (both of one family, AF_INET or AF_INET6), made by the binder; -1
 * with *why. Thread-safe. */
int netd_udp_bind(const struct sockaddr_storage *self,
    const struct sockaddr_storage *peer, const char **why);
/* A TCP connection to the sandbox's own 127.0.0.1:port (or [::1]:port
 * when nothing listens on the first), made by the connector; -1 with
 * *why. Thread-safe. */
int netd_inside_connect(unsigned port, const char **why);

/* ports.c: bind the control socket DIR/netd.sock, early: it is served
 * from netd_ports_start on. */
int netd_ctl_bind(struct sbx_err *err);
/* The published ports, on the host's 127.0.0.1, and the control socket
 * (bound now if it was not). Binds what net.json's "ports" says
 * (SBX_EX_FAIL "port M is in use"), writes back the ports as bound. */
int netd_ports_start(struct sbx_err *err);
/* Read DIR/net.json again (SIGHUP, or the control socket's "reload");
 * -1 with err, the rules as they were. Thread-safe. */
int netd_reload(struct sbx_err *err);

/* proxy.c, dns.c, udp.c: start the thread that serves each listener. */
int netd_proxy_start(struct sbx_err *err);
int netd_dns_start(struct sbx_err *err);
int netd_udp_start(struct sbx_err *err);
/* Log the UDP flows still open, as cut, before we exit. */
void netd_udp_stop(void);
/* proxy.c: whether dest is one of the host's addresses (for
 * sbx_net_protected). Thread-safe. */
int netd_is_host(const struct sockaddr *dest);
/* Connect c->up to c->dest within 10 s; NULL, or why not. */
const char *netd_connect_up(struct conn *c,
    const struct netd_conf *cf);

/* resolve.c: whether dest's address is one of host's, as the resolvers
 * of cf answer for its family now (A or AAAA; an answer that names it is
 * kept for its TTL, 5 minutes at most): 1 yes, 0 no, -1 no answer (why:
 * "cannot resolve HOST: ..."). Thread-safe. */
int netd_resolve_has(const struct netd_conf *cf, const char *host,
    const struct sockaddr *dest, char *why, size_t whyn);
/* Forget the answers kept (the resolvers may have changed). */
void netd_resolve_flush(void);

/* ca.c: the sandbox's CA (DIR/ca.key, DIR/ca.crt), made at the first
 * start with injection and put into the sandbox's trust store (DIR/upper
 * over the image, net.json "image"; without "image", a container's, the
 * docker backend does it); then leaves signed for each host. */
int netd_ca_init(const char *dir, struct sbx_err *err);
/* A server context with a leaf for host (cached), ALPN http/1.1 only;
 * NULL without a CA or on failure. A ref: give it back with
 * SSL_CTX_free. */
struct ssl_ctx_st *netd_ca_server(const char *host);

/* inject.c: the hosts whose requests get headers (TLS terminated). */
int netd_inject_init(struct sbx_err *err);
/* Whether an injection of cf names host. */
int netd_inject_wanted(const struct netd_conf *cf, const char *host);
/* Serve an allowed connection c to an injected host: its bytes counted
 * in c, its verdict and error in c->r; closes c's sockets. */
void netd_inject_serve(struct conn *c, struct netd_conf *cf);
/* proxy.c: relay a and b both ways until both ends are done (their fds
 * made non-blocking); a_to_b and b_to_a count the bytes. -1 when a side
 * broke: the caller resets both. */
int netd_relay(int a, int b, uint64_t *a_to_b, uint64_t *b_to_a);
/* Close with a RST, as a refused or broken connection looks. */
void netd_reset(int fd);
/* Log the connections still relayed, as cut, before we exit. */
void netd_proxy_stop(void);

/* log.c: DIR/net.log, one JSON line per decision. */
int netd_log_open(const char *dir, struct sbx_err *err);
struct netd_logrec {
	const char *sandbox;
	const char *proto;         /* "tcp", "tcp-in", "dns", "udp" */
	const struct sockaddr *dest;
	const char *host;          /* or NULL */
	int allow;
	int inject;                /* verdict "inject" (when allowed) */
	uint64_t bytes_out, bytes_in;
	const char *error;         /* or NULL */
};
void netd_log(const struct netd_logrec *r);

/* One connection from the sandbox (proxy.c, inject.c). */
struct conn {
	int fd, up;             /* the sandbox's end, the upstream's */
	struct sockaddr_storage dest;
	char host[256];
	uint64_t out, in;       /* bytes sandbox->upstream, and back
				 * (atomic: netd_proxy_stop reads them) */
	struct netd_logrec r;   /* its log line, once relaying */
	char why[256];          /* r.error, when it is made up */
	struct conn *prev, *next; /* in live, while relaying */
};

#endif
