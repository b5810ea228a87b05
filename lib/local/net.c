/* net.c - network allow for a local sandbox: its rules in net.json and
 * sbx-netd, the helper outside the sandbox that gives its network
 * namespace a way out (lib/netd, cmd/sbx-netd.c). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"
#include "../msg.h"
#include "../net/net.h"

/* How long sbx-netd may take to set the namespace up. */
#define NETD_READY_MS 10000

/* One resolver: "IP", "IP:PORT" or "[IPv6]:PORT". */
static int
valid_dns(const char *s)
{
	char host[64];
	const char *port = NULL, *end;
	unsigned char a[16];
	size_t n;

	if (*s == '[') {
		if (!(end = strchr(s, ']')) || (end[1] && end[1] != ':'))
			return 0;
		n = (size_t)(end - s - 1);
		s++;
		port = end[1] ? end + 2 : NULL;
	} else if ((end = strchr(s, ':')) && !strchr(end + 1, ':')) {
		n = (size_t)(end - s);
		port = end + 1;
	} else
		n = strlen(s);
	if (n >= sizeof host)
		return 0;
	memcpy(host, s, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, a) != 1 && inet_pton(AF_INET6, host,
	    a) != 1)
		return 0;
	if (port) {
		char *e;
		long p = strtol(port, &e, 10);

		if (!*port || *e || p < 1 || p > 65535)
			return 0;
	}
	return 1;
}

/* network.dns (SBX_NETWORK_DNS): resolvers, comma-separated; empty: the
 * host's own. */
static json_t *
dns_list(struct sbx_err *err)
{
	const char *v = sbx_config_get("network.dns", "");
	char *copy = sbx_xstrdup(v), *tok, *save = NULL;
	json_t *a = json_array();

	for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL,
	    ", ", &save)) {
		if (!valid_dns(tok)) {
			sbx_err_set(err, SBX_EX_USAGE, "invalid resolver '%s' "
			    "in network.dns (want IP or IP:PORT)", tok);
			json_decref(a);
			a = NULL;
			break;
		}
		json_array_append_new(a, json_string(tok));
	}
	free(copy);
	return a;
}

/* spec->net_inject as sbx-create or sbxd made it: what sbx-netd needs. */
static int
inject_check(const json_t *inject, struct sbx_err *err)
{
	const char *host, *name, *v;
	struct sbx_net_rule r;
	json_t *o;
	size_t i;

	if (inject && !json_is_array(inject))
		return sbx_err_set(err, SBX_EX_USAGE, "header injections are "
		    "not a list");
	json_array_foreach(inject, i, o) {
		host = sbx_json_str(o, "host");
		name = sbx_json_str(o, "name");
		if (!(v = sbx_json_str(o, "value")))
			v = sbx_json_str(o, "template");
		if (!host || sbx_net_rule_parse(host, &r, err) < 0 ||
		    (r.kind != SBX_NR_DOMAIN && r.kind != SBX_NR_WILDCARD))
			return sbx_err_set(err, SBX_EX_USAGE, "invalid host "
			    "'%s' for a header injection", host ? host : "");
		if (!name || !sbx_net_header_name_ok(name, strlen(name)))
			return sbx_err_set(err, SBX_EX_USAGE, "invalid header "
			    "name '%s'", name ? name : "");
		if (!v || !sbx_net_header_value_ok(v, strlen(v)))
			return sbx_err_set(err, SBX_EX_USAGE, "invalid value "
			    "for header '%s' of '%s'", name, host);
	}
	return 0;
}

/* --port: each sandbox port and each host port once. */
static int
ports_check(const json_t *ports, struct sbx_err *err)
{
	size_t i, k;

	for (i = 0; i < json_array_size(ports); i++) {
		json_int_t p = sbx_json_int(json_array_get(ports, i), "port", 0);
		json_int_t h = sbx_json_int(json_array_get(ports, i),
		    "host_port", 0);

		if (p < 1 || p > 65535 || h < 0 || h > 65535)
			return sbx_err_set(err, SBX_EX_USAGE, "invalid port "
			    "%lld (want 1-65535)", (long long)p);
		for (k = 0; k < i; k++) {
			const json_t *o = json_array_get(ports, k);

			if (sbx_json_int(o, "port", 0) == p)
				return sbx_err_set(err, SBX_EX_USAGE, "port "
				    "%lld is given twice", (long long)p);
			if (h && sbx_json_int(o, "host_port", 0) == h)
				return sbx_err_set(err, SBX_EX_USAGE, "host "
				    "port %lld is given twice", (long long)h);
		}
	}
	return 0;
}

int
sbx_local_net_check(const struct sbx_spec *spec, struct sbx_err *err)
{
	struct sbx_net_rules rs;
	json_t *dns;

	if (ports_check(spec->ports, err) < 0)
		return -1;
	if (spec->network != SBX_NET_ALLOW)
		return 0;
	if (spec->net_rules) {
		if (sbx_net_rules_from_json(spec->net_rules, &rs, err) < 0)
			return -1;
		sbx_net_rules_free(&rs);
	}
	if (!(dns = dns_list(err)))
		return -1;
	json_decref(dns);
	return inject_check(spec->net_inject, err);
}

/* DIR/net.secret.json, for sbx-netd alone (0600; never printed, never
 * logged): "inject", the injected headers with their values (when inject
 * is not NULL: replaced, or removed when empty), and "egress_proxy":
 * {"password": P} (when proxy is not NULL: set, or removed when it has
 * no password). What else it holds stays. */
static int
write_secret(const char *dir, const json_t *inject, const json_t *proxy,
    struct sbx_err *err)
{
	char *p, *text;
	json_t *o, *pw;
	int rc;

