/* setup.c - the sandbox's netns set up from a child that joins it
 * (forked before the sandbox exists, it is sent the namespaces): lo up
 * with the sandbox's addresses and default routes, the nftables ruleset
 * that hands its TCP, DNS and other UDP to us, and the listeners, which
 * come back to the parent (in the host's namespaces) over a socketpair.
 * The child then stays there, as the connector: the published ports'
 * connections into the sandbox are made by it and handed over the same
 * socketpair. A second child, the binder, makes the sockets that answer
 * the sandbox's UDP flows (udp.c), over a socketpair of its own, so that
 * a slow connect of the connector never holds them up. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/fib_rules.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../msg.h"
#include "netd.h"

enum { MSG_OK, MSG_ERR, MSG_CONNECT, MSG_BIND, MSG_NS };

#define INSIDE_CONNECT_MS 3000

struct nlreq {
	struct nlmsghdr h;
	union {
		struct ifinfomsg i;
		struct ifaddrmsg a;
		struct rtmsg r;
		struct fib_rule_hdr f;
	} u;
	char attrs[128];
};

static void
nl_attr(struct nlreq *q, int type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)q +
	    NLMSG_ALIGN(q->h.nlmsg_len));

	/* The attributes are ours and few: attrs has room for them all. */
	a->rta_type = (unsigned short)type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	q->h.nlmsg_len = NLMSG_ALIGN(q->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Send one request and wait for its ack; errno from the kernel. */
static int
nl_talk(int fd, struct nlreq *q)
{
	static unsigned seq;
	char buf[4096];
	struct nlmsghdr *h;
	struct nlmsgerr *e;
	ssize_t n;

	q->h.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	q->h.nlmsg_seq = ++seq;
	if (send(fd, q, q->h.nlmsg_len, 0) < 0)
		return -1;
	for (;;) {
		if ((n = recv(fd, buf, sizeof buf, 0)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		    h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq || h->nlmsg_type != NLMSG_ERROR)
				continue;
			e = NLMSG_DATA(h);
			if (e->error == 0)
				return 0;
			errno = -e->error;
			return -1;
		}
	}
}

static void
nl_init(struct nlreq *q, int type, int flags, size_t len)
{
	memset(q, 0, sizeof *q);
	q->h.nlmsg_type = (unsigned short)type;
	q->h.nlmsg_flags = (unsigned short)flags;
	q->h.nlmsg_len = (unsigned)NLMSG_LENGTH(len);
}

static int
nl_addr(int fd, int ifindex, int family, const char *text,
    struct sbx_err *err)
{
	unsigned char a[16];
	size_t alen = family == AF_INET ? 4 : 16;
	struct nlreq q;

	inet_pton(family, text, a);
	nl_init(&q, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE,
	    sizeof q.u.a);
	q.u.a.ifa_family = (unsigned char)family;
	q.u.a.ifa_prefixlen = (unsigned char)(alen * 8);
	q.u.a.ifa_scope = RT_SCOPE_UNIVERSE;
	q.u.a.ifa_index = (unsigned)ifindex;
	/* On lo there is no one to detect a duplicate with; and a
	 * tentative address could not be a source at once. */
	q.u.a.ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;
	nl_attr(&q, IFA_LOCAL, a, alen);
	nl_attr(&q, IFA_ADDRESS, a, alen);
	if (nl_talk(fd, &q) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot add %s to lo:",
		    text);
	return 0;
}

static int
nl_route(int fd, int ifindex, int family, const char *src,
    struct sbx_err *err)
{
	unsigned char a[16];
	size_t alen = family == AF_INET ? 4 : 16;
	uint32_t oif = (uint32_t)ifindex;
	struct nlreq q;

	inet_pton(family, src, a);
	nl_init(&q, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE,
	    sizeof q.u.r);
	q.u.r.rtm_family = (unsigned char)family;
	q.u.r.rtm_table = RT_TABLE_MAIN;
	q.u.r.rtm_protocol = RTPROT_BOOT;
	q.u.r.rtm_scope = RT_SCOPE_LINK;
	q.u.r.rtm_type = RTN_UNICAST;
	nl_attr(&q, RTA_OIF, &oif, sizeof oif);
	nl_attr(&q, RTA_PREFSRC, a, alen);
	if (nl_talk(fd, &q) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot add the default "
		    "route via %s:", src);
	return 0;
}

/* What the ruleset marks as it leaves the sandbox is routed back in (a
 * local route for every address, in a table of its own) so that TPROXY
 * in prerouting hands it to our listeners with its destination intact. */
static int
nl_mark_route(int fd, int ifindex, int family, struct sbx_err *err)
{
	uint32_t oif = (uint32_t)ifindex, mark = NETD_MARK,
	    table = NETD_TABLE, prio = 100;
	struct nlreq q;

	nl_init(&q, RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, sizeof q.u.f);
	q.u.f.family = (unsigned char)family;
	q.u.f.action = FR_ACT_TO_TBL;
	nl_attr(&q, FRA_PRIORITY, &prio, sizeof prio);
	nl_attr(&q, FRA_FWMARK, &mark, sizeof mark);
	nl_attr(&q, FRA_TABLE, &table, sizeof table);
	if (nl_talk(fd, &q) < 0 && errno != EEXIST)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot add the "
		    "routing rule of the mark:");
	nl_init(&q, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE,
	    sizeof q.u.r);
	q.u.r.rtm_family = (unsigned char)family;
	q.u.r.rtm_table = RT_TABLE_UNSPEC;
	q.u.r.rtm_protocol = RTPROT_BOOT;
	q.u.r.rtm_scope = RT_SCOPE_HOST;
	q.u.r.rtm_type = RTN_LOCAL;
	nl_attr(&q, RTA_TABLE, &table, sizeof table);
	nl_attr(&q, RTA_OIF, &oif, sizeof oif);
	if (nl_talk(fd, &q) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot add the route "
		    "of the mark:");
	return 0;
}

