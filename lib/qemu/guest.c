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
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "qemu/guest.h"

#define PORT_WAIT_MS 10000

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
		switch (m.type) {
		case SBX_GUEST_PING:
			pong(port);
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
	if ((port = open_port()) < 0) {
		say("no virtio port named %s: powering off", SBX_GUEST_PORT);
		off();
	}
	serve(port);
	off();
	return 1;
}