	if (!inject && !proxy)
		return 0;
	p = sbx_xasprintf("%s/net.secret.json", dir);
	o = json_load_file(p, 0, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		o = json_object();
	}
	if (json_array_size(inject))
		json_object_set(o, "inject", (json_t *)inject);
	else if (inject)
		json_object_del(o, "inject");
	if (proxy) {
		pw = json_object_get(proxy, "password");
		if (json_is_string(pw))
			json_object_set_new(o, "egress_proxy", json_pack(
			    "{s:O}", "password", pw));
		else
			json_object_del(o, "egress_proxy");
	}
	/* Nothing to keep, where nothing was kept: no file. */
	if (!json_object_size(o) && access(p, F_OK) < 0) {
		json_decref(o);
		free(p);
		return 0;
	}
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	rc = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);
	explicit_bzero(text, strlen(text));
	free(text);
	json_decref(o);
	free(p);
	return rc;
}

/* net.json's "inject": which headers, never their values. */
static json_t *
inject_names(const json_t *inject)
{
	json_t *a = json_array(), *v;
	size_t i;

	json_array_foreach(inject, i, v)
		json_array_append_new(a, json_pack("{sOsO}", "host",
		    json_object_get(v, "host"), "name", json_object_get(v,
		    "name")));
	return a;
}

/* DIR/net.json: what sbx-netd enforces. A stopped sandbox started again
 * keeps its own (sbx-net may have changed it), and its net.secret.json. */
static int
write_rules(const char *dir, const char *id, const char *image,
    const struct sbx_spec *spec, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/net.json", dir), *text;
	json_t *o, *dns, *inject;
	struct stat st;
	int rc;

	if (stat(p, &st) == 0) {
		free(p);
		return 0;
	}
	if (!(dns = dns_list(err))) {
		free(p);
		return -1;
	}
	/* The secrets first: sbx-netd reads both files at its start. */
	if (write_secret(dir, json_array_size(spec->net_inject) ?
	    spec->net_inject : NULL, spec->egress_proxy, err) < 0) {
		json_decref(dns);
		free(p);
		return -1;
	}
	inject = inject_names(spec->net_inject);
	o = json_pack("{sssOsOsosO}", "id", id,
	    "allow_out", spec->net_rules ? json_object_get(spec->net_rules,
	    "allow_out") : json_array(),
	    "deny_out", spec->net_rules ? json_object_get(spec->net_rules,
	    "deny_out") : json_array(), "dns", dns, "ports", spec->ports ?
	    spec->ports : json_array());
	/* json_pack's O took a reference to the fresh arrays too. */
	if (!spec->net_rules) {
		json_decref(json_object_get(o, "allow_out"));
		json_decref(json_object_get(o, "deny_out"));
	}
	if (!spec->ports)
		json_decref(json_object_get(o, "ports"));
	/* Deny with ports: sbx-netd lets those in and nothing out. */
	if (spec->network != SBX_NET_ALLOW)
		json_object_set_new(o, "network", json_string("deny"));
	json_object_set_new(o, "inject", inject);
	if (image)
		json_object_set_new(o, "image", json_string(image));
	if (spec->egress_proxy)
		json_object_set(o, "egress_proxy", json_object_get(
		    spec->egress_proxy, "url"));
	rc = 0;
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (rc == 0)
		rc = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);
	free(text);
	json_decref(o);
	free(p);
	return rc;
}

int
sbx_local_net_wanted(const char *dir, const struct sbx_spec *spec)
{
	char *p;
	struct stat st;
	int yes;

	if (spec->network == SBX_NET_ALLOW || spec->ports)
		return 1;
	/* A stopped sandbox started again: what its first start had. */
	p = sbx_xasprintf("%s/net.json", dir);
	yes = stat(p, &st) == 0;
	free(p);
	return yes;
}

static char *
netd_path(struct sbx_err *err)
{
	static const char *const where[] = {"sbx-netd", "../sbx-netd",
	    "../libexec/sbx/sbx-netd"};
	char *p;
	size_t i;

	for (i = 0; i < sizeof where / sizeof where[0]; i++) {
		if (!(p = sbx_sibling(where[i]))) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot find myself:");
			return NULL;
		}
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	sbx_err_set(err, SBX_EX_FAIL, "cannot find sbx-netd beside sbx-init");
	return NULL;
}

/* The environment of sbx-netd, only what it reads: sbx-create's may hold
 * the value of an injected header (env:VAR), which sbx-netd has from its
 * file. Returns how many; free them. */
#define NETD_ENV 7
static size_t
netd_env(char *envp[NETD_ENV + 1])
{
	static const char *const keep[NETD_ENV] = {"HOME", "XDG_CONFIG_HOME",
	    "SBX_NETWORK_CA_FILE", "SSL_CERT_FILE", "SSL_CERT_DIR", "PATH",
	    "TZ"};
	const char *ev;
	size_t i, ne = 0;

	for (i = 0; i < NETD_ENV; i++)
		if ((ev = getenv(keep[i])))
			envp[ne++] = sbx_xasprintf("%s=%s", keep[i], ev);
	envp[ne] = NULL;
	return ne;
}

/* The child: a session of its own, so that it outlives sbx-create.
 * One fork, not the double fork of a daemon: sbx-create goes on at once
 * instead of waiting for a middle process to fork and exit (the create's
 * serial path), and the helper is our child only until we exit (every
 * caller is a short-lived process: sbx-create, sbx-net, sbxd's worker);
 * then init reaps it. Only async-signal-safe calls. */