/* Whether the netns has IPv6: Docker turns it off in a container's
 * (NetworkMode none), where lo then refuses a v6 address. Its programs
 * are left as Docker made them, with IPv4 alone; /proc/sys/net is the
 * namespace of whoever reads it, ours by now. */
static int
ipv6_on(void)
{
	char c = '0';
	int fd = open("/proc/sys/net/ipv6/conf/lo/disable_ipv6", O_RDONLY |
	    O_CLOEXEC);

	if (fd < 0)
		return 0; /* no IPv6 in this kernel */
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c != '1';
}

static int
net_links(struct sbx_err *err)
{
	struct nlreq q;
	int fd, ifindex, rc = -1;
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};

	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
	    NETLINK_ROUTE)) < 0 || bind(fd, (struct sockaddr *)&sa,
	    sizeof sa) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open rtnetlink:");
		goto out;
	}
	if (!(ifindex = (int)if_nametoindex("lo"))) {
		sbx_err_set(err, SBX_EX_FAIL, "no lo in the sandbox:");
		goto out;
	}
	nl_init(&q, RTM_NEWLINK, 0, sizeof q.u.i);
	q.u.i.ifi_index = ifindex;
	q.u.i.ifi_flags = IFF_UP;
	q.u.i.ifi_change = IFF_UP;
	if (nl_talk(fd, &q) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot bring lo up:");
		goto out;
	}
	if (nl_addr(fd, ifindex, AF_INET, NETD_SANDBOX_V4, err) < 0 ||
	    nl_route(fd, ifindex, AF_INET, NETD_SANDBOX_V4, err) < 0 ||
	    nl_mark_route(fd, ifindex, AF_INET, err) < 0)
		goto out;
	if (ipv6_on() && (nl_addr(fd, ifindex, AF_INET6, NETD_SANDBOX_V6,
	    err) < 0 || nl_route(fd, ifindex, AF_INET6, NETD_SANDBOX_V6, err) < 0 ||
	    nl_mark_route(fd, ifindex, AF_INET6, err) < 0))
		goto out;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The ruleset of i19.md: what leaves the sandbox for an address not its
 * own, TCP and UDP, and all its DNS, is marked as it leaves (mark_out, a
 * route chain: the mark reroutes it by nl_mark_route's rule to lo, as
 * local) and, as it comes back in, handed to our transparent listeners
 * (tproxy_in) with its destination untouched; all else that leaves is
 * dropped (a tproxy goes on to the next rule, which could hand the packet
 * to another listener: hence accept). In nft's words:
 *
 *	table inet sbx {
 *		chain mark_out {
 *			type route hook output priority -150; policy accept;
 *			udp dport 53 meta mark set MARK
 *			fib daddr type local return
 *			meta l4proto tcp meta mark set MARK
 *			meta l4proto udp meta mark set MARK
 *		}
 *		chain tproxy_in {
 *			type filter hook prerouting priority -150; policy accept;
 *			meta mark MARK udp dport 53 tproxy to :DNS accept
 *			meta mark MARK meta l4proto udp tproxy to :UDP accept
 *			meta mark MARK meta l4proto tcp tproxy to :TCP accept
 *		}
 *		chain filter_out {
 *			type filter hook output priority 0; policy drop;
 *			fib daddr type local accept
 *			meta mark MARK accept
 *		}
 *	}
 *
 * TPROXY, not NAT: a NAT chain brings conntrack and the NAT engine into
 * the netns, whose hooks (eight for inet) are registered at every
 * sandbox's create and turn kernel static keys on, patching the kernel's
 * text on every CPU: milliseconds, on the create's path. The proxy has a
 * connection's destination as its local address, the DNS forwarder a
 * query's as its packet info, and answers from there, port 53, through a
 * raw socket of the netns (raw_listeners): a socket bound there could
 * take port 53 from the sandbox's own servers, and a mangled source port
 * is not for a netns not the host's (EPERM).
 *
 * built here with libnftnl as the expressions nft would make of it (nft
 * --debug=netlink lists them), in one netlink batch: libnftables' parser
 * and caches cost milliseconds at every sandbox's create, and it brings
 * three more shared libraries. One transaction that first empties the
 * table: a helper started again for the same sandbox replaces its
 * predecessor's ports; until it commits, the namespace has no rule and
 * no route but lo's (net_links runs first, and the default routes lead
 * to lo). */

