/* guest.c - sbx-init as /init of a qemu sandbox's VM. Its kernel is
 * Debian's (scripts/qemu-guest), whose virtio drivers are modules: they
 * come in the initramfs, listed in load order in /sbx/modules. The host
 * speaks to it over the virtio port named "sbx" (guest.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "local/local.h"
#include "msg.h"
#include "qemu/guest.h"

#define PORT_WAIT_MS 10000
#define DISK_WAIT_MS 2000
#define ROOT "/sbx/root"
/* As many arguments as a frame may carry (sbx-sync's paths); the
 * kernel's own limit on their size still applies. */
#define ARGS_MAX (1u << 20)

static int have_root;

/* The ports (SBX_GUEST_PORT, then SBX_GUEST_PORT.1 ...: as many as the
 * kernel's command line says, sbx.ports=): PID 1 serves the first, a
 * child of its each other one, so that their commands run side by side. */
static int nports = 1;
static int ports[SBX_GUEST_PORTS];
static pid_t servers[SBX_GUEST_PORTS]; /* PID 1's: 0 when one died */
static int is_init = 1;

static void
say(const char *fmt, const char *arg)
{
	dprintf(2, "sbx-init: ");
	dprintf(2, fmt, arg);
	dprintf(2, "\n");
}

/* No userspace to reboot into: a PID 1 that ends panics the kernel
 * (panic=-1 reboots, and QEMU's -no-reboot ends). */
static void
off(void)
{
	sync();
	reboot(RB_POWER_OFF);
	_exit(1);
}

static void
early_mounts(void)
{
	int fd;

	mkdir("/dev", 0755);
	mkdir("/proc", 0555);
	mkdir("/sys", 0555);
	if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") < 0 &&
	    errno != EBUSY)
		say("cannot mount /dev: %s", strerror(errno));
	/* The console for what the agent has to say (the host keeps its
	 * last lines for an error). */
	if ((fd = open("/dev/console", O_RDWR | O_NOCTTY)) >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) < 0)
		say("cannot mount /proc: %s", strerror(errno));
	if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) < 0)
		say("cannot mount /sys: %s", strerror(errno));
	/* A cgroup per command: a deadline's SIGKILL reaches all it
	 * started, those that left its session too. favordynmods: a process
	 * moved into it waits for no RCU grace period, which an idle guest
	 * ends only at a timer tick of its own. */
	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, "favordynmods") < 0)
		say("cannot mount the cgroups: %s", strerror(errno));
	/* The ptys of commands with -t: /dev/ptmx opens the instance at
	 * /dev/pts. */
	mkdir("/dev/pts", 0755);
	if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "mode=0620,ptmxmode=0666") < 0)
		say("cannot mount /dev/pts: %s", strerror(errno));
}

/* /sbx/modules, in order: each from /sbx/mod/NAME.ko. */
static int
load_modules(void)
{
	FILE *f = fopen("/sbx/modules", "re");
	char line[256], path[320];
	size_t n;
	int fd, rc = 0;

	if (!f)
		return errno == ENOENT ? 0 : -1;
	while (fgets(line, sizeof line, f)) {
		n = strcspn(line, "\r\n");
		line[n] = '\0';
		if (!n || line[0] == '#')
			continue;
		snprintf(path, sizeof path, "/sbx/mod/%s.ko", line);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 ||
		    (syscall(SYS_finit_module, fd, "", 0) < 0 &&
		    errno != EEXIST)) {
			say("cannot load module %s", line);
			rc = -1;
		}
		if (fd >= 0)
			close(fd);
		/* Loaded: its file in the initramfs (RAM) is of no more
		 * use, and its pages serve the guest's next allocations. */
		unlink(path);
	}
	fclose(f);
	return rc;
}

/* The port called name, opened; it shows once its driver has probed
 * the device. */
static int
open_port(const char *name)
{
	char p[300], got[64], dev[300];
	struct dirent *e;
	DIR *d;
	ssize_t n;
	int fd, i;

	for (i = 0; i < PORT_WAIT_MS / 10; i++) {
		if ((d = opendir("/sys/class/virtio-ports"))) {
			while ((e = readdir(d))) {
				if (e->d_name[0] == '.')
					continue;
				snprintf(p, sizeof p, "/sys/class/virtio-ports/"
				    "%s/name", e->d_name);
				if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
					continue;
				n = read(fd, got, sizeof got - 1);
				close(fd);
				if (n <= 0)
					continue;
				got[n] = '\0';
				got[strcspn(got, "\n")] = '\0';
				if (strcmp(got, name))
					continue;
				snprintf(dev, sizeof dev, "/dev/%s", e->d_name);
				closedir(d);
				return open(dev, O_RDWR | O_CLOEXEC);
			}
			closedir(d);
		}
		usleep(10000);
	}
	errno = ENODEV;
	return -1;
}