static void
netd_child(const char *path, const char *errlog, char *const argv[],
    char *const envp[], int ready, int pidr)
{
	sigset_t none;
	int fd, sig;

	setsid();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	if ((fd = open("/dev/null", O_RDWR)) < 0 || dup2(pidr >= 0 ? pidr :
	    fd, 0) < 0 || dup2(fd, 1) < 0)
		_exit(1);
	if ((fd = open(errlog, O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0 ||
	    dup2(fd, 2) < 0 || dup2(ready, 3) < 0)
		_exit(1);
	syscall(SYS_close_range, 4, ~0U, 0);
	/* It lives as long as the sandbox: not in the caller's directory,
	 * which it would keep from being unmounted (its paths are
	 * absolute). */
	if (chdir("/") < 0)
		_exit(1);
	execve(path, argv, envp);
	(void)!write(3, "cannot start sbx-netd\n", 22);
	_exit(1);
}

int
sbx_local_net_spawn(const char *dir, const char *id, const char *image,
    pid_t pid, int *pidw, const struct sbx_spec *spec, struct sbx_err *err)
{
	char *path, *errlog = NULL, pidstr[24];
	char *argv[] = {"sbx-netd", (char *)dir, pidstr, NULL};
	char *envp[NETD_ENV + 1];
	size_t i, ne;
	int ready[2] = {-1, -1}, pp[2] = {-1, -1};
	pid_t c;

	if (pidw)
		*pidw = -1;
	if (write_rules(dir, id, image, spec, err) < 0)
		return -1;
	if (!(path = netd_path(err)))
		return -1;
	ne = netd_env(envp);
	errlog = sbx_xasprintf("%s/netd.err", dir);
	/* No pid yet: "-", and the pid comes on its stdin, a socket (a
	 * send to a helper that died is EPIPE, not SIGPIPE). */
	snprintf(pidstr, sizeof pidstr, pid ? "%d" : "-", (int)pid);
	if (pipe2(ready, O_CLOEXEC) < 0 || (!pid && socketpair(AF_UNIX,
	    SOCK_STREAM | SOCK_CLOEXEC, 0, pp) < 0)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create a pipe:");
		goto fail;
	}
	if ((c = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start sbx-netd:");
		goto fail;
	}
	if (c == 0)
		netd_child(path, errlog, argv, envp, ready[1], pp[0]);
	if (pidw) {
		*pidw = pp[1];
		pp[1] = -1;
	}
	goto out;
fail:
	if (ready[0] >= 0)
		close(ready[0]);
	ready[0] = -1;
out:
	for (i = 0; i < 2; i++)
		if (pp[i] >= 0)
			close(pp[i]);
	if (ready[1] >= 0)
		close(ready[1]);
	for (i = 0; i < ne; i++)
		free(envp[i]);
	free(errlog);
	free(path);
	return ready[0];
}

void
sbx_local_net_pid(int pidw, pid_t pid)
{
	char line[24];
	int n = snprintf(line, sizeof line, "%d\n", (int)pid);

	/* A helper that has died says why on its ready fd. */
	(void)!send(pidw, line, (size_t)n, MSG_NOSIGNAL);
	close(pidw);
}

int
sbx_local_net_ready(int ready, const char *dir, pid_t *netd,
    struct sbx_err *err)
{
	struct pollfd pfd = {ready, POLLIN, 0};
	char line[512];
	size_t n = 0;
	ssize_t r;
	long v;

	*netd = 0;
	/* "ok PID\n", or one line that says what went wrong. */
	while (n < sizeof line - 1) {
		if ((r = poll(&pfd, 1, NETD_READY_MS)) == 0) {
			close(ready);
			return sbx_err_set(err, SBX_EX_FAIL, "sbx-netd was not "
			    "ready in %d s", NETD_READY_MS / 1000);
		}
		if (r < 0 && errno == EINTR)
			continue;
		if ((r = read(ready, line + n, sizeof line - 1 - n)) <= 0)
			break;
		n += (size_t)r;
		if (memchr(line, '\n', n))
			break;
	}
	close(ready);
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (sscanf(line, "ok %ld", &v) == 1 && v > 0) {
		*netd = (pid_t)v;
		return 0;
	}
	if (*line)
		return sbx_err_set(err, SBX_EX_FAIL, "network: %s", line);
	return sbx_err_set(err, SBX_EX_FAIL, "sbx-netd ended before it was "
	    "ready (see %s/netd.err)", dir);
}

int
sbx_local_net_start(const char *dir, const char *id, const char *image,
    pid_t pid, const struct sbx_spec *spec, pid_t *netd, struct sbx_err *err)
{
	int ready = sbx_local_net_spawn(dir, id, image, pid, NULL, spec, err);

	*netd = 0;
	return ready < 0 ? -1 : sbx_local_net_ready(ready, dir, netd, err);
}

void
sbx_local_net_stop(pid_t pid, unsigned long long starttime)
{
	int i;

	if (pid <= 0 || !starttime || sbx_local_starttime(pid) != starttime)
		return;
	kill(pid, SIGKILL);
	/* Gone when its start time is; one we started (a create that
	 * failed) is our zombie until we reap it. */
	for (i = 0; i < 500 && sbx_local_starttime(pid) == starttime; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			break;
		usleep(1000);
	}
}

void
sbx_local_net_stop_of(const json_t *meta)
{
	sbx_local_net_stop((pid_t)sbx_json_int(meta, "net_pid", 0),
	    (unsigned long long)sbx_json_int(meta, "net_starttime", 0));
}

/* --- a network and a CA for a sandbox that runs --------------------------- */

/* The init of the sandbox in dir, which runs and is not paused; 0 with
 * err when it is not so. */
static pid_t
live_init(const char *dir, const char *id, const json_t *meta,
    struct sbx_err *err)
{
	pid_t pid = (pid_t)sbx_json_int(meta, "pid", 0);
	unsigned long long st = (unsigned long long)sbx_json_int(meta,
	    "starttime", 0);
	char *p = sbx_xasprintf("%s/" SBX_PAUSED_FILE, dir);
	int paused = access(p, F_OK) == 0;

	free(p);
	if (paused) {
		sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is paused: resume "
		    "it to give it a network or header injection", id);
		return 0;
	}
	if (pid <= 0 || !st || sbx_local_starttime(pid) != st) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is not "
		    "running", id);
		return 0;
	}
	return pid;
}

/* sbx-netd --ca DIR: the CA made (net.json names the sandbox), its
 * trust store's files staged in DIR/certs. */