#define NFT_TABLE "sbx"

/* A netlink batch being built in a buffer of ours. Our messages are a
 * few hundred bytes each: room is checked before each one, with
 * NFT_MSG_ROOM to spare, as libnftnl writes without bounds. */
#define NFT_BUF 16384
#define NFT_MSG_ROOM 2048

struct nft_batch {
	char buf[NFT_BUF];
	size_t len;
	uint32_t seq, first;
	int full;
};

/* The next message's header, or NULL (b->full) when there is no room. */
static struct nlmsghdr *
nft_msg(struct nft_batch *b, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *h;

	if (b->len + NFT_MSG_ROOM > sizeof b->buf) {
		b->full = 1;
		return NULL;
	}
	h = nftnl_nlmsg_build_hdr(b->buf + b->len, type, NFPROTO_INET,
	    flags | NLM_F_ACK, b->seq++);
	return h;
}

static void
nft_end(struct nft_batch *b, struct nlmsghdr *h)
{
	b->len += NLMSG_ALIGN(h->nlmsg_len);
}

static void
nft_table(struct nft_batch *b, uint16_t type, uint16_t flags)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nlmsghdr *h;

	if (!t) {
		b->full = 1;
		return;
	}
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, NFT_TABLE);
	if ((h = nft_msg(b, type, flags))) {
		nftnl_table_nlmsg_build_payload(h, t);
		nft_end(b, h);
	}
	nftnl_table_free(t);
}

/* A base chain: its type ("nat", "filter", "route"), hook, priority and
 * policy. */
static void
nft_chain(struct nft_batch *b, const char *name, const char *type,
    uint32_t hook, int32_t prio, uint32_t policy)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nlmsghdr *h;

	if (!c) {
		b->full = 1;
		return;
	}
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NFT_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
	if ((h = nft_msg(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE))) {
		nftnl_chain_nlmsg_build_payload(h, c);
		nft_end(b, h);
	}
	nftnl_chain_free(c);
}

/* A rule is made of steps, as nft makes it of expressions: each loads
 * register 1, compares it or acts on it. */
static struct nftnl_rule *
rule_new(const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	if (r) {
		nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NFT_TABLE);
		nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	}
	return r;
}

/* An expression of name with its u32 attributes (attr, value pairs,
 * ended by -1), added to r. */
static struct nftnl_expr *
step(struct nftnl_rule *r, const char *name, ...)
{
	struct nftnl_expr *e;
	va_list ap;
	int attr;

	if (!r || !(e = nftnl_expr_alloc(name)))
		return NULL;
	va_start(ap, name);
	while ((attr = va_arg(ap, int)) >= 0)
		nftnl_expr_set_u32(e, (uint16_t)attr, va_arg(ap, uint32_t));
	va_end(ap);
	nftnl_rule_add_expr(r, e);
	return e;
}

/* meta KEY: meta l4proto, meta mark */
static void
load_meta(struct nftnl_rule *r, uint32_t key)
{
	step(r, "meta", NFTNL_EXPR_META_KEY, key, NFTNL_EXPR_META_DREG,
	    (uint32_t)NFT_REG_1, -1);
}

/* th dport: the destination port of TCP or UDP (after a l4proto
 * match), in network order. */
static void
load_dport(struct nftnl_rule *r)
{
	step(r, "payload", NFTNL_EXPR_PAYLOAD_DREG, (uint32_t)NFT_REG_1,
	    NFTNL_EXPR_PAYLOAD_BASE, (uint32_t)NFT_PAYLOAD_TRANSPORT_HEADER,
	    NFTNL_EXPR_PAYLOAD_OFFSET, 2u, NFTNL_EXPR_PAYLOAD_LEN, 2u, -1);
}