/* The sandbox's disk, when the VM has one (its driver has probed it:
 * /sys/block/vda), at ROOT; its node comes from devtmpfs's thread. */
static void
mount_root(void)
{
	int i;

	if (access("/sys/block/vda", F_OK) < 0)
		return;
	mkdir(ROOT, 0755);
	for (i = 0; i < DISK_WAIT_MS / 10 && access("/dev/vda", F_OK) < 0; i++)
		usleep(10000);
	if (mount("/dev/vda", ROOT, "ext4", 0, NULL) < 0) {
		say("cannot mount its disk: %s", strerror(errno));
		return;
	}
	have_root = 1;
	/* What a command expects of its root. */
	mkdir(ROOT "/proc", 0555);
	mkdir(ROOT "/sys", 0555);
	mkdir(ROOT "/dev", 0755);
	if (mount("proc", ROOT "/proc", "proc", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, NULL) < 0 || mount("sysfs", ROOT "/sys", "sysfs",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 || mount("devtmpfs",
	    ROOT "/dev", "devtmpfs", MS_NOSUID, "mode=0755") < 0)
		say("cannot mount /proc, /sys or /dev on its disk: %s",
		    strerror(errno));
	mkdir(ROOT "/dev/pts", 0755);
	if (mount("devpts", ROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "mode=0620,ptmxmode=0666") < 0)
		say("cannot mount /dev/pts on its disk: %s", strerror(errno));
}

/* The value of key= on the kernel's command line (sbx.hostname=,
 * sbx.ports=), in buf; 0 if it has none. */
static int
cmdline(const char *key, char *buf, size_t size)
{
	char line[4096], want[64], *h;
	ssize_t n;
	size_t len;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, line + 1, sizeof line - 2);
	close(fd);
	if (n <= 0)
		return 0;
	line[0] = ' ';
	line[n + 1] = '\0';
	snprintf(want, sizeof want, " %s=", key);
	if (!(h = strstr(line, want)))
		return 0;
	h += strlen(want);
	len = strcspn(h, " \n");
	if (!len || len >= size)
		return 0;
	memcpy(buf, h, len);
	buf[len] = '\0';
	return 1;
}

/* The kernel's fault-around (how much of a file a page fault maps
 * around its page, 64 KiB by default) as sbx.fault_around= says: under
 * TCG 4 KiB, the faulting page alone, by which the guest's own work in
 * an exec of true went 2.83 -> 2.17 ms of its clock (a static busybox's
 * start mapped, then unmapped at its exit, pages it never touched).
 * debugfs is the knob's only place. */
static void
fault_around(void)
{
	char v[32];
	int fd;

	if (!cmdline("sbx.fault_around", v, sizeof v))
		return;
	if (mount("debugfs", "/sys/kernel/debug", "debugfs", MS_NOSUID |
	    MS_NODEV | MS_NOEXEC, NULL) < 0) {
		say("cannot mount debugfs: %s", strerror(errno));
		return;
	}
	if ((fd = open("/sys/kernel/debug/fault_around_bytes", O_WRONLY |
	    O_CLOEXEC)) < 0 || write(fd, v, strlen(v)) < 0)
		say("cannot set fault_around_bytes: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	umount("/sys/kernel/debug");
}

/* The hostname the kernel's command line says (the sandbox's name or
 * id). */
static void
hostname(void)
{
	char h[256];

	if (cmdline("sbx.hostname", h, sizeof h) &&
	    sethostname(h, strlen(h)) < 0)
		say("cannot set the hostname: %s", strerror(errno));
}

/* An interface up, with addr/24 when addr is not NULL. */
static int
if_up(int s, const char *name, const char *addr)
{
	struct ifreq r = {0};
	struct sockaddr_in *a = (struct sockaddr_in *)&r.ifr_addr;

	snprintf(r.ifr_name, sizeof r.ifr_name, "%s", name);
	if (addr) {
		a->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &a->sin_addr);
		if (ioctl(s, SIOCSIFADDR, &r) < 0)
			return -1;
		inet_pton(AF_INET, "255.255.255.0", &a->sin_addr);
		if (ioctl(s, SIOCSIFNETMASK, &r) < 0)
			return -1;
	}
	if (ioctl(s, SIOCGIFFLAGS, &r) < 0)
		return -1;
	r.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(s, SIOCSIFFLAGS, &r);
}

