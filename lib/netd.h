/* netd.h - the face of sbx-netd, a sandbox's network helper: it sets the
 * sandbox's network namespace up, then proxies its TCP and forwards its
 * DNS from the host's; lib/netd/netd.h is its inside */
#ifndef SBX_NETD_H
#define SBX_NETD_H

#include <sys/types.h>

#include "sbx.h"

/* Read DIR/net.json, open DIR/net.log and set the network namespace of
 * the sandbox whose init is pid up (lo, addresses, routes, the nftables
 * ruleset, the listeners); pid 0: read it from stdin first, once the
 * files are read (sbx-create starts us before the sandbox exists).
 * Blocks SIGTERM, SIGINT and SIGHUP first, for sbx_netd_run to take
 * them. */
int sbx_netd_start(const char *dir, pid_t pid, struct sbx_err *err);
/* Serve until the sandbox's init exits or SIGTERM/SIGINT comes; SIGHUP
 * reloads DIR/net.json (a bad one keeps the old rules and says why on
 * stderr). */
int sbx_netd_run(struct sbx_err *err);
/* sbx-netd --ca: the CA of a running sandbox, made now (net.json must
 * say its id and image) and staged in DIR/certs; 0 when it has one. */
int sbx_netd_ca(const char *dir, struct sbx_err *err);

#endif
