/* ports.c - the sandbox's published ports: a listener on the host's
 * 127.0.0.1 for each, whose connections go to the sandbox's own
 * 127.0.0.1:PORT through the connector; and DIR/netd.sock, where sbx-port
 * publishes more and sbxd asks for connections */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../msg.h"
#include "netd.h"

#define CTL_MS 5000         /* how long a control request may take */

struct port {
	unsigned port, host_port;
	int fd;
};

struct in_conn {
	int fd;
	unsigned port;
};

static struct {
	pthread_mutex_t mu;     /* the table and net.json's "ports" */
	struct port p[NETD_MAX_PORTS];
	int n;
} pt = {PTHREAD_MUTEX_INITIALIZER, {{0, 0, -1}}, 0};

static atomic_int nconns;

static pthread_attr_t *
detached(void)
{
	static pthread_attr_t at;
	static int done;

	/* Called first before any thread, from netd_ports_start. */
	if (!done) {
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 256 << 10);
		done = 1;
	}
	return &at;
}

/* --- one inbound connection --------------------------------------------- */

static void *
in_main(void *arg)
{
	struct in_conn *c = arg;
	struct netd_conf *cf = netd_conf_get();
	struct sockaddr_in dest = {.sin_family = AF_INET,
	    .sin_port = htons((uint16_t)c->port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct netd_logrec r = {.sandbox = cf->id, .proto = "tcp-in",
	    .dest = (struct sockaddr *)&dest, .allow = 1};
	const char *why;
	int in;

	if ((in = netd_inside_connect(c->port, &why)) < 0) {
		r.error = why;
		netd_reset(c->fd);
	} else if (netd_relay(c->fd, in, &r.bytes_in, &r.bytes_out) < 0) {
		netd_reset(c->fd);
		netd_reset(in);
	} else {
		close(c->fd);
		close(in);
	}
	/* bytes_out: out of the sandbox, as for its own connections. */
	netd_log(&r);
	netd_conf_put(cf);
	free(c);
	atomic_fetch_sub(&nconns, 1);
	return NULL;
}

static void *
accept_main(void *arg)
{
	struct port *p = arg;
	struct in_conn *c;
	pthread_t th;
	int fd;

	for (;;) {
		if ((fd = accept4(p->fd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(100000);
			continue;
		}
		if (atomic_load(&nconns) >= NETD_MAX_CONNS) {
			netd_reset(fd);
			continue;
		}
		c = sbx_xcalloc(1, sizeof *c);
		c->fd = fd;
		c->port = p->port;
		atomic_fetch_add(&nconns, 1);
		if ((errno = pthread_create(&th, detached(), in_main, c))) {
			sbx_warn("cannot start a thread:");
			atomic_fetch_sub(&nconns, 1);
			netd_reset(fd);
			free(c);
		}
	}
	return NULL;
}

/* --- the table ---------------------------------------------------------- */

/* A listener on 127.0.0.1:host_port (0: a free one), its port in *bound. */
static int
bind_port(unsigned host_port, unsigned *bound, struct sbx_err *err)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	    .sin_port = htons((uint16_t)host_port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	int fd, on = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open a socket:");
	/* Not SO_REUSEPORT: a port someone listens on stays theirs. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (errno == EADDRINUSE)
			sbx_err_set(err, SBX_EX_FAIL, "port %u is in use",
			    host_port);
		else
			sbx_err_set(err, SBX_EX_FAIL, "cannot bind "
			    "127.0.0.1:%u:", host_port);
		close(fd);
		return -1;
	}
	if (listen(fd, SOMAXCONN) < 0 || getsockname(fd,
	    (struct sockaddr *)&sa, &len) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot listen on "
		    "127.0.0.1:%u:", host_port);
		close(fd);
		return -1;
	}
	*bound = ntohs(sa.sin_port);
	return fd;
}

/* net.json's "ports" as the table has them (pt.mu held). */
static int
ports_save(struct sbx_err *err)
{
	char *path = sbx_xasprintf("%s/net.json", netd.dir), *text;
	json_t *root, *a = json_array();
	int i, rc = -1;

	for (i = 0; i < pt.n; i++)
		json_array_append_new(a, json_pack("{sIsI}", "port",
		    (json_int_t)pt.p[i].port, "host_port",
		    (json_int_t)pt.p[i].host_port));
	if (!(root = sbx_json_load_object(path, err))) {
		json_decref(a);
		goto out;
	}
	json_object_set_new(root, "ports", a);
	text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	rc = sbx_file_write_atomic(path, text, strlen(text), 0600, 0, err);
	free(text);
	json_decref(root);
out:
	free(path);
	return rc;
}

/* Publish port (pt.mu held): its host port in *bound; one published
 * already keeps its own (a different host_port asked is an error). */
static int
publish(unsigned port, unsigned host_port, unsigned *bound,
    struct sbx_err *err)
{
	pthread_t th;
	int i, fd;

	for (i = 0; i < pt.n; i++) {
		if (pt.p[i].port != port)
			continue;
		if (host_port && host_port != pt.p[i].host_port)
			return sbx_err_set(err, SBX_EX_FAIL, "port %u is "
			    "published on %u already", port,
			    pt.p[i].host_port);
		*bound = pt.p[i].host_port;
		return 0;
	}
	if (pt.n == NETD_MAX_PORTS)
		return sbx_err_set(err, SBX_EX_FAIL, "%d ports are published "
		    "already", NETD_MAX_PORTS);
	if ((fd = bind_port(host_port, bound, err)) < 0)
		return -1;
	pt.p[pt.n] = (struct port){port, *bound, fd};
	if ((errno = pthread_create(&th, detached(), accept_main,
	    &pt.p[pt.n]))) {
		close(fd);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
	}
	pt.n++;
	return 0;
}

/* --- the control socket --------------------------------------------------- */

/* One request a connection: {"publish":PORT,"host_port":M} answered with
 * {"port":PORT,"host_port":BOUND}; {"connect":PORT} with {"port":PORT}
 * and the fd of a connection to it; {"reload":true} with {"reload":true}
 * once net.json holds; or {"error":WHY}. */
static void *
ctl_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, in = -1;
	struct timeval tv = {CTL_MS / 1000, 0};
	struct sbx_err err = {0};
	struct sbx_msg m = {0};
	json_t *q = NULL, *a;
	const char *why;
	unsigned bound;
	json_int_t port, hp;
	char *s;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (sbx_msg_recv(fd, &m) <= 0 || !(q = json_loadb(m.data, m.len, 0,
	    NULL)) || !json_is_object(q)) {
		a = json_pack("{ss}", "error", "bad request");
		goto reply;
	}
	hp = sbx_json_int(q, "host_port", 0);
	if ((port = sbx_json_int(q, "publish", 0))) {
		if (port < 1 || port > 65535 || hp < 0 || hp > 65535) {
			a = json_pack("{ss}", "error", "port out of range");
			goto reply;
		}
		pthread_mutex_lock(&pt.mu);
		if (publish((unsigned)port, (unsigned)hp, &bound, &err) < 0 ||
		    ports_save(&err) < 0)
			a = json_pack("{ss}", "error", err.msg);
		else
			a = json_pack("{sIsI}", "port", port, "host_port",
			    (json_int_t)bound);
		pthread_mutex_unlock(&pt.mu);
	} else if ((port = sbx_json_int(q, "connect", 0)) >= 1 &&
	    port <= 65535) {
		if ((in = netd_inside_connect((unsigned)port, &why)) < 0)
			a = json_pack("{ss}", "error", why);
		else
			a = json_pack("{sI}", "port", port);
	} else if (json_is_true(json_object_get(q, "reload"))) {
		if (netd_reload(&err) < 0)
			a = json_pack("{ss}", "error", err.msg);
		else
			a = json_pack("{sb}", "reload", 1);
	} else {
		a = json_pack("{ss}", "error", "bad request");
	}
reply:
	if ((s = json_dumps(a, JSON_COMPACT))) {
		sbx_msg_send(fd, 0, s, strlen(s), &in, in >= 0);
		free(s);
	}
	json_decref(a);
	json_decref(q);
	sbx_msg_release(&m);
	if (in >= 0)
		close(in);
	close(fd);
	return NULL;
}

static void *
ctl_main(void *arg)
{
	int lfd = (int)(intptr_t)arg, fd;
	pthread_t th;

	for (;;) {
		if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(100000);
			continue;
		}
		if ((errno = pthread_create(&th, detached(), ctl_conn,
		    (void *)(intptr_t)fd))) {
			sbx_warn("cannot start a thread:");
			close(fd);
		}
	}
	return NULL;
}

static int ctl_fd = -1;

int
netd_ctl_bind(struct sbx_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	mode_t old;
	int fd, r;

	if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/netd.sock",
	    netd.dir) >= (int)sizeof sa.sun_path)
		return sbx_err_set(err, SBX_EX_FAIL, "'%s' is too long for a "
		    "socket path", netd.dir);
	unlink(sa.sun_path);    /* a stopped sandbox's */
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open a socket:");
	/* 0600 from its birth: only its owner may publish. */
	old = umask(077);
	r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r < 0 || listen(fd, 64) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot listen on '%s':",
		    sa.sun_path);
		close(fd);
		return -1;
	}
	ctl_fd = fd;
	return 0;
}