/* lo, and with network allow the VM's NIC (eth0: QEMU's user-mode
 * network, whose host side is in a network namespace that sbx-netd
 * serves) at SBX_GUEST_NET_ADDR, its gateway and resolver QEMU's; the
 * root's /etc/resolv.conf names that resolver (a query to any other
 * goes through sbx-netd's DNS all the same). */
static void
net_up(void)
{
	struct rtentry rt = {0};
	struct sockaddr_in *gw = (struct sockaddr_in *)&rt.rt_gateway;
	static const char conf[] = "nameserver " SBX_GUEST_NET_DNS "\n";
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), fd;

	if (s < 0 || if_up(s, "lo", NULL) < 0)
		say("cannot bring lo up: %s", strerror(errno));
	if (s < 0 || access("/sys/class/net/eth0", F_OK) < 0) {
		if (s >= 0)
			close(s);
		return;
	}
	((struct sockaddr_in *)&rt.rt_dst)->sin_family = AF_INET;
	((struct sockaddr_in *)&rt.rt_genmask)->sin_family = AF_INET;
	gw->sin_family = AF_INET;
	inet_pton(AF_INET, SBX_GUEST_NET_GW, &gw->sin_addr);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	if (if_up(s, "eth0", SBX_GUEST_NET_ADDR) < 0 ||
	    ioctl(s, SIOCADDRT, &rt) < 0)
		say("cannot bring its network up: %s", strerror(errno));
	close(s);
	if (!have_root)
		return;
	/* The image's, if any, names a resolver of the host it came from
	 * (or a loopback one, not in this VM). */
	mkdir(ROOT "/etc", 0755);
	unlink(ROOT "/etc/resolv.conf");
	if ((fd = open(ROOT "/etc/resolv.conf", O_WRONLY | O_CREAT |
	    O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0 ||
	    write(fd, conf, sizeof conf - 1) != (ssize_t)(sizeof conf - 1))
		say("cannot write /etc/resolv.conf: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void
send_u32s(int port, uint32_t type, uint32_t a, uint32_t b, const void *p,
    size_t n)
{
	struct sbx_buf f = SBX_BUF_INIT;

	sbx_msg_put_u32(&f, a);
	sbx_msg_put_u32(&f, b);
	if (n)
		sbx_buf_add(&f, p, n);
	sbx_msg_send(port, type, f.data, f.len, NULL, 0);
	sbx_buf_release(&f);
}

/* PID 1 reaps what the commands left behind once it ends; 1 when pid
 * was among them (its wait status in *st). */
static int
reap(pid_t pid, int *st)
{
	pid_t w;
	int s, got = 0, i;

	while ((w = waitpid(-1, &s, WNOHANG)) > 0) {
		if (w == pid) {
			*st = s;
			got = 1;
		}
		for (i = 1; i < nports; i++)
			if (servers[i] == w)
				servers[i] = 0;
	}
	return got;
}

/* A command's argv and env, as an EXEC frame carries them. */
static char **
strings(struct sbx_msg *m, uint32_t *count, int need)
{
	uint32_t n, i;
	char **v;

	if (sbx_msg_get_u32(m, &n) < 0 || n > ARGS_MAX || (need && !n))
		return NULL;
	v = sbx_xcalloc(n + 1, sizeof *v);
	for (i = 0; i < n; i++)
		if (!(v[i] = (char *)sbx_msg_get_str(m))) {
			free(v);
			return NULL;
		}
	*count = n;
	return v;
}

/* mkdir -p of an absolute path. */
static void
mkdirs(const char *path)
{
	char p[4096], *s;

	snprintf(p, sizeof p, "%s", path);
	for (s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

/* Why a command did not start, to the agent through fd (close-on-exec:
 * nothing comes when it did), and the end. */
static void
cannot(int fd, uint32_t stage, int status)
{
	uint32_t w[2] = {stage, (uint32_t)errno};

	if (write(fd, w, sizeof w) < 0)
		_exit(status);
	_exit(status);
}

/* The cgroup of the commands of this port's server (sbx-cmd.N). */
static char cg[64] = "/sys/fs/cgroup/sbx-cmd.0";

static int
cg_open(const char *file, int flags)
{
	char p[128];

	snprintf(p, sizeof p, "%s/%s", cg, file);
	return open(p, flags | O_CLOEXEC);
}

/* The cgroup of the commands, for the one that starts: emptied of what
 * earlier ones left there only when they are gone (a background process
 * lives on: it moves to the top). -1 without cgroups. */
static int
cg_new(void)
{
	char buf[4096];
	ssize_t n;
	int fd, to;

	if (mkdir(cg, 0755) < 0 && errno != EEXIST)
		return -1;
	/* What the last command left running stays, outside its reach. */
	if ((fd = cg_open("cgroup.procs", O_RDONLY)) >= 0) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0 && (to = open("/sys/fs/cgroup/cgroup.procs",
		    O_WRONLY | O_CLOEXEC)) >= 0) {
			char *p = buf, *e;

			buf[n] = '\0';
			for (; *p; p = e + (*e != '\0')) {
				e = p + strcspn(p, "\n");
				if (e > p && write(to, p, (size_t)(e - p)) < 0)
					continue;
			}
			close(to);
		}
	}
	return 0;
}

/* SIGKILL to all of the running command's cgroup. */
static void
cg_kill(void)
{
	int fd = cg_open("cgroup.kill", O_WRONLY);

	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			say("cannot kill a command's cgroup: %s",
			    strerror(errno));
		close(fd);
	}
}

/* A command's environment: PATH and HOME (home: HOME=...) unless env has
 * them, then env,
 * each a putenv(3) of the one before: a later K=V over an earlier K, a
 * bare K unsets it. Its strings are env's. */
static char **
command_env(char **env, char *home)
{
	static char path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
	    "/usr/bin:/sbin:/bin";
	size_t i, j, k = 0, n, key;
	char **v;

	for (n = 0; env[n]; n++)
		;
	v = sbx_xcalloc(n + 3, sizeof *v);
	v[k++] = path;
	v[k++] = home;
	for (i = 0; i < n; i++) {
		key = strcspn(env[i], "=");
		for (j = 0; j < k; j++)
			if (!strncmp(v[j], env[i], key) && v[j][key] == '=')
				break;
		if (env[i][key] != '=') {
			if (j < k) {
				memmove(v + j, v + j + 1, (k - j) * sizeof *v);
				k--;
			}
		} else if (j < k) {
			v[j] = env[i];
		} else {
			v[k++] = env[i];
		}
	}
	return v;
}

/* execvp(3), but a directory of PATH without the command is passed by a
 * lookup, not an execve: under TCG each execve that fails costs ~0.25 ms
 * of the guest's (a new mm, the strings copied), and "true" is the
 * fourth of the default PATH. What execvp does with one that is there
 * stays its: a script without #! to /bin/sh, EACCES kept while later
 * directories are tried. */
static void
exec_path(char **argv)
{
	const char *path = getenv("PATH"), *d, *e;
	char p[4096];
	int denied = 0;
	size_t n;

	if (strchr(argv[0], '/') || !path || !*argv[0]) {
		execvp(argv[0], argv);
		return;
	}
	for (d = path;; d = e + 1) {
		e = strchrnul(d, ':');
		n = (size_t)(e - d);
		/* An empty directory is the workdir, as for execvp. */
		if (snprintf(p, sizeof p, "%.*s/%s", n ? (int)n : 1, n ? d : ".",
		    argv[0]) < (int)sizeof p && (access(p, F_OK) == 0 ||
		    (errno != ENOENT && errno != ENOTDIR))) {
			execvp(p, argv);
			if (errno == EACCES)
				denied = 1;
			else if (errno != ENOENT && errno != ENOTDIR &&
			    errno != ESTALE && errno != ENODEV &&
			    errno != ETIMEDOUT)
				return;
		}
		if (!*e)
			break;
	}
	errno = denied ? EACCES : ENOENT;
}

/* tty: the pty's other end, for all of stdio. A child of vfork(2): it
 * writes no memory of the agent's, and execs or _exits. */
static void
child(uint32_t flags, const char *cwd, char **argv, int in, int out,
    int err, int tty, int why, const struct sbx_local_user *u)
{
	sigset_t none;
	int cgp;

	setsid();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((cgp = cg_open("cgroup.procs", O_WRONLY)) >= 0) {
		if (write(cgp, "0", 1) < 0)
			say("cannot join the command's cgroup: %s",
			    strerror(errno));
		close(cgp);
	}
	if (have_root && chroot(ROOT) < 0)
		cannot(why, SBX_GUEST_START_ROOT, 125);
	if (tty >= 0) {
		if (ioctl(tty, TIOCSCTTY, 0) < 0)
			cannot(why, SBX_GUEST_START_ROOT, 125);
		in = out = err = tty;
	}
	if (dup2(out, 1) < 0 || dup2(err, 2) < 0)
		cannot(why, SBX_GUEST_START_ROOT, 125);
	if (in >= 0)
		dup2(in, 0);
	else if ((in = open("/dev/null", O_RDONLY)) >= 0 && in != 0)
		dup2(in, 0);
	if ((flags & SBX_GUEST_X_MKDIR) && *cwd)
		mkdirs(cwd);
	if (chdir(*cwd ? cwd : "/") < 0)
		cannot(why, SBX_GUEST_START_WORKDIR, 125);
	/* Its user (-u), once its workdir is made. */
	if (u->set && (syscall(SYS_setgroups, (size_t)u->ngroups,
	    u->groups) < 0 || syscall(SYS_setresgid, u->gid, u->gid,
	    u->gid) < 0 || syscall(SYS_setresuid, u->uid, u->uid, u->uid) < 0))
		cannot(why, SBX_GUEST_START_USER, 125);
	/* environ is the command's (run()): its PATH is searched. */
	exec_path(argv);
	cannot(why, SBX_GUEST_START_EXEC, errno == ENOENT ? 127 : 126);
}

/* child() in a vfork(2): under TCG a fork's copy of the agent's memory,
 * its faults and its teardown at the exec cost ~2 ms of an exec's ~7. We
 * go on once the child has exec'd (or ended), envp its environ. */
static pid_t
spawn(char **envp, uint32_t flags, const char *cwd, char **argv, int in,
    int out, int err, int tty, int why, const struct sbx_local_user *u)
{
	char **volatile ours = environ;
	pid_t pid;

	environ = envp;
	if ((pid = vfork()) == 0)
		child(flags, cwd, argv, in, out, err, tty, why, u);
	environ = ours;
	return pid;
}

static void pong(int port);

#define CREATE_ENV "/sbx/env" /* SETENV's strings, in the initramfs */

/* SETENV: its strings, NUL-ended, into CREATE_ENV (RAM: the initramfs),
 * where each port's server reads them; then the answer. */
static void
setenv_frame(int port, struct sbx_msg *m)
{
	struct sbx_buf b = SBX_BUF_INIT;
	uint32_t n = 0, i;
	const char *s;
	int ok = sbx_msg_get_u32(m, &n) == 0;

	for (i = 0; ok && i < n; i++)
		if ((ok = (s = sbx_msg_get_str(m)) != NULL))
			sbx_buf_add(&b, s, strlen(s) + 1);
	if (ok) {
		int fd = open(CREATE_ENV ".tmp", O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600);

		ok = fd >= 0 && (!b.len || write(fd, b.data, b.len) ==
		    (ssize_t)b.len);
		if (fd >= 0)
			close(fd);
		ok = ok && rename(CREATE_ENV ".tmp", CREATE_ENV) == 0;
	}
	if (!ok)
		say("%s", "cannot keep the sandbox's environment");
	sbx_buf_release(&b);
	sbx_msg_send(port, SBX_GUEST_SETENV, NULL, 0, NULL, 0);
}

/* env with its entry "=" replaced by the sandbox's -e (CREATE_ENV, read
 * once by this port's server: SETENV comes before any EXEC, and once);
 * free the array. */
static char **
with_create_env(char **env)
{
	static struct sbx_buf held = SBX_BUF_INIT, *hold = &held;
	static int loaded;
	size_t n = 0, m = 0, i, k = 0;
	char **v, *p;
	int fd;

	if (!loaded && (fd = open(CREATE_ENV, O_RDONLY | O_CLOEXEC)) >= 0) {
		char buf[4096];
		ssize_t r;

		while ((r = read(fd, buf, sizeof buf)) > 0)
			sbx_buf_add(hold, buf, (size_t)r);
		close(fd);
	}
	loaded = 1;
	for (p = hold->data; p && p < hold->data + hold->len; p += strlen(p) + 1)
		m++;
	while (env[n])
		n++;
	v = sbx_xcalloc(n + m + 1, sizeof *v);
	for (i = 0; i < n; i++) {
		if (strcmp(env[i], "=")) {
			v[k++] = env[i];
			continue;
		}
		for (p = hold->data; p && p < hold->data + hold->len;
		    p += strlen(p) + 1)
			v[k++] = p;
	}
	return v;
}

/* A command that does not start, and why: its EXIT with 125, stage, no
 * errno and the message. */
static void
refuse(int port, uint32_t id, uint32_t stage, const char *msg)
{
	struct sbx_buf b = SBX_BUF_INIT;

	sbx_msg_put_u32(&b, id);
	sbx_msg_put_u32(&b, 125u << 8);
	sbx_msg_put_u32(&b, stage);
	sbx_msg_put_u32(&b, 0);
	sbx_buf_add(&b, msg, strlen(msg));
	sbx_msg_send(port, SBX_GUEST_EXIT, b.data, b.len, NULL, 0);
	sbx_buf_release(&b);
}

/* What the host sends while a command runs: its stdin (queued in
 * *pend until the pipe takes it), signals, pings. 0 when the port has
 * ended for now. */
static int
steer(int port, uint32_t id, pid_t pid, int *in, struct sbx_buf *pend,
    int *eof)
{
	struct sbx_msg m;
	uint32_t mid = 0, sig = 0, rows = 0, cols = 0;
	struct winsize ws = {0};
	int r;

	if ((r = sbx_msg_recv(port, &m)) <= 0)
		return 0;
	if (m.type == SBX_GUEST_PING) {
		pong(port);
	} else if (m.type == SBX_GUEST_SYNC) {
		sync();
		sbx_msg_send(port, SBX_GUEST_SYNC, NULL, 0, NULL, 0);
	} else if (m.type == SBX_GUEST_IN && sbx_msg_get_u32(&m, &mid) == 0 &&
	    mid == id) {
		if (m.len == m.off)
			*eof = 1;
		else if (*in >= 0)
			sbx_buf_add(pend, m.data + m.off, m.len - m.off);
	} else if (m.type == SBX_GUEST_SIGNAL && sbx_msg_get_u32(&m, &mid) ==
	    0 && sbx_msg_get_u32(&m, &sig) == 0 && mid == id && sig < 65) {
		/* A kill (a deadline, a client gone) is for all it started;
		 * a forwarded signal for its session. */
		if (sig == SIGKILL)
			cg_kill();
		kill(-pid, (int)sig);
		kill(pid, (int)sig);
	} else if (m.type == SBX_GUEST_WINCH && sbx_msg_get_u32(&m, &mid) ==
	    0 && sbx_msg_get_u32(&m, &rows) == 0 && sbx_msg_get_u32(&m,
	    &cols) == 0 && mid == id && *in >= 0) {
		/* With a pty, *in is its master. */
		ws.ws_row = (unsigned short)rows;
		ws.ws_col = (unsigned short)cols;
		ioctl(*in, TIOCSWINSZ, &ws);
	} else if (m.type != SBX_GUEST_IN && m.type != SBX_GUEST_SIGNAL &&
	    m.type != SBX_GUEST_WINCH) {
		sbx_msg_send(port, SBX_GUEST_ERROR, "busy", 4, NULL, 0);
	}
	sbx_msg_release(&m);
	return 1;
}

/* A pty of rows x cols: its master in *master, the other end in *tty. */
static int
open_pty(uint32_t rows, uint32_t cols, int *master, int *tty)
{
	struct winsize ws = {(unsigned short)rows, (unsigned short)cols, 0, 0};
	int unlock = 0;

	if ((*master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		return -1;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 ||
	    (*tty = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0) {
		close(*master);
		*master = -1;
		return -1;
	}
	if (ws.ws_row && ws.ws_col)
		ioctl(*master, TIOCSWINSZ, &ws);
	return 0;
}

/* The command of an EXEC frame, on the disk, its stdin from IN frames,
 * its output as OUT frames while it runs, then its EXIT. */
static void
run(int port, struct sbx_msg *m)
{
	uint32_t id = 0, flags = 0, envc = 0, argc = 0, i;
	struct pollfd p[4];
	struct sbx_buf pend = SBX_BUF_INIT;
	struct sbx_local_user u = {0};
	char **full = NULL;
	char **argv = NULL, **env = NULL, **cenv = NULL, buf[8 + 65536];
	char home[sizeof u.home + 8] = "HOME=/root";
	const char *user = NULL;
	int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
	int why[2] = {-1, -1}, tty = -1, r;
	uint32_t start[2] = {0, 0}, rows = 0, cols = 0;
	int open_ = 0, st = 0, done = 0, ended = 0, eof = 0;
	const char *cwd;
	ssize_t n;
	pid_t pid;

	if (sbx_msg_get_u32(m, &id) < 0 || sbx_msg_get_u32(m, &flags) < 0 ||
	    !(cwd = sbx_msg_get_str(m)) || !(env = strings(m, &envc, 0)) ||
	    !(argv = strings(m, &argc, 1)))
		goto bad;
	if ((flags & SBX_GUEST_X_TTY) && (sbx_msg_get_u32(m, &rows) < 0 ||
	    sbx_msg_get_u32(m, &cols) < 0))
		goto bad;
	if ((flags & SBX_GUEST_X_USER) && !(user = sbx_msg_get_str(m)))
		goto bad;
	/* Its user, by the disk's /etc/passwd and /etc/group: one it does
	 * not know runs nothing. */
	if (user) {
		struct sbx_err e = {0};

		if (sbx_local_user_lookup(have_root ? ROOT : "/", user, &u,
		    &e) < 0) {
			refuse(port, id, SBX_GUEST_START_USER, e.msg);
			goto out;
		}
		snprintf(home, sizeof home, "HOME=%s", u.home);
	}
	if (flags & SBX_GUEST_X_TTY)
		r = open_pty(rows, cols, &out[0], &tty);
	else
		r = pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ?
		    -1 : 0;
	cg_new();
	full = with_create_env(env);
	cenv = command_env(full, home);
	if (r < 0 || pipe2(why, O_CLOEXEC) < 0 || ((flags & SBX_GUEST_X_STDIN) &&
	    !(flags & SBX_GUEST_X_TTY) && pipe2(in, O_CLOEXEC) < 0) ||
	    (pid = spawn(cenv, flags, cwd, argv, in[0], out[1], err[1], tty,
	    why[1], &u)) < 0) {
		say("cannot run a command: %s", strerror(errno));
		send_u32s(port, SBX_GUEST_EXIT, id, 126 << 8, NULL, 0);
		goto out;
	}
	close(why[1]);
	why[1] = -1;
	if (tty >= 0) {
		close(tty);
		tty = -1;
		/* Its input goes to the master too: a second fd of it. */
		in[1] = fcntl(out[0], F_DUPFD_CLOEXEC, 3);
	} else {
		close(out[1]);
		close(err[1]);
		out[1] = err[1] = -1;
	}
	/* It has started, or said why not. */
	while ((n = read(why[0], start, sizeof start)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof start)
		start[0] = start[1] = 0;
	if (in[0] >= 0) {
		close(in[0]);
		in[0] = -1;
	}
	if (in[1] >= 0)
		fcntl(in[1], F_SETFL, O_NONBLOCK);
	open_ = err[0] >= 0 ? 2 : 1;
	while (open_) {
		p[0] = (struct pollfd){.fd = out[0], .events = POLLIN};
		p[1] = (struct pollfd){.fd = err[0], .events = POLLIN};
		p[2] = (struct pollfd){.fd = ended ? -1 : port,
		    .events = POLLIN};
		p[3] = (struct pollfd){.fd = pend.len ? in[1] : -1,
		    .events = POLLOUT};
		/* Orphans are reaped while it runs too. */
		if (poll(p, 4, 100) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		done |= reap(pid, &st);
		if (p[2].revents & POLLIN) {
			if (!steer(port, id, pid, &in[1], &pend, &eof))
				ended = 1;
		} else if (p[2].revents & POLLHUP) {
			/* No host: see serve(). */
			usleep(20000);
		}
		if (p[3].fd >= 0 && p[3].revents) {
			n = write(in[1], pend.data, pend.len);
			if (n > 0) {
				memmove(pend.data, pend.data + n, pend.len -
				    (size_t)n);
				pend.len -= (size_t)n;
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* It closed its stdin. */
				pend.len = 0;
				close(in[1]);
				in[1] = -1;
			}
		}
		/* Its stdin ends once what came before the end is in. */
		if (eof && !pend.len && in[1] >= 0) {
			close(in[1]);
			in[1] = -1;
		}
		for (i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			/* Read behind the OUT frame's id and fd: under TCG a
			 * copy of it into a frame of its own cost ~1/10 of
			 * the transfer. */
			if ((n = read(p[i].fd, buf + 8, sizeof buf - 8)) > 0) {
				uint32_t w[2] = {id, i + 1};

				memcpy(buf, w, sizeof w);
				sbx_msg_send(port, SBX_GUEST_OUT, buf, (size_t)n +
				    8, NULL, 0);
				continue;
			}
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			close(p[i].fd);
			if (i == 0)
				out[0] = -1;
			else
				err[0] = -1;
			open_--;
		}
	}
	while (!done && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	send_u32s(port, SBX_GUEST_EXIT, id, (uint32_t)st, start[0] ? start :
	    NULL, start[0] ? sizeof start : 0);
	goto out;
bad:
	sbx_msg_send(port, SBX_GUEST_ERROR, "bad exec frame", 14, NULL, 0);
out:
	for (i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
		if (in[i] >= 0)
			close(in[i]);
		if (why[i] >= 0)
			close(why[i]);
	}
	if (tty >= 0)
		close(tty);
	sbx_buf_release(&pend);
	free(full);
	free(cenv);
	free(argv);
	free(env);
}

static long long
uptime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
pong(int port)
{
	struct utsname u;
	char buf[512];
	int n;

	uname(&u);
	n = snprintf(buf, sizeof buf, "{\"kernel\":\"%s\",\"pid\":%d,"
	    "\"uptime_ms\":%lld,\"ports\":%d,\"proto\":%d}", u.release,
	    (int)getpid(), uptime_ms(), nports, SBX_GUEST_PROTO);
	sbx_msg_send(port, SBX_GUEST_PONG, buf, (size_t)n, NULL, 0);
}

/* The host's frames until it powers the VM off. With no host on the
 * other side, a read of the port ends at once: poll says POLLHUP, and
 * the agent waits for one to come. */
static void serve(int port);

/* The server of port i, a child of PID 1's. */
static void
start_server(int i)
{
	pid_t pid = fork();
	int j;

	if (pid < 0) {
		say("cannot serve a port: %s", strerror(errno));
		return;
	}
	if (pid > 0) {
		servers[i] = pid;
		return;
	}
	is_init = 0;
	for (j = 0; j < nports; j++) {
		servers[j] = 0;
		if (j != i)
			close(ports[j]);
	}
	snprintf(cg, sizeof cg, "/sys/fs/cgroup/sbx-cmd.%d", i);
	serve(ports[i]);
	_exit(0);
}

static void
serve(int port)
{
	struct pollfd pfd = {.fd = port, .events = POLLIN};
	struct sbx_msg m;
	int r, i;

	for (;;) {
		/* PID 1: a port's server that died is started again, at
		 * the next frame of the first port (no timer here: under
		 * TCG's -icount one armed in an idle guest holds its
		 * interrupts back to its tick). */
		if (is_init) {
			reap(0, NULL);
			for (i = 1; i < nports; i++)
				if (!servers[i])
					start_server(i);
		}
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
		if (!pfd.revents)
			continue;
		if (!(pfd.revents & POLLIN)) {
			usleep(20000);
			continue;
		}
		if ((r = sbx_msg_recv(port, &m)) <= 0) {
			/* The host went: the next one starts a frame. */
			if (r < 0)
				say("the port: %s", strerror(errno));
			usleep(20000);
			continue;
		}
		reap(0, NULL);
		switch (m.type) {
		case SBX_GUEST_PING:
			pong(port);
			break;
		case SBX_GUEST_EXEC:
			run(port, &m);
			break;
		case SBX_GUEST_SETENV:
			setenv_frame(port, &m);
			break;
		case SBX_GUEST_SYNC:
			sync();
			sbx_msg_send(port, SBX_GUEST_SYNC, NULL, 0, NULL, 0);
			break;
		case SBX_GUEST_IN:
		case SBX_GUEST_SIGNAL:
		case SBX_GUEST_WINCH:
			/* For a command that has ended. */
			break;
		case SBX_GUEST_POWEROFF:
			sbx_msg_release(&m);
			off();
			break;
		default:
			sbx_msg_send(port, SBX_GUEST_ERROR, "unknown frame", 13,
			    NULL, 0);
		}
		sbx_msg_release(&m);
	}
}

int
sbx_guest_main(void)
{
	char v[16], name[32];
	int i;

	early_mounts();
	if (load_modules() < 0)
		say("%s", "the guest may lack a driver");
	mount_root();
	hostname();
	fault_around();
	net_up();
	if (cmdline("sbx.ports", v, sizeof v)) {
		long want = strtol(v, NULL, 10);

		nports = want < 1 ? 1 : want > SBX_GUEST_PORTS ?
		    SBX_GUEST_PORTS : (int)want;
	}
	if ((ports[0] = open_port(SBX_GUEST_PORT)) < 0) {
		say("no virtio port named %s: powering off", SBX_GUEST_PORT);
		off();
	}
	for (i = 1; i < nports; i++) {
		snprintf(name, sizeof name, "%s.%d", SBX_GUEST_PORT, i);
		if ((ports[i] = open_port(name)) < 0) {
			say("no virtio port named %s", name);
			nports = i;
			break;
		}
	}
	for (i = 1; i < nports; i++)
		start_server(i);
	serve(ports[0]);
	off();
	return 1;
}