/* fib daddr type: RTN_LOCAL for the netns' own addresses. */
static void
load_fib_daddr_type(struct nftnl_rule *r)
{
	step(r, "fib", NFTNL_EXPR_FIB_DREG, (uint32_t)NFT_REG_1,
	    NFTNL_EXPR_FIB_RESULT, (uint32_t)NFT_FIB_RESULT_ADDRTYPE,
	    NFTNL_EXPR_FIB_FLAGS, (uint32_t)NFTA_FIB_F_DADDR, -1);
}

/* Register 1 compared (op: NFT_CMP_EQ, NFT_CMP_NEQ) with len bytes of
 * v: 1 for a l4proto, 2 for a port (network order), 4 for a mark or a
 * fib type. */
static void
cmp(struct nftnl_rule *r, uint32_t op, const void *v, uint32_t len)
{
	struct nftnl_expr *e = step(r, "cmp", NFTNL_EXPR_CMP_SREG,
	    (uint32_t)NFT_REG_1, NFTNL_EXPR_CMP_OP, op, -1);

	if (e)
		nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, v, len);
}

static void
cmp_l4proto(struct nftnl_rule *r, uint32_t op, uint8_t proto)
{
	cmp(r, op, &proto, 1);
}

static void
cmp_port(struct nftnl_rule *r, uint32_t op, unsigned port)
{
	uint16_t p = htons((uint16_t)port);

	cmp(r, op, &p, 2);
}

static void
cmp_u32(struct nftnl_rule *r, uint32_t op, uint32_t v)
{
	cmp(r, op, &v, 4);
}

/* meta l4proto P: the step most rules start with. */
static void
is_l4proto(struct nftnl_rule *r, uint8_t proto)
{
	load_meta(r, NFT_META_L4PROTO);
	cmp_l4proto(r, NFT_CMP_EQ, proto);
}

/* Register 1 := a port, in network order (for redirect, tproxy). */
static void
imm_port(struct nftnl_rule *r, unsigned port)
{
	uint16_t p = htons((uint16_t)port);
	struct nftnl_expr *e = step(r, "immediate", NFTNL_EXPR_IMM_DREG,
	    (uint32_t)NFT_REG_1, -1);

	if (e)
		nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &p, 2);
}

/* meta mark set MARK */
static void
set_mark(struct nftnl_rule *r, uint32_t mark)
{
	struct nftnl_expr *e = step(r, "immediate", NFTNL_EXPR_IMM_DREG,
	    (uint32_t)NFT_REG_1, -1);

	if (e)
		nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &mark, 4);
	step(r, "meta", NFTNL_EXPR_META_KEY, (uint32_t)NFT_META_MARK,
	    NFTNL_EXPR_META_SREG, (uint32_t)NFT_REG_1, -1);
}

/* tproxy to :port (either family: the table is inet) */
static void
tproxy(struct nftnl_rule *r, unsigned port)
{
	imm_port(r, port);
	step(r, "tproxy", NFTNL_EXPR_TPROXY_FAMILY, (uint32_t)NFPROTO_UNSPEC,
	    NFTNL_EXPR_TPROXY_REG_PORT, (uint32_t)NFT_REG_1, -1);
}

/* accept, return, drop */
static void
verdict(struct nftnl_rule *r, int v)
{
	step(r, "immediate", NFTNL_EXPR_IMM_DREG, (uint32_t)NFT_REG_VERDICT,
	    NFTNL_EXPR_IMM_VERDICT, (uint32_t)v, -1);
}

/* Appended to its chain; r freed. */
static void
rule_add(struct nft_batch *b, struct nftnl_rule *r)
{
	struct nlmsghdr *h;

	if (!r) {
		b->full = 1;
		return;
	}
	if ((h = nft_msg(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND))) {
		nftnl_rule_nlmsg_build_payload(h, r);
		nft_end(b, h);
	}
	nftnl_rule_free(r);
}