static int
netd_ca(const char *dir, struct sbx_err *err)
{
	char *path = netd_path(err), *errlog, *envp[NETD_ENV + 1];
	char *argv[] = {"sbx-netd", "--ca", (char *)dir, NULL};
	size_t i, ne;
	int st = 0, fd, rc = -1;
	pid_t c;

	if (!path)
		return -1;
	ne = netd_env(envp);
	errlog = sbx_xasprintf("%s/netd.err", dir);
	if ((c = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start sbx-netd:");
		goto out;
	}
	if (c == 0) {
		if ((fd = open("/dev/null", O_RDWR)) < 0 || dup2(fd, 0) < 0 ||
		    dup2(fd, 1) < 0 || (fd = open(errlog, O_WRONLY | O_CREAT |
		    O_APPEND, 0600)) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		syscall(SYS_close_range, 3, ~0U, 0);
		execve(path, argv, envp);
		_exit(127);
	}
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		rc = 0;
	else
		sbx_err_set(err, SBX_EX_FAIL, "cannot make the sandbox's CA "
		    "(see %s)", errlog);
out:
	for (i = 0; i < ne; i++)
		free(envp[i]);
	free(errlog);
	free(path);
	return rc;
}

/* The files of DIR/certs: the bundle, the CA, and its hash's name. */
struct staged {
	struct sbx_buf bundle, pem;
	char link[64];
};

/* All of path (a file of the sandbox's directory) into b, up to limit. */
static int
slurp(const char *path, size_t limit, struct sbx_buf *b, struct sbx_err *err)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	b->limit = limit;
	if (fd < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", path);
	while ((n = read(fd, buf, sizeof buf)) > 0)
		sbx_buf_add(b, buf, (size_t)n);
	close(fd);
	if (n < 0 || b->truncated)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s'%s", path,
		    n < 0 ? ":" : ": too large");
	return 0;
}

static int
staged_read(const char *dir, struct staged *sf, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/certs", dir), *q;
	struct dirent *e;
	DIR *d;
	int rc;

	memset(sf, 0, sizeof *sf);
	if (!(d = opendir(p))) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", p);
		free(p);
		return -1;
	}
	while ((e = readdir(d)))
		if (e->d_type == DT_LNK && strlen(e->d_name) < sizeof sf->link)
			snprintf(sf->link, sizeof sf->link, "%s", e->d_name);
	closedir(d);
	q = sbx_xasprintf("%s/ca-certificates.crt", p);
	rc = slurp(q, 16u << 20, &sf->bundle, err);
	free(q);
	q = sbx_xasprintf("%s/sbx-ca.pem", p);
	if (rc == 0)
		rc = slurp(q, 1u << 20, &sf->pem, err);
	free(q);
	if (rc == 0 && !*sf->link)
		rc = sbx_err_set(err, SBX_EX_FAIL, "'%s' holds no hash link",
		    p);
	free(p);
	return rc;
}

/* Write name in d from data, whole or not at all. Async-signal-safe. */
static int
put_at(int d, const char *name, const char *tmp, const char *data, size_t n)
{
	int fd = openat(d, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	if (sbx_write_all(fd, data, n) < 0 || fchmod(fd, 0644) < 0) {
		close(fd);
		unlinkat(d, tmp, 0);
		return -1;
	}
	close(fd);
	return renameat(d, tmp, d, name);
}

/* Where the child failed: its step and errno, on a pipe. */
struct live_fail {
	int step, errnum;
};

/* The child that enters the sandbox's user and mount namespaces as its
 * root, so that what it writes and mounts is the sandbox's own: the
 * staged files into /etc/ssl/certs (an image: its overlay, writable), or,
 * host image (/etc/ssl/certs the host's, read-only), onto a tmpfs laid
 * over it as create lays DIR/certs (mounts.c). Not dumpable: nothing in
 * the sandbox may trace it. Async-signal-safe: sbxd forks from a
 * thread. */
static void
live_child(int ufd, int mfd, int host, const struct staged *sf, int out)
{
	static const char tmp[] = "/run/.sbx-ca";
	struct live_fail f = {0, 0};
	int d = -1;

	prctl(PR_SET_DUMPABLE, 0);
	if (setns(ufd, CLONE_NEWUSER) < 0 || setns(mfd, CLONE_NEWNS) < 0)
		goto fail;
	f.step = 1;
	setgroups(0, NULL); /* refused rootless (setgroups deny): none */
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		goto fail;
	f.step = 2;
	umask(022);
	if (!host) {
		if ((mkdir("/etc", 0755) < 0 && errno != EEXIST) ||
		    (mkdir("/etc/ssl", 0755) < 0 && errno != EEXIST) ||
		    (mkdir("/etc/ssl/certs", 0755) < 0 && errno != EEXIST) ||
		    (d = open("/etc/ssl/certs", O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC)) < 0)
			goto fail;
	} else if ((mkdir(tmp, 0700) < 0 && errno != EEXIST) ||
	    mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0755,size=32m") < 0 || (d = open(tmp, O_RDONLY |
	    O_DIRECTORY | O_CLOEXEC)) < 0)
		goto fail;
	f.step = 3;
	unlinkat(d, sf->link, 0);
	if (put_at(d, "ca-certificates.crt", ".sbx-ca.tmp", sf->bundle.data,
	    sf->bundle.len) < 0 || put_at(d, "sbx-ca.pem", ".sbx-ca.tmp",
	    sf->pem.data, sf->pem.len) < 0 || symlinkat("sbx-ca.pem", d, sf->link) < 0)
		goto fail;
	if (host) {
		f.step = 4;
		if (mount("overlay", "/etc/ssl/certs", "overlay", MS_RDONLY |
		    MS_NOSUID | MS_NODEV, "lowerdir=/run/.sbx-ca:"
		    "/etc/ssl/certs,userxattr") < 0)
			goto fail;
		/* The overlay holds the tmpfs: out of sight now. */
		umount2(tmp, MNT_DETACH);
		rmdir(tmp);
	}
	_exit(0);
fail:
	f.errnum = errno;
	(void)!write(out, &f, sizeof f);
	_exit(1);
}