int
netd_ports_start(struct sbx_err *err)
{
	char *path = sbx_xasprintf("%s/net.json", netd.dir);
	json_t *root, *a, *v;
	pthread_t th;
	unsigned bound;
	size_t i;
	int rc = -1;

	detached();
	if (!(root = sbx_json_load_object(path, err)))
		goto out;
	a = json_object_get(root, "ports");
	pthread_mutex_lock(&pt.mu);
	json_array_foreach(a, i, v) {
		json_int_t p = sbx_json_int(v, "port", 0);
		json_int_t hp = sbx_json_int(v, "host_port", 0);

		if (p < 1 || p > 65535 || hp < 0 || hp > 65535) {
			sbx_err_set(err, SBX_EX_DATA, "'%s': invalid port",
			    path);
			break;
		}
		if (publish((unsigned)p, (unsigned)hp, &bound, err) < 0)
			break;
	}
	/* None: net.json says so already (no write on the create's path). */
	if (i == json_array_size(a) && (i == 0 || ports_save(err) == 0))
		rc = 0;
	pthread_mutex_unlock(&pt.mu);
	if (rc < 0)
		goto out;
	rc = -1;
	if (ctl_fd < 0 && netd_ctl_bind(err) < 0)
		goto out;
	if ((errno = pthread_create(&th, detached(), ctl_main,
	    (void *)(intptr_t)ctl_fd))) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
		goto out;
	}
	rc = 0;
out:
	json_decref(root);
	free(path);
	return rc;
}
