/* guest.c - sbx-init as /init of a qemu sandbox's VM. Its kernel is
 * Debian's (scripts/qemu-guest), whose virtio drivers are modules: they
 * come in the initramfs, listed in load order in /sbx/modules. The host
 * speaks to it over the virtio port named "sbx" (guest.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "qemu/guest.h"

#define PORT_WAIT_MS 10000
#define DISK_WAIT_MS 2000
#define ROOT "/sbx/root"
#define ARGS_MAX 4096

static int have_root;

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
	}
	fclose(f);
	return rc;
}

/* The port named SBX_GUEST_PORT, opened; it shows once its driver has
 * probed the device. */
static int
open_port(void)
{
	char p[300], name[64], dev[300];
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
				n = read(fd, name, sizeof name - 1);
				close(fd);
				if (n <= 0)
					continue;
				name[n] = '\0';
				name[strcspn(name, "\n")] = '\0';
				if (strcmp(name, SBX_GUEST_PORT))
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
	int s, got = 0;

	while ((w = waitpid(-1, &s, WNOHANG)) > 0)
		if (w == pid) {
			*st = s;
			got = 1;
		}
	return got;
}

/* The command of an EXEC frame, on the disk, its output as OUT frames
 * while it runs, then its EXIT. */
static void
run(int port, struct sbx_msg *m)
{
	uint32_t id = 0, argc = 0, i;
	struct pollfd p[2] = {{.fd = -1}, {.fd = -1}};
	char **argv = NULL, buf[65536];
	int out[2] = {-1, -1}, err[2] = {-1, -1}, open_ = 0, st = 0, done = 0;
	const char *a;
	ssize_t n;
	pid_t pid;

	if (sbx_msg_get_u32(m, &id) < 0 || sbx_msg_get_u32(m, &argc) < 0 ||
	    !argc || argc > ARGS_MAX)
		goto bad;
	argv = sbx_xcalloc(argc + 1, sizeof *argv);
	for (i = 0; i < argc; i++) {
		if (!(a = sbx_msg_get_str(m)))
			goto bad;
		argv[i] = (char *)a;
	}
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
	    (pid = fork()) < 0) {
		say("cannot run a command: %s", strerror(errno));
		send_u32s(port, SBX_GUEST_EXIT, id, 126 << 8, NULL, 0);
		goto out;
	}
	if (pid == 0) {
		if (have_root && chroot(ROOT) < 0)
			_exit(126);
		if (chdir("/") < 0 || dup2(out[1], 1) < 0 ||
		    dup2(err[1], 2) < 0)
			_exit(126);
		close(0);
		open("/dev/null", O_RDONLY);
		clearenv();
		setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
		    "/usr/bin:/sbin:/bin", 1);
		setenv("HOME", "/root", 1);
		execvp(argv[0], argv);
		dprintf(2, "sbx-init: cannot run %s: %s\n", argv[0],
		    strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(out[1]);
	close(err[1]);
	p[0] = (struct pollfd){.fd = out[0], .events = POLLIN};
	p[1] = (struct pollfd){.fd = err[0], .events = POLLIN};
	out[0] = out[1] = err[0] = err[1] = -1;
	open_ = 2;
	while (open_) {
		/* Orphans are reaped while it runs too. */
		if (poll(p, 2, 100) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		done |= reap(pid, &st);
		for (i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			if ((n = read(p[i].fd, buf, sizeof buf)) > 0) {
				send_u32s(port, SBX_GUEST_OUT, id, i + 1, buf,
				    (size_t)n);
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			close(p[i].fd);
			p[i].fd = -1;
			open_--;
		}
	}
	while (!done && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	send_u32s(port, SBX_GUEST_EXIT, id, (uint32_t)st, NULL, 0);
	goto out;
bad:
	sbx_msg_send(port, SBX_GUEST_ERROR, "bad exec frame", 14, NULL, 0);
out:
	for (i = 0; i < 2; i++) {
		if (p[i].fd >= 0)
			close(p[i].fd);
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	free(argv);
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
	    "\"uptime_ms\":%lld}", u.release, (int)getpid(), uptime_ms());
	sbx_msg_send(port, SBX_GUEST_PONG, buf, (size_t)n, NULL, 0);
}

/* The host's frames until it powers the VM off. With no host on the
 * other side, a read of the port ends at once: poll says POLLHUP, and
 * the agent waits for one to come. */
static void
serve(int port)
{
	struct pollfd pfd = {.fd = port, .events = POLLIN};
	struct sbx_msg m;
	int r;

	for (;;) {
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
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
	int port;

	early_mounts();
	if (load_modules() < 0)
		say("%s", "the guest may lack a driver");
	mount_root();
	if ((port = open_port()) < 0) {
		say("no virtio port named %s: powering off", SBX_GUEST_PORT);
		off();
	}
	serve(port);
	off();
	return 1;
}