static void
ruleset(struct nft_batch *b, unsigned tcp_port, unsigned dns_port,
    unsigned udp_port)
{
	static const uint8_t l4[] = {IPPROTO_TCP, IPPROTO_UDP};
	struct nftnl_rule *r;
	size_t i;

	nft_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE);
	nft_table(b, NFT_MSG_DELTABLE, 0);
	nft_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE);
	nft_chain(b, "mark_out", "route", NF_INET_LOCAL_OUT, -150, NF_ACCEPT);
	nft_chain(b, "tproxy_in", "filter", NF_INET_PRE_ROUTING, -150,
	    NF_ACCEPT);
	nft_chain(b, "filter_out", "filter", NF_INET_LOCAL_OUT, 0, NF_DROP);

	/* mark_out: udp dport 53 meta mark set MARK */
	r = rule_new("mark_out");
	is_l4proto(r, IPPROTO_UDP);
	load_dport(r);
	cmp_port(r, NFT_CMP_EQ, 53);
	set_mark(r, NETD_MARK);
	rule_add(b, r);
	/* mark_out: fib daddr type local return */
	r = rule_new("mark_out");
	load_fib_daddr_type(r);
	cmp_u32(r, NFT_CMP_EQ, RTN_LOCAL);
	verdict(r, NFT_RETURN);
	rule_add(b, r);
	/* mark_out: meta l4proto tcp (udp) meta mark set MARK */
	for (i = 0; i < sizeof l4; i++) {
		r = rule_new("mark_out");
		is_l4proto(r, l4[i]);
		set_mark(r, NETD_MARK);
		rule_add(b, r);
	}

	/* tproxy_in: meta mark MARK udp dport 53 tproxy to :DNS accept */
	r = rule_new("tproxy_in");
	load_meta(r, NFT_META_MARK);
	cmp_u32(r, NFT_CMP_EQ, NETD_MARK);
	is_l4proto(r, IPPROTO_UDP);
	load_dport(r);
	cmp_port(r, NFT_CMP_EQ, 53);
	tproxy(r, dns_port);
	verdict(r, NF_ACCEPT);
	rule_add(b, r);
	/* tproxy_in: meta mark MARK meta l4proto udp (tcp) tproxy to :UDP
	 * (:TCP) accept */
	for (i = 0; i < sizeof l4; i++) {
		r = rule_new("tproxy_in");
		load_meta(r, NFT_META_MARK);
		cmp_u32(r, NFT_CMP_EQ, NETD_MARK);
		is_l4proto(r, l4[i]);
		tproxy(r, l4[i] == IPPROTO_TCP ? tcp_port : udp_port);
		verdict(r, NF_ACCEPT);
		rule_add(b, r);
	}

	/* filter_out: fib daddr type local accept */
	r = rule_new("filter_out");
	load_fib_daddr_type(r);
	cmp_u32(r, NFT_CMP_EQ, RTN_LOCAL);
	verdict(r, NF_ACCEPT);
	rule_add(b, r);
	/* filter_out: meta mark MARK accept */
	r = rule_new("filter_out");
	load_meta(r, NFT_META_MARK);
	cmp_u32(r, NFT_CMP_EQ, NETD_MARK);
	verdict(r, NF_ACCEPT);
	rule_add(b, r);
}

/* The batch's acks: 0 when every message of it was, else -1 with errno
 * from the first that was not (the kernel then applied none). */
static int
nft_acks(int fd, const struct nft_batch *b)
{
	char buf[8192];
	struct nlmsghdr *h;
	struct nlmsgerr *e;
	uint32_t acked = 0, want = b->seq - b->first - 2;
	ssize_t n;

	while (acked < want) {
		if ((n = recv(fd, buf, sizeof buf, 0)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		    h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			e = NLMSG_DATA(h);
			if (e->error) {
				errno = -e->error;
				return -1;
			}
			acked++;
		}
	}
	return 0;
}

/* The ruleset loaded; its nfnetlink socket in *nlfd, which the caller
 * closes once the sandbox is not waiting for it: the close of an
 * nfnetlink socket waits for nf_tables' pending destroy work, an RCU
 * grace period (9 ms of a 14 ms create here), whenever some ruleset was
 * changed or went lately, anywhere on the machine. */
static int
net_rules(unsigned tcp_port, unsigned dns_port, unsigned udp_port,
    int *nlfd, struct sbx_err *err)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	struct nft_batch *b = sbx_xmalloc(sizeof *b);
	struct nlmsghdr *h;
	int fd = -1, rc = -1;

	b->len = 0;
	b->full = 0;
	b->seq = b->first = 1;
	h = nftnl_batch_begin(b->buf, b->seq++);
	nft_end(b, h);
	ruleset(b, tcp_port, dns_port, udp_port);
	if (!b->full && b->len + NFT_MSG_ROOM <= sizeof b->buf) {
		h = nftnl_batch_end(b->buf + b->len, b->seq++);
		nft_end(b, h);
	} else {
		sbx_err_set(err, SBX_EX_FAIL, "cannot build the nftables "
		    "ruleset: too large");
		goto out;
	}
	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
	    NETLINK_NETFILTER)) < 0 || bind(fd, (struct sockaddr *)&sa,
	    sizeof sa) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open nfnetlink:");
		goto out;
	}
	if (send(fd, b->buf, b->len, 0) != (ssize_t)b->len ||
	    nft_acks(fd, b) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot load the nftables "
		    "ruleset:");
		goto out;
	}
	*nlfd = fd;
	fd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(b);
	return rc;
}

/* A dual-stack socket on [::]:0 and the port it got; transparent, for
 * TPROXY to hand it what was meant for others, and for the DNS answers to
 * come from where the queries went. */