/* The staged CA into the trust store of the sandbox whose init is pid. */
static int
ca_put_live(const char *dir, pid_t pid, unsigned long long st, int host,
    struct sbx_err *err)
{
	static const char *const what[] = {"enter the sandbox's namespaces",
	    "become the sandbox's root", "open /etc/ssl/certs",
	    "write the CA into /etc/ssl/certs",
	    "lay the CA over /etc/ssl/certs"};
	struct live_fail f;
	struct staged sf;
	char *p;
	int ufd = -1, mfd = -1, pp[2] = {-1, -1}, rc = -1, ws = 0;
	pid_t c;

	if (staged_read(dir, &sf, err) < 0) /* sf set, even then */
		goto out;
	p = sbx_xasprintf("/proc/%d/ns/user", (int)pid);
	ufd = open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	p = sbx_xasprintf("/proc/%d/ns/mnt", (int)pid);
	mfd = open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	/* Still the sandbox's init once they are open: its namespaces. */
	if (ufd < 0 || mfd < 0 || sbx_local_starttime(pid) != st) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open the namespaces of "
		    "process %d:", (int)pid);
		goto out;
	}
	if (pipe2(pp, O_CLOEXEC) < 0 || (c = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start a process:");
		goto out;
	}
	if (c == 0)
		live_child(ufd, mfd, host, &sf, pp[1]);
	close(pp[1]);
	pp[1] = -1;
	while (waitpid(c, &ws, 0) < 0 && errno == EINTR)
		;
	if (read(pp[0], &f, sizeof f) == (ssize_t)sizeof f && f.step >= 0 &&
	    f.step < 5) {
		errno = f.errnum;
		sbx_err_set(err, SBX_EX_FAIL, "cannot %s:", what[f.step]);
	} else if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		sbx_err_set(err, SBX_EX_FAIL, "cannot put the CA into the "
		    "sandbox");
	else
		rc = 0;
out:
	if (ufd >= 0)
		close(ufd);
	if (mfd >= 0)
		close(mfd);
	if (pp[0] >= 0)
		close(pp[0]);
	if (pp[1] >= 0)
		close(pp[1]);
	sbx_buf_release(&sf.bundle);
	sbx_buf_release(&sf.pem);
	return rc;
}

/* Header injection new to a running local sandbox: its CA, made now and
 * put into its trust store as create does (lib/netd/ca.c), so that new
 * commands trust it (exec.c gives them SSL_CERT_FILE and the others).
 * Nothing left when it fails: a CA on disk means a trusted one. */
static int
ca_live(const char *dir, const char *id, const char *image,
    struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/meta.json", dir);
	json_t *meta = json_load_file(p, 0, NULL);
	pid_t pid;
	int rc = -1;
	const char *gone[] = {"ca.crt", "ca.key"};
	size_t i;

	free(p);
	if (!(pid = live_init(dir, id, meta, err)))
		goto out;
	if (netd_ca(dir, err) == 0 && ca_put_live(dir, pid,
	    (unsigned long long)sbx_json_int(meta, "starttime", 0),
	    !strcmp(image, "/"), err) == 0) {
		rc = 0;
		goto out;
	}
	for (i = 0; i < 2; i++) {
		p = sbx_xasprintf("%s/%s", dir, gone[i]);
		unlink(p);
		free(p);
	}
	p = sbx_xasprintf("%s/certs", dir);
	sbx_rmtree(p);
	free(p);
out:
	json_decref(meta);
	return rc;
}

/* --- sbx-net ------------------------------------------------------------- */

/* The directory of a local sandbox, its id and its meta.json. */
static char *
net_dir(const json_t *ref, char **id, json_t **meta, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *dir = want ? sbx_local_find(want, id) : NULL, *p;

	*meta = NULL;
	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "");
		return NULL;
	}
	p = sbx_xasprintf("%s/meta.json", dir);
	*meta = json_load_file(p, 0, NULL);
	free(p);
	return dir;
}

/* Whether meta says network allow. */
static int
meta_allow(const json_t *meta)
{
	const char *net = sbx_json_str(meta, "network");

	return net && !strcmp(net, "allow");
}

static int
no_allow(const char *id, struct sbx_err *err)
{
	return sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' has network deny: "
	    "rules need --network allow", id);
}

/* A set's egress_proxy: null, or {"url": U, "password": P or null}
 * with a password when U names a user. */
static int
proxy_check(const json_t *px, struct sbx_err *err)
{
	struct sbx_net_proxy p;
	const char *url = sbx_json_str(px, "url");

	if (json_is_null(px))
		return 0;
	if (!url)
		return sbx_err_set(err, SBX_EX_USAGE, "an egress proxy without "
		    "a URL");
	if (sbx_net_proxy_parse(url, &p, err) < 0)
		return -1;
	if (*p.user && !sbx_json_str(px, "password"))
		return sbx_err_set(err, SBX_EX_CRED, "no password for the "
		    "egress proxy's user '%s'", p.user);
	return 0;
}

/* Injections need DIR/ca.crt, in the sandbox's trust store: sbx-netd
 * makes it at the create of a sandbox with some; a local sandbox that
 * runs without one gets one now (net.json names its image); a
 * container, whose CA the docker backend puts in at create, cannot. */
static int
ca_need(const char *dir, const json_t *net, const json_t *inject,
    struct sbx_err *err)
{
	const char *image = sbx_json_str(net, "image");
	char *p;
	int ok;

	if (!json_array_size(inject))
		return 0;
	p = sbx_xasprintf("%s/ca.crt", dir);
	ok = access(p, F_OK) == 0;
	free(p);
	if (ok)
		return 0;
	if (image)
		return ca_live(dir, sbx_json_str(net, "id") ? sbx_json_str(net,
		    "id") : "?", image, err);
	return sbx_err_set(err, SBX_EX_USAGE, "the sandbox was created "
	    "without header injection: it has no CA to terminate TLS "
	    "with, and the docker backend cannot add one to a running "
	    "container (create it with --inject-header)");
}

