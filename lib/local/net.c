/* net.c - network allow for a local sandbox: its rules in net.json and
 * sbx-netd, the helper outside the sandbox that gives its network
 * namespace a way out (lib/netd, cmd/sbx-netd.c). */
#include <arpa/inet.h>
#include <errno.h>
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

/* The grandchild: a session of its own, so that it outlives sbx-create
 * and is nobody's zombie. Only async-signal-safe calls: sbxd forks from
 * a thread. */
static void
netd_child(const char *path, const char *errlog, char *const argv[],
    char *const envp[], int ready, int pidr)
{
	sigset_t none;
	int fd, sig;

	setsid();
	if (fork() != 0)
		_exit(0);
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
	static const char *const keep[] = {"HOME", "XDG_CONFIG_HOME",
	    "SBX_NETWORK_CA_FILE", "SSL_CERT_FILE", "SSL_CERT_DIR", "PATH",
	    "TZ"};
	char *envp[sizeof keep / sizeof keep[0] + 1];
	const char *ev;
	size_t i, ne = 0;
	int ready[2] = {-1, -1}, pp[2] = {-1, -1};
	pid_t c;

	if (pidw)
		*pidw = -1;
	if (write_rules(dir, id, image, spec, err) < 0)
		return -1;
	if (!(path = netd_path(err)))
		return -1;
	/* Only what it reads: sbx-create's environment may hold the value
	 * of an injected header (env:VAR), which sbx-netd has from its
	 * file. */
	for (i = 0; i < sizeof keep / sizeof keep[0]; i++)
		if ((ev = getenv(keep[i])))
			envp[ne++] = sbx_xasprintf("%s=%s", keep[i], ev);
	envp[ne] = NULL;
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
	while (waitpid(c, NULL, 0) < 0 && errno == EINTR)
		;
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
	/* Not our child: gone when its start time is. */
	for (i = 0; i < 500 && sbx_local_starttime(pid) == starttime; i++)
		usleep(1000);
}

void
sbx_local_net_stop_of(const json_t *meta)
{
	sbx_local_net_stop((pid_t)sbx_json_int(meta, "net_pid", 0),
	    (unsigned long long)sbx_json_int(meta, "net_starttime", 0));
}

/* --- sbx-net ------------------------------------------------------------- */

/* The directory of a sandbox with network allow. */
static char *
net_dir(const json_t *ref, char **id, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *dir = want ? sbx_local_find(want, id) : NULL, *p;
	json_t *meta;
	const char *net;
	int allow;

	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "");
		return NULL;
	}
	p = sbx_xasprintf("%s/meta.json", dir);
	meta = json_load_file(p, 0, NULL);
	free(p);
	net = sbx_json_str(meta, "network");
	allow = net && !strcmp(net, "allow");
	json_decref(meta);
	if (!allow) {
		sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' has network "
		    "deny: rules need --network allow", *id);
		free(dir);
		free(*id);
		*id = NULL;
		return NULL;
	}
	return dir;
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

/* Injections need DIR/ca.crt: sbx-netd makes it at the create of a
 * sandbox with some, and the sandbox's trust store has it from then. */
static int
ca_check(const char *dir, const json_t *inject, struct sbx_err *err)
{
	char *p;
	int ok;

	if (!json_array_size(inject))
		return 0;
	p = sbx_xasprintf("%s/ca.crt", dir);
	ok = access(p, F_OK) == 0;
	free(p);
	if (!ok)
		return sbx_err_set(err, SBX_EX_USAGE, "the sandbox was created "
		    "without header injection: it has no CA to terminate TLS "
		    "with, so none can be added now (create it with "
		    "--inject-header)");
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
		 * kept when it does not; new ones only with the CA the
		 * sandbox has trusted since its create. */
		if ((inj = json_object_get(set, "inject"))) {
			if (inject_check(inj, err) < 0 ||
			    ca_check(dir, inj, err) < 0 ||
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
		/* Reloaded by the helper; a stopped sandbox's starts with
		 * it. */
		free(p);
		p = sbx_xasprintf("%s/meta.json", dir);
		meta = json_load_file(p, 0, NULL);
		pid = (pid_t)sbx_json_int(meta, "net_pid", 0);
		if (pid > 0 && sbx_local_starttime(pid) == (unsigned long long)
		    sbx_json_int(meta, "net_starttime", 0))
			kill(pid, SIGHUP);
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

json_t *
sbx_local_net_rules(const json_t *ref, const json_t *set, struct sbx_err *err)
{
	char *id = NULL, *dir = net_dir(ref, &id, err);
	json_t *out;

	if (!dir)
		return NULL;
	out = sbx_local_net_dir_rules(dir, set, err);
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
	char *id = NULL, *dir = net_dir(ref, &id, err);
	int rc;

	if (!dir)
		return -1;
	rc = sbx_local_net_dir_log(dir, follow, err);
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