static int
listener(int type, unsigned *port, struct sbx_err *err)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
	socklen_t len = sizeof sa;
	int fd, off = 0, on = 1;

	if ((fd = socket(AF_INET6, type | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) < 0 ||
	    setsockopt(fd, SOL_IP, IP_TRANSPARENT, &on, sizeof on) < 0 ||
	    (type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR,
	    &on, sizeof on) < 0) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    (type == SOCK_STREAM && listen(fd, SOMAXCONN) < 0) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open the %s socket:",
		    type == SOCK_STREAM ? "TCP" : "DNS");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin6_port);
	return fd;
}

/* The transparent UDP socket TPROXY hands the flows to: each datagram
 * comes with the destination the sandbox sent it to. Dual-stack. */
static int
udp_listener(unsigned *port, struct sbx_err *err)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
	socklen_t len = sizeof sa;
	int fd, off = 0, on = 1;

	if ((fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) < 0 ||
	    setsockopt(fd, SOL_IP, IP_TRANSPARENT, &on, sizeof on) < 0 ||
	    setsockopt(fd, SOL_IP, IP_RECVORIGDSTADDR, &on, sizeof on) < 0 ||
	    setsockopt(fd, SOL_IPV6, IPV6_RECVORIGDSTADDR, &on,
	    sizeof on) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open the UDP socket:");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin6_port);
	return fd;
}

/* The raw sockets (IPv4, IPv6: -1 without IPv6) the DNS answers are
 * sent through, whole packets made by dns.c; they receive nothing. */
static int
raw_listeners(int fd[2], struct sbx_err *err)
{
	fd[0] = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	fd[1] = ipv6_on() ? socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC,
	    IPPROTO_RAW) : -1;
	if (fd[0] < 0 || (fd[1] < 0 && ipv6_on())) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open a raw socket:");
		if (fd[0] >= 0)
			close(fd[0]);
		return -1;
	}
	return 0;
}

/* Whether fd is the user namespace we are in already: joining it again
 * is EINVAL (the sandbox of real root shares ours). */
static int
same_userns(int fd)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* A connection to addr:port of the sandbox's own, within
 * INSIDE_CONNECT_MS; -1 with errno. */