static json_t *netd_call(const char *dir, const char *id, json_t *q,
    int *fd, struct sbx_err *err);

/* The helper pid of the sandbox in dir reads net.json again: through its
 * control socket, which answers once it has, or says why it could not;
 * a signal to an older helper without one. */
static int
netd_reload(const char *dir, const char *id, pid_t pid, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/netd.sock", dir);
	int sock = access(p, F_OK) == 0;
	json_t *q, *a;

	free(p);
	if (!sock)
		return kill(pid, SIGHUP) < 0 ? sbx_err_set(err, SBX_EX_FAIL,
		    "cannot signal the network helper:") : 0;
	q = json_pack("{sb}", "reload", 1);
	a = netd_call(dir, id ? id : "?", q, NULL, err);
	json_decref(q);
	if (!a) {
		char why[sizeof err->msg];

		snprintf(why, sizeof why, "%s", err->msg);
		return sbx_err_set(err, SBX_EX_FAIL, "the network helper kept "
		    "the rules it had: %s", why);
	}
	json_decref(a);
	return 0;
}

json_t *
sbx_local_net_dir_rules(const char *dir, const json_t *set,
    struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/net.json", dir), *text;
	json_t *cur = NULL, *out = NULL, *meta = NULL, *px, *inj;
	struct sbx_net_rules rs;
	const char *k[] = {"allow_out", "deny_out"};
	pid_t pid;
	int i;

	if (!(cur = json_load_file(p, 0, NULL))) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s'", p);
		goto out;
	}
	if (set) {
		if (sbx_net_rules_from_json(set, &rs, err) < 0)
			goto out;
		sbx_net_rules_free(&rs);
		for (i = 0; i < 2; i++) {
			json_t *a = json_object_get(set, k[i]);

			json_object_set_new(cur, k[i], a ? json_deep_copy(a) :
			    json_array());
		}
		/* The injections: replaced when set names them ([]: none),
		 * kept when it does not; the first ones with a CA that the
		 * sandbox trusts before sbx-netd is told. */
		if ((inj = json_object_get(set, "inject"))) {
			if (inject_check(inj, err) < 0 ||
			    ca_need(dir, cur, inj, err) < 0 ||
			    write_secret(dir, inj, NULL, err) < 0)
				goto out;
			json_object_set_new(cur, "inject", inject_names(inj));
		}
		/* The proxy: replaced when set names it (null: none), kept
		 * when it does not. */
		if ((px = json_object_get(set, "egress_proxy"))) {
			if (proxy_check(px, err) < 0 ||
			    write_secret(dir, NULL, px, err) < 0)
				goto out;
			if (json_is_object(px))
				json_object_set(cur, "egress_proxy",
				    json_object_get(px, "url"));
			else
				json_object_del(cur, "egress_proxy");
		}
		text = json_dumps(cur, JSON_COMPACT | JSON_PRESERVE_ORDER);
		i = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);
		free(text);
		if (i < 0)
			goto out;
		/* Reloaded by the helper before we return, so that the next
		 * connection has them (SIGHUP when its socket does not
		 * answer); a stopped sandbox's starts with them. */
		free(p);
		p = sbx_xasprintf("%s/meta.json", dir);
		meta = json_load_file(p, 0, NULL);
		pid = (pid_t)sbx_json_int(meta, "net_pid", 0);
		if (pid > 0 && sbx_local_starttime(pid) == (unsigned long long)
		    sbx_json_int(meta, "net_starttime", 0) &&
		    netd_reload(dir, sbx_json_str(cur, "id"), pid, err) < 0)
			goto out;
	}
	out = json_object();
	for (i = 0; i < 2; i++) {
		json_t *a = json_object_get(cur, k[i]);

		json_object_set_new(out, k[i], json_is_array(a) ?
		    json_deep_copy(a) : json_array());
	}
	if (json_is_string(json_object_get(cur, "egress_proxy")))
		json_object_set(out, "egress_proxy", json_object_get(cur,
		    "egress_proxy"));
out:
	json_decref(meta);
	json_decref(cur);
	free(p);
	return out;
}

/* DIR/name (meta.json, net.json), replaced. */
static int
json_save(const char *dir, const char *name, const json_t *o,
    struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/%s", dir, name);
	char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	int rc = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);

	free(text);
	free(p);
	return rc;
}

/* meta.json says network net and sbx-netd netd: what kill, pause and
 * sbx-gc stop. */
static int
meta_netd(const char *dir, json_t *meta, const char *net, pid_t netd,
    struct sbx_err *err)
{
	json_object_set_new(meta, "network", json_string(net));
	json_object_set_new(meta, "net_pid", json_integer(netd));
	json_object_set_new(meta, "net_starttime", json_integer((json_int_t)
	    sbx_local_starttime(netd)));
	return json_save(dir, "meta.json", meta, err);
}

/* A sandbox made with deny and published ports (every sandbox sbxd
 * makes) has a sbx-netd that lets only them in: it gives way to one that
 * lets out too, by set's rules, in net.json with the same ports. What
 * goes through the ports now is cut. */
static json_t *
net_reopen(const char *dir, const char *id, json_t *meta, json_t *net,
    const json_t *set, struct sbx_err *err)
{
	struct sbx_spec spec = {.network = SBX_NET_ALLOW};
	struct sbx_err e2;
	const char *image;
	json_t *out;
	pid_t pid, netd = 0;
	char *p;

	if (!(pid = live_init(dir, id, meta, err)) ||
	    !(out = sbx_local_net_dir_rules(dir, set, err))) {
		json_decref(net);
		return NULL;
	}
	/* As the rules left it. */
	p = sbx_xasprintf("%s/net.json", dir);
	json_decref(net);
	net = json_load_file(p, 0, NULL);
	free(p);
	if (!net) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s/net.json'", dir);
		goto fail;
	}
	image = sbx_json_str(net, "image");
	json_object_del(net, "network");
	if (json_save(dir, "net.json", net, err) < 0)
		goto fail;
	sbx_local_net_stop_of(meta);
	if (sbx_local_net_start(dir, id, image ? image : "/", pid, &spec,
	    &netd, err) == 0 && meta_netd(dir, meta, "allow", netd, err) == 0)
		goto out;
	/* The ports at least, as before. */
	sbx_local_net_stop(netd, sbx_local_starttime(netd));
	json_object_set_new(net, "network", json_string("deny"));
	spec.network = SBX_NET_DENY;
	if (json_save(dir, "net.json", net, &e2) == 0 &&
	    sbx_local_net_start(dir, id, image ? image : "/", pid, &spec,
	    &netd, &e2) == 0)
		meta_netd(dir, meta, "deny", netd, &e2);
