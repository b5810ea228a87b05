/* netd.c - sbx-netd's life: started beside a sandbox, it serves until the
 * sandbox's init exits or it is told to stop; SIGHUP reloads net.json */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "netd.h"

static sigset_t sigs;

static int
ns_open(pid_t pid, const char *ns, struct sbx_err *err)
{
	char path[64];
	int fd;

	snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, ns);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", path);
	return fd;
}

/* Whether fd is the namespace of ours named ns. */
static int
ns_ours(int fd, const char *ns)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof path, "/proc/self/ns/%s", ns);
	return fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The sandbox's pid, one line on stdin (sbx-create starts us before the
 * sandbox exists); then stdin is /dev/null. */
static int
pid_wait(pid_t *pid, struct sbx_err *err)
{
	char line[24];
	size_t n = 0;
	ssize_t r;
	uint64_t v;
	int fd;

	while (n < sizeof line - 1 && !memchr(line, '\n', n)) {
		if ((r = read(0, line + n, sizeof line - 1 - n)) < 0 &&
		    errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if ((fd = open("/dev/null", O_RDONLY)) >= 0) {
		dup2(fd, 0);
		if (fd != 0)
			close(fd);
	}
	if (!n)
		return sbx_err_set(err, SBX_EX_FAIL, "no sandbox: its create "
		    "ended first");
	if (sbx_parse_u64(line, 2, 0x7fffffff, &v) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "invalid pid '%s' on "
		    "stdin", line);
	*pid = (pid_t)v;
	return 0;
}

int
sbx_netd_start(const char *dir, pid_t pid, struct sbx_err *err)
{
	struct pollfd p;
	struct netd_conf *c;
	struct rlimit rl;
	int userfd = -1, netfd = -1, rc = -1;
	int fds[6] = {-1, -1, -1, -1, -1, -1};

	/* Before any thread: they all inherit the mask, and the signals wait
	 * for sbx_netd_run's signalfd. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	netd.dir = dir;
	netd.pid = pid;
	/* A relayed connection holds six fds (two sockets, two pipes): a
	 * thousand of them are more than the usual soft limit of 1024. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (netd_conf_load(dir, &c, err) < 0)
		return -1;
	netd.egress = c->egress;
	netd_conf_set(c);
	if (netd_log_open(dir, err) < 0)
		return -1;
	/* Injection is set at create: its CA, in the sandbox's trust store
	 * before the sandbox starts (sbx-create waits for our "ok"). */
	if (c->ninject && (netd_ca_init(dir, err) < 0 ||
	    netd_inject_init(err) < 0))
		return -1;
	netd.injecting = c->ninject > 0;
	/* While sbx-create makes the sandbox: the fork of the child that
	 * will join its netns (first: it inherits no more than it needs),
	 * the control socket. */
	if (netd_setup_fork(err) < 0 || netd_ctl_bind(err) < 0)
		return -1;
	if (!pid && pid_wait(&pid, err) < 0)
		return -1;
	netd.pid = pid;
	if ((netd.pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot watch process "
		    "%d:", (int)pid);
	if ((userfd = ns_open(pid, "user", err)) < 0 ||
	    (netfd = ns_open(pid, "net", err)) < 0)
		goto out;
	/* The pid could have been reused before the opens: if the process
	 * the pidfd holds still runs, they are its namespaces. */
	p = (struct pollfd){netd.pidfd, POLLIN, 0};
	if (poll(&p, 1, 0) != 0) {
		sbx_err_set(err, SBX_EX_FAIL, "process %d is gone", (int)pid);
		goto out;
	}
	/* A process without a netns of its own: the setup would take the
	 * host's network away (its routes, and a ruleset that drops all
	 * that leaves). */
	if (ns_ours(netfd, "net")) {
		sbx_err_set(err, SBX_EX_FAIL, "process %d is in our network "
		    "namespace, not a sandbox's", (int)pid);
		goto out;
	}
	if (netd_setup(userfd, netfd, netd.egress, fds, &netd.inside,
	    err) < 0)
		goto out;
	netd.tcp = fds[0];
	netd.udp = fds[1];
	netd.udpx = fds[2];
	netd.binder = fds[3];
	netd.raw4 = fds[4];
	netd.raw6 = fds[5];
	if (netd_ports_start(err) < 0)
		goto out;
	rc = 0;
out:
	if (userfd >= 0)
		close(userfd);
	if (netfd >= 0)
		close(netfd);
	return rc;
}

/* From SIGHUP and from the control socket's "reload" (sbx-net, which
 * then knows the new rules hold): one at a time. */
static pthread_mutex_t reload_mu = PTHREAD_MUTEX_INITIALIZER;

int
netd_reload(struct sbx_err *err)
{
	struct netd_conf *c;
	char *p;
	int rc = -1;

	pthread_mutex_lock(&reload_mu);
	if (netd_conf_load(netd.dir, &c, err) < 0)
		goto out;
	/* Injection new to this helper: only with a CA the sandbox trusts
	 * (made at its create, or by sbx-net, which put it into the
	 * sandbox's trust store first). */
	if (c->ninject && !netd.injecting) {
		p = sbx_xasprintf("%s/ca.key", netd.dir);
		if (access(p, F_OK) < 0)
			sbx_err_set(err, SBX_EX_USAGE, "header injection needs "
			    "the sandbox's CA, which it does not have");
		free(p);
		if (err->code || netd_ca_init(netd.dir, err) < 0 ||
		    netd_inject_init(err) < 0) {
			netd_conf_put(c);
			goto out;
		}
		netd.injecting = 1;
	}
	netd_conf_set(c);
	sbx_note("reloaded '%s/net.json'", netd.dir);
	rc = 0;
out:
	pthread_mutex_unlock(&reload_mu);
	return rc;
}

static void
reload(void)
{
	struct sbx_err err = {0};

	if (netd_reload(&err) < 0)
		sbx_warn("%s; the rules stay as they were", err.msg);
}

int
sbx_netd_run(struct sbx_err *err)
{
	struct signalfd_siginfo si;
	struct pollfd p[2];
	int sfd;

	if ((sfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open a signalfd:");
	if (netd.egress && (netd_proxy_start(err) < 0 ||
	    netd_dns_start(err) < 0 || netd_udp_start(err) < 0))
		return -1;
	p[0] = (struct pollfd){sfd, POLLIN, 0};
	p[1] = (struct pollfd){netd.pidfd, POLLIN, 0};
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_set(err, SBX_EX_FAIL, "poll:");
		}
		/* The sandbox is gone: so is everything it could connect. */
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN) ||
		    read(sfd, &si, sizeof si) != sizeof si)
			continue;
		if (si.ssi_signo != SIGHUP)
			break;
		reload();
	}
	netd_proxy_stop();
	if (netd.egress)
		netd_udp_stop();
	return 0;
}