static int
connect_local(int family, unsigned port)
{
	struct sockaddr_in a4 = {.sin_family = AF_INET,
	    .sin_port = htons((uint16_t)port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
	    .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct pollfd p;
	int fd, e = 0, r;
	socklen_t elen = sizeof e;

	if ((fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) < 0)
		return -1;
	r = family == AF_INET ? connect(fd, (struct sockaddr *)&a4,
	    sizeof a4) : connect(fd, (struct sockaddr *)&a6, sizeof a6);
	if (r < 0 && errno != EINPROGRESS)
		goto fail;
	if (r < 0) {
		p = (struct pollfd){fd, POLLOUT, 0};
		while ((r = poll(&p, 1, INSIDE_CONNECT_MS)) < 0 &&
		    errno == EINTR)
			;
		if (r == 0)
			errno = ETIMEDOUT;
		if (r <= 0)
			goto fail;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0)
			goto fail;
		if (e) {
			errno = e;
			goto fail;
		}
	}
	return fd;
fail:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* The connector: one connection at a time, as the parent asks (a u32
 * port), back with its fd or why not. Ends with the parent. */
static void
connector(int sock)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_msg m;
	uint32_t port;
	int fd;

	while (sbx_msg_recv(sock, &m) > 0) {
		if (m.type != MSG_CONNECT || sbx_msg_get_u32(&m, &port) < 0) {
			sbx_msg_release(&m);
			break;
		}
		sbx_msg_release(&m);
		fd = connect_local(AF_INET, port);
		/* A server on [::1] alone. */
		if (fd < 0 && errno == ECONNREFUSED)
			fd = connect_local(AF_INET6, port);
		if (fd >= 0) {
			sbx_msg_send(sock, MSG_OK, NULL, 0, &fd, 1);
			close(fd);
		} else {
			b.len = 0;
			sbx_msg_put_u32(&b, (uint32_t)errno);
			sbx_msg_send(sock, MSG_ERR, b.data, b.len, NULL, 0);
		}
	}
	_exit(0);
}

/* A socket of the sandbox's netns bound to self (a destination the
 * sandbox sent a datagram to, not ours: transparent) and connected to
 * peer (the sandbox's socket that sent it): its answers come from where
 * the sandbox expects them, and TPROXY hands the flow's next datagrams
 * to it straight. -1 with errno. */
static int
udp_bind(const struct sockaddr_storage *self,
    const struct sockaddr_storage *peer)
{
	socklen_t len = self->ss_family == AF_INET ?
	    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int fd, on = 1, e;

	if (self->ss_family != peer->ss_family ||
	    (self->ss_family != AF_INET && self->ss_family != AF_INET6)) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if ((fd = socket(self->ss_family, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) < 0)
		return -1;
	/* REUSEADDR: two of the sandbox's sockets may talk to one
	 * destination; each flow's socket is told apart by its peer. */
	if (setsockopt(fd, SOL_IP, IP_TRANSPARENT, &on, sizeof on) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 ||
	    bind(fd, (const struct sockaddr *)self, len) < 0 ||
	    connect(fd, (const struct sockaddr *)peer, len) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The binder: a udp_bind for each request (two sockaddr_storage), back
 * with its fd or why not. Ends with its parent, the connector. */
static void
binder(int sock)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sockaddr_storage a[2];
	struct sbx_msg m;
	int fd;

	while (sbx_msg_recv(sock, &m) > 0) {
		if (m.type != MSG_BIND || m.len != sizeof a) {
			sbx_msg_release(&m);
			break;
		}
		memcpy(a, m.data, sizeof a);
		sbx_msg_release(&m);
		if ((fd = udp_bind(&a[0], &a[1])) >= 0) {
			sbx_msg_send(sock, MSG_OK, NULL, 0, &fd, 1);
			close(fd);
		} else {
			b.len = 0;
			sbx_msg_put_u32(&b, (uint32_t)errno);
			sbx_msg_send(sock, MSG_ERR, b.data, b.len, NULL, 0);
		}
	}
	_exit(0);
}

/* Fork the binder, in our namespaces, with bsock its end of a socketpair
 * whose other end the parent has; sock is ours with the parent. */
static void
binder_start(int bsock, int sock)
{
	pid_t me = getpid(), pid;

	if ((pid = fork()) == 0) {
		prctl(PR_SET_DUMPABLE, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != me)
			_exit(1);
		close(sock);
		binder(bsock);
	}
	/* No binder (fork failed): its socket closes, and the parent's UDP
	 * flows and DNS answers fail, each with a log line that says so. */
	close(bsock);
}

/* The child: forked before the sandbox exists, it waits for its
 * namespaces (MSG_NS: the user and network namespaces' fds, and whether
 * the sandbox has egress), joins them and sets the netns up. */
static void
child(int sock, pid_t parent)
{
	struct sbx_err err = {0};
	struct sbx_msg m = {0};
	unsigned tport, uport, xport;
	uint32_t egress;
	int fds[6] = {-1, -1, -1, -1, -1, -1}, bsp[2], userfd, netfd, i;
	int nlfd = -1;

	/* It lives on in the sandbox's namespaces: nothing there may look
	 * into it, and it goes with us. */
	prctl(PR_SET_DUMPABLE, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	if (sbx_msg_recv(sock, &m) <= 0 || m.type != MSG_NS || m.nfds != 2 ||
	    sbx_msg_get_u32(&m, &egress) < 0)
		_exit(1);
	userfd = m.fds[0];
	netfd = m.fds[1];
	/* User first: it gives the capabilities over the netns it owns. */
	if (!same_userns(userfd) && setns(userfd, CLONE_NEWUSER) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot join the sandbox's "
		    "user namespace:");
		goto fail;
	}
	if (setns(netfd, CLONE_NEWNET) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot join the sandbox's "
		    "network namespace:");
		goto fail;
	}
	sbx_msg_release(&m);
	if (!egress) {
		/* Deny: no route, no rules, no listeners; lo is up (sbx-init
		 * did it), and the connector is all we need. */
		if (sbx_msg_send(sock, MSG_OK, NULL, 0, NULL, 0) < 0)
			_exit(1);
		connector(sock);
	}
	if (net_links(&err) < 0 ||
	    (fds[0] = listener(SOCK_STREAM, &tport, &err)) < 0 ||
	    (fds[1] = listener(SOCK_DGRAM, &uport, &err)) < 0 ||
	    (fds[2] = udp_listener(&xport, &err)) < 0 ||
	    raw_listeners(&fds[4], &err) < 0 ||
	    net_rules(tport, uport, xport, &nlfd, &err) < 0)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bsp) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot make a socketpair:");
		goto fail;
	}
	fds[3] = bsp[0];
	if (sbx_msg_send(sock, MSG_OK, NULL, 0, fds, fds[5] < 0 ? 5 : 6) < 0)
		_exit(1);
	for (i = 0; i < 6; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* The sandbox has its network: the slow close (net_rules) is ours
	 * alone now; what the parent asks meanwhile waits in the
	 * socketpair. */
	close(nlfd);
	/* After the parent has its sockets, off the create's path: what
	 * it asks of the binder meanwhile waits in the socketpair. */
	binder_start(bsp[1], sock);
	connector(sock);
fail:
	sbx_msg_send(sock, MSG_ERR, err.msg, strlen(err.msg), NULL, 0);
	_exit(1);
}

static struct {
	pthread_mutex_t mu;
	int gone;
} ins = {PTHREAD_MUTEX_INITIALIZER, 0};

int
netd_inside_connect(unsigned port, const char **why)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_msg m = {0};
	uint32_t e;
	int fd = -1;

	pthread_mutex_lock(&ins.mu);
	*why = "the connector into the sandbox is gone";
	if (ins.gone)
		goto out;
	sbx_msg_put_u32(&b, port);
	if (sbx_msg_send(netd.inside, MSG_CONNECT, b.data, b.len, NULL,
	    0) < 0 || sbx_msg_recv(netd.inside, &m) <= 0) {
		ins.gone = 1;
		goto out;
	}
	if (m.type == MSG_OK && m.nfds == 1) {
		fd = m.fds[0];
		m.nfds = 0;
	} else if (m.type == MSG_ERR && sbx_msg_get_u32(&m, &e) == 0) {
		*why = strerror((int)e);
	} else {
		ins.gone = 1;
	}
out:
	pthread_mutex_unlock(&ins.mu);
	sbx_msg_release(&m);
	sbx_buf_release(&b);
	return fd;
}