fail:
	json_decref(out);
	out = NULL;
out:
	json_decref(net);
	return out;
}

/* sbx-net --network allow on a sandbox made with deny, which runs: the
 * rules of set into a new net.json, a CA when set injects headers, and a
 * sbx-netd started into the sandbox's network namespace as create starts
 * one, recorded in meta.json for kill, pause and sbx-gc. Nothing left
 * when it fails. */
static int
net_on(const char *dir, const char *id, json_t *meta, const json_t *set,
    struct sbx_err *err)
{
	static const char *const files[] = {"net.json", "net.secret.json"};
	const char *image = sbx_json_str(meta, "image");
	struct sbx_spec spec = {0};
	const json_t *px = json_object_get(set, "egress_proxy");
	pid_t pid, netd = 0;
	char *p;
	size_t i;
	int rc = -1;

	if (!(pid = live_init(dir, id, meta, err)))
		return -1;
	if (!image || !strcmp(image, "host"))
		image = "/";
	spec.network = SBX_NET_ALLOW;
	spec.net_rules = json_pack("{sOsO}", "allow_out",
	    json_object_get(set, "allow_out") ? json_object_get(set,
	    "allow_out") : json_array(), "deny_out", json_object_get(set,
	    "deny_out") ? json_object_get(set, "deny_out") : json_array());
	if (json_array_size(json_object_get(set, "inject")))
		spec.net_inject = json_object_get(set, "inject");
	if (json_is_object(px)) {
		if (proxy_check(px, err) < 0)
			goto out;
		spec.egress_proxy = (json_t *)px;
	}
	if (sbx_local_net_check(&spec, err) < 0)
		goto out;
	/* net.json first: sbx-netd --ca reads it, and sbx-netd finds the
	 * CA made when it starts. */
	if (write_rules(dir, id, image, &spec, err) < 0 ||
	    (spec.net_inject && ca_live(dir, id, image, err) < 0) ||
	    sbx_local_net_start(dir, id, image, pid, &spec, &netd, err) < 0)
		goto fail;
	if (meta_netd(dir, meta, "allow", netd, err) == 0) {
		rc = 0;
		goto out;
	}
fail:
	if (netd)
		sbx_local_net_stop(netd, sbx_local_starttime(netd));
	for (i = 0; i < sizeof files / sizeof files[0]; i++) {
		p = sbx_xasprintf("%s/%s", dir, files[i]);
		unlink(p);
		free(p);
	}
out:
	json_decref(spec.net_rules);
	return rc;
}

json_t *
sbx_local_net_rules(const json_t *ref, const json_t *set, struct sbx_err *err)
{
	json_t *meta = NULL, *net = NULL, *out = NULL, *cut = NULL;
	char *id = NULL, *dir = net_dir(ref, &id, &meta, err), *p;
	const char *want = set ? sbx_json_str(set, "network") : NULL;
	int allow;

	if (!dir)
		return NULL;
	allow = meta_allow(meta);
	p = sbx_xasprintf("%s/net.json", dir);
	net = json_load_file(p, 0, NULL);
	free(p);
	if (!want) {
		if (!allow) {
			no_allow(id, err);
			goto out;
		}
		out = sbx_local_net_dir_rules(dir, set, err);
	} else if (!strcmp(want, "deny")) {
		/* Cut: every new connection denied, the helper stays (as a
		 * sandbox sbxd made with internet and then took it from). */
		cut = json_pack("{s[]s[s]sns[]}", "allow_out", "deny_out",
		    "all", "egress_proxy", "inject");
		if (allow) {
			if (!(out = sbx_local_net_dir_rules(dir, cut, err)))
				goto out;
			json_decref(out);
			out = NULL;
			json_object_set_new(meta, "network", json_string(
			    "deny"));
			if (json_save(dir, "meta.json", meta, err) < 0)
				goto out;
		}
		out = json_pack("{s[]s[]}", "allow_out", "deny_out");
	} else if (allow) {
		out = sbx_local_net_dir_rules(dir, set, err);
	} else if (net && sbx_json_str(net, "network")) {
		out = net_reopen(dir, id, meta, net, set, err);
		net = NULL;
	} else if (net) {
		/* Cut by --network deny before: its helper, given rules. */
		if ((out = sbx_local_net_dir_rules(dir, set, err))) {
			json_object_set_new(meta, "network", json_string(
			    "allow"));
			if (json_save(dir, "meta.json", meta, err) < 0) {
				json_decref(out);
				out = NULL;
			}
		}
	} else if (net_on(dir, id, meta, set, err) == 0)
		out = sbx_local_net_dir_rules(dir, NULL, err);
out:
	json_decref(cut);
	json_decref(net);
	json_decref(meta);
	free(dir);
	free(id);
	return out;
}

/* Whether the sandbox in dir still runs (its init, as in meta.json: the
 * docker backend writes one there too). */
static int
alive(const char *dir)
{
	char *p = sbx_xasprintf("%s/meta.json", dir);
	json_t *meta = json_load_file(p, 0, NULL);
	pid_t pid = (pid_t)sbx_json_int(meta, "pid", 0);
	unsigned long long st = (unsigned long long)sbx_json_int(meta,
	    "starttime", 0);

	free(p);
	json_decref(meta);
	return pid > 0 && st && sbx_local_starttime(pid) == st;
}