static struct {
	pthread_mutex_t mu;
	int gone;
} bnd = {PTHREAD_MUTEX_INITIALIZER, 0};

int
netd_udp_bind(const struct sockaddr_storage *self,
    const struct sockaddr_storage *peer, const char **why)
{
	struct sockaddr_storage a[2];
	struct sbx_msg m = {0};
	uint32_t e;
	int fd = -1;

	a[0] = *self;
	a[1] = *peer;
	pthread_mutex_lock(&bnd.mu);
	*why = "the binder in the sandbox is gone";
	if (bnd.gone)
		goto out;
	if (sbx_msg_send(netd.binder, MSG_BIND, a, sizeof a, NULL, 0) < 0 ||
	    sbx_msg_recv(netd.binder, &m) <= 0) {
		bnd.gone = 1;
		goto out;
	}
	if (m.type == MSG_OK && m.nfds == 1) {
		fd = m.fds[0];
		m.nfds = 0;
	} else if (m.type == MSG_ERR && sbx_msg_get_u32(&m, &e) == 0) {
		*why = strerror((int)e);
	} else {
		bnd.gone = 1;
	}
out:
	pthread_mutex_unlock(&bnd.mu);
	sbx_msg_release(&m);
	return fd;
}

/* The child, forked early; its pid and our end of its socketpair. */
static pid_t setup_pid = -1;
static int setup_sock = -1;

int
netd_setup_fork(struct sbx_err *err)
{
	int sp[2];
	pid_t me = getpid();

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a socketpair:");
	/* A child, because joining a user namespace takes a process of one
	 * thread that then stays there; we stay in the host's. */
	if ((setup_pid = fork()) < 0) {
		close(sp[0]);
		close(sp[1]);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
	}
	if (setup_pid == 0) {
		close(sp[0]);
		child(sp[1], me);
	}
	close(sp[1]);
	setup_sock = sp[0];
	return 0;
}

int
netd_setup(int userfd, int netfd, int egress, int fds[6], int *inside,
    struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_msg m = {0};
	int nsfds[2] = {userfd, netfd}, r, rc = -1;

	if (setup_sock < 0 && netd_setup_fork(err) < 0)
		return -1;
	sbx_msg_put_u32(&b, egress ? 1 : 0);
	r = sbx_msg_send(setup_sock, MSG_NS, b.data, b.len, nsfds, 2);
	sbx_buf_release(&b);
	if (r == 0)
		r = sbx_msg_recv(setup_sock, &m);
	if (r <= 0) {
		sbx_err_set(err, SBX_EX_FAIL, "the setup of the sandbox's "
		    "network died");
	} else if (m.type == MSG_ERR) {
		sbx_err_set(err, SBX_EX_FAIL, "%s", m.data);
	} else if (egress ? m.nfds < 5 || m.nfds > 6 : m.nfds != 0) {
		sbx_err_set(err, SBX_EX_FAIL, "the setup of the sandbox's "
		    "network sent no sockets");
	} else {
		memcpy(fds, m.fds, (size_t)m.nfds * sizeof *fds);
		m.nfds = 0;
		*inside = setup_sock;
		setup_sock = -1;
		rc = 0;
	}
	sbx_msg_release(&m);
	if (setup_sock >= 0) {
		close(setup_sock);
		setup_sock = -1;
		kill(setup_pid, SIGKILL);
		while (waitpid(setup_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	return rc;
}