/* Copy what fd holds from *off on to stdout. */
static int
copy_from(int fd, off_t *off)
{
	char buf[65536];
	ssize_t n;

	while ((n = pread(fd, buf, sizeof buf, *off)) > 0) {
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			return -1;
		*off += n;
	}
	return fflush(stdout) == 0 && n == 0 ? 0 : -1;
}

int
sbx_local_net_dir_log(const char *dir, int follow, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/net.log", dir);
	struct stat st, now;
	off_t off = 0;
	int fd = -1, rc = 0;

	for (;;) {
		if (fd < 0 && (fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0) {
			off = 0;
			if (fstat(fd, &st) < 0)
				st.st_ino = 0;
		}
		if (fd >= 0 && copy_from(fd, &off) < 0) {
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot write the "
			    "log:");
			break;
		}
		if (!follow)
			break;
		/* Rotated (net.log.1 now): the new file from its start. */
		if (fd >= 0 && (stat(p, &now) < 0 || now.st_ino != st.st_ino)) {
			copy_from(fd, &off);
			close(fd);
			fd = -1;
			continue;
		}
		if (!alive(dir))
			break; /* killed, expired or stopped */
		usleep(100 * 1000);
	}
	if (fd >= 0)
		close(fd);
	free(p);
	return rc;
}

int
sbx_local_net_log(const json_t *ref, int follow, struct sbx_err *err)
{
	json_t *meta;
	char *id = NULL, *dir = net_dir(ref, &id, &meta, err), *p;
	int rc = -1;

	if (!dir)
		return -1;
	/* A sandbox given a network and then cut has its log still. */
	p = sbx_xasprintf("%s/net.log", dir);
	if (!meta_allow(meta) && access(p, F_OK) < 0)
		no_allow(id, err);
	else
		rc = sbx_local_net_dir_log(dir, follow, err);
	free(p);
	json_decref(meta);
	free(dir);
	free(id);
	return rc;
}

/* --- sbx-port --------------------------------------------------------- */

static json_t *
port_obj(json_int_t port, json_int_t host_port)
{
	char url[64];

	snprintf(url, sizeof url, "http://127.0.0.1:%lld",
	    (long long)host_port);
	return json_pack("{sIsssIss}", "port", port, "host", "127.0.0.1",
	    "host_port", host_port, "url", url);
}

/* One request to sbx-netd's control socket in dir, its answer (and fd
 * when fd is not NULL); NULL with err. */
static json_t *
netd_call(const char *dir, const char *id, json_t *q, int *fd,
    struct sbx_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sbx_msg m = {0};
	json_t *a = NULL;
	char *s = NULL;
	int sock = -1;

	if (fd)
		*fd = -1;
	if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/netd.sock", dir) >=
	    (int)sizeof sa.sun_path) {
		sbx_err_set(err, SBX_EX_FAIL, "'%s' is too long for a socket "
		    "path", dir);
		goto out;
	}
	if ((sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(sock, (struct sockaddr *)&sa, sizeof sa) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is not running "
		    "(no network helper)", id);
		goto out;
	}
	s = json_dumps(q, JSON_COMPACT);
	if (!s || sbx_msg_send(sock, 0, s, strlen(s), NULL, 0) < 0 ||
	    sbx_msg_recv(sock, &m) <= 0 || !(a = json_loadb(m.data, m.len, 0,
	    NULL))) {
		sbx_err_set(err, SBX_EX_FAIL, "the network helper of '%s' did "
		    "not answer", id);
		goto out;
	}
	if (sbx_json_str(a, "error")) {
		sbx_err_set(err, SBX_EX_FAIL, "%s", sbx_json_str(a, "error"));
		json_decref(a);
		a = NULL;
		goto out;
	}
	if (fd && m.nfds == 1) {
		*fd = m.fds[0];
		m.nfds = 0;
	}
out:
	sbx_msg_release(&m);
	if (sock >= 0)
		close(sock);
	free(s);
	return a;
}

json_t *
sbx_local_net_dir_ports(const char *dir, const char *id, unsigned port,
    unsigned host_port, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/net.json", dir);
	json_t *net = json_load_file(p, 0, NULL), *out = NULL, *a, *v, *q;
	size_t i;

	free(p);
	a = json_object_get(net, "ports");
	if (!port) {
		out = json_array();
		json_array_foreach(a, i, v)
			if (sbx_json_int(v, "host_port", 0) > 0)
				json_array_append_new(out, port_obj(
				    sbx_json_int(v, "port", 0),
				    sbx_json_int(v, "host_port", 0)));
		goto out;
	}
	if (!net) {
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' has network deny "
		    "and no published port: ports need --network allow or "
		    "--port at create", id);
		goto out;
	}
	q = json_pack("{sIsI}", "publish", (json_int_t)port, "host_port",
	    (json_int_t)host_port);
	v = netd_call(dir, id, q, NULL, err);
	json_decref(q);
	if (v)
		out = port_obj(port, sbx_json_int(v, "host_port", 0));
	json_decref(v);
out:
	json_decref(net);
	return out;
}

json_t *
sbx_local_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = want ? sbx_local_find(want, &id) : NULL;
	json_t *out;

	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "");
		return NULL;
	}
	out = sbx_local_net_dir_ports(dir, id, port, host_port, err);
	free(dir);
	free(id);
	return out;
}

int
sbx_local_port_connect(const json_t *ref, unsigned port, struct sbx_err *err)
{
	const char *dir = sbx_json_str(ref, "dir"), *id = sbx_json_str(ref,
	    "id");
	json_t *q, *a;
	int fd = -1;

	if (!dir || !id)
		return sbx_err_set(err, SBX_EX_DATA, "a local ref without its "
		    "directory");
	q = json_pack("{sI}", "connect", (json_int_t)port);
	a = netd_call(dir, id, q, &fd, err);
	json_decref(q);
	json_decref(a);
	if (a && fd < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "no connection came back");
	return a ? fd : -1;
}
