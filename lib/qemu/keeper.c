/* keeper.c - the process beside a qemu sandbox's VM (qemu.h): QEMU's
 * parent, the holder of its ports (SBX_GUEST_PORTS), each of which it
 * hands to one client at a time: as many commands run side by side; the
 * next client waits in the listener's backlog. Frames pass whole in both
 * directions (msg.c), so a client that dies in the middle of one never
 * leaves the guest half a frame. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qemu.h"

#define PING_MS 1000      /* a ping again, while the guest boots */
#define QUEUE_MAX (1u << 20) /* a side is not read while the other's
			      * queue holds more */
#define STOP_MS 30000     /* a stop's poweroff, before QEMU is killed */
#define TRIM_IDLE_MS 500  /* idle so long after the boot: a trim */
#define TRIM_AGAIN_MS 3000 /* and so long after later activity */
#define TRIM_MIB 32       /* what the balloon takes of the guest's, an
			   * eighth of a smaller VM's memory at most */
#define TRIM_MS 3000      /* and how long it may take it */
#define RAM_FD (3 + SBX_GUEST_PORTS) /* QEMU's fd of the guest's memory */

/* SBX_QEMU_SIG_STOP came. */
static volatile sig_atomic_t stop_asked;

/* A port of the VM's and its client. */
struct slot {
	struct keeper *k;
	int port;        /* our end of QEMU's port */
	int client;      /* -1: none */
	int running;     /* a client's command runs */
	uint32_t run_id;
	int orphan;      /* its client went: it is being ended */
	struct sbx_buf from_port, from_client; /* what came, to a frame's end */
	struct sbx_buf to_port, to_client;     /* frames to go */
};

struct keeper {
	struct slot s[SBX_GUEST_PORTS];
	int nports;      /* what the guest serves (its PONG) */
	int lsn;         /* ./sock */
	int ready;       /* to the creator, until the guest answered */
	pid_t qemu;
	long long last;  /* the last activity, sbx_mono_ms() */
	int act;         /* ./activity, whose mtime is the last exec's start
			  * or end (sbx-ls's last_activity) */
	int pings;       /* pings of the boot not answered yet (port 0) */
	uint64_t timeout;
	long long paused_at; /* since when it is suspended; 0: it is not */
	long long stop_end;  /* a stop's deadline; 0: no stop */
	int off_sent;        /* the guest was told to power off */
	uint64_t trim;       /* the VM's memory, to trim (0: never) */
	long long trimmed;   /* last when the last trim began; -1: none */
	pid_t trimmer;       /* trim()'s process while it runs */
	int ram;             /* the guest's memory (a memfd), or -1 */
	int zeroed;          /* its pages of zeros were given back */
};

/* QEMU's argv with the other ends of our ports as its fds 3 and on (the
 * chardevs sbx0, sbx1 ... of b->argv's ports), in dir; with ram (>= 0)
 * the guest's memory in that memfd (RAM_FD). With net, in a network
 * namespace of its own: *gate then a socket on which it says a byte once
 * it is there and waits for one before it runs QEMU. */
static pid_t
spawn(const struct sbx_qemu_boot *b, const int fd[SBX_GUEST_PORTS],
    int ram, int *gate)
{
	char **argv, c = 0, *dev[SBX_GUEST_PORTS + 1];
	size_t n = 0;
	pid_t keeper = getpid(), pid;
	int log, g[2] = {-1, -1}, i, hi[SBX_GUEST_PORTS + 1];

	while (b->argv[n])
		n++;
	argv = sbx_xcalloc(n + 2 * SBX_GUEST_PORTS + 5, sizeof *argv);
	memcpy(argv, b->argv, n * sizeof *argv);
	for (i = 0; i < SBX_GUEST_PORTS; i++) {
		dev[i] = sbx_xasprintf("socket,id=sbx%d,fd=%d", i, 3 + i);
		argv[n++] = "-chardev";
		argv[n++] = dev[i];
	}
	dev[SBX_GUEST_PORTS] = NULL;
	if (ram >= 0) {
		/* Shared: the keeper's fd to it punches holes (zero_pages). */
		dev[SBX_GUEST_PORTS] = sbx_xasprintf("memory-backend-file,"
		    "id=sbx-ram,size=%llu,mem-path=/proc/self/fd/%d,share=on",
		    (unsigned long long)b->trim, RAM_FD);
		argv[n++] = "-object";
		argv[n++] = dev[SBX_GUEST_PORTS];
		argv[n++] = "-machine";
		argv[n++] = "memory-backend=sbx-ram";
	}
	*gate = -1;
	if (b->net && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
	    g) < 0) {
		for (i = 0; i <= SBX_GUEST_PORTS; i++)
			free(dev[i]);
		free(argv);
		return -1;
	}
	if ((pid = fork()) != 0) {
		for (i = 0; i <= SBX_GUEST_PORTS; i++)
			free(dev[i]);
		free(argv);
		if (g[1] >= 0)
			close(g[1]);
		if (pid < 0 && g[0] >= 0)
			close(g[0]);
		else
			*gate = g[0];
		return pid;
	}
	/* It ends with us, whatever ends us. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != keeper)
		_exit(1);
	/* Its cgroup: the VM's memory and QEMU's own, --cpus. */
	if (b->cg) {
		struct sbx_err e;
		int fds[8], nfd, v2;

		if ((nfd = sbx_cg_join_open(b->cg, fds, &v2, &e)) < 0) {
			dprintf(2, "%s\n", e.msg);
			_exit(1);
		}
		if (sbx_cg_join(fds, nfd, -1) < 0) {
			dprintf(2, "cannot join the VM's cgroups: %s\n",
			    strerror(errno));
			_exit(1);
		}
	}
	/* Not root: a user namespace of its own first, in which it may
	 * make the network one; sbx-netd, ours, joins both. */
	if (b->net && (unshare(CLONE_NEWNET | (geteuid() ? CLONE_NEWUSER :
	    0)) < 0 || write(g[1], "n", 1) != 1 || read(g[1], &c, 1) != 1 ||
	    c != 'g'))
		_exit(1);
	/* Above where they go first: none is overwritten by another. */
	for (i = 0; i < SBX_GUEST_PORTS; i++)
		if ((hi[i] = fcntl(fd[i], F_DUPFD, RAM_FD + 1)) < 0)
			_exit(1);
	if (ram >= 0 && (hi[SBX_GUEST_PORTS] = fcntl(ram, F_DUPFD,
	    RAM_FD + 1)) < 0)
		_exit(1);
	for (i = 0; i < SBX_GUEST_PORTS; i++)
		if (dup2(hi[i], 3 + i) < 0)
			_exit(1);
	if (ram >= 0 && dup2(hi[SBX_GUEST_PORTS], RAM_FD) < 0)
		_exit(1);
	log = open("qemu.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log >= 0) {
		dup2(log, 1);
		dup2(log, 2);
	}
	close_range(ram >= 0 ? RAM_FD + 1 : RAM_FD, ~0u, 0);
	/* Under TCG, the guest's RAM and the translated code in small
	 * pages: QEMU asks for huge ones (madvise), and each 2 MiB of them
	 * the guest or TCG touched at all stayed resident (~4 MiB of an
	 * idle VM's RSS), for no speed we could measure. */
	if (b->no_thp)
		prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	execvp(argv[0], argv);
	dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static void
tell(int fd, const char *fmt, const char *a, const char *b)
{
	char buf[4096];
	int n = snprintf(buf, sizeof buf, fmt, a, b);

	if (n > 0 && write(fd, buf, (size_t)n < sizeof buf ? (size_t)n :
	    sizeof buf - 1) < 0)
		return;
}

static int
qemu_ended(struct keeper *k, int *status)
{
	if (k->qemu > 0 && waitpid(k->qemu, status, WNOHANG) == k->qemu) {
		k->qemu = 0;
		return 1;
	}
	return k->qemu == 0;
}

static void
stop_qemu(struct keeper *k)
{
	if (k->qemu > 0) {
		kill(k->qemu, SIGKILL);
		waitpid(k->qemu, NULL, 0);
		k->qemu = 0;
	}
}

/* How many ports the guest serves, from its PONG, and the protocol it
 * speaks (an older guest's says neither: 0). */
static int
pong_of(const char *p, size_t n, int *proto)
{
	json_t *o = json_loadb(p, n, 0, NULL);
	json_int_t v = o ? sbx_json_int(o, "ports", 1) : 1;

	*proto = o ? (int)sbx_json_int(o, "proto", 0) : 0;
	json_decref(o);
	return v < 1 ? 1 : v > SBX_GUEST_PORTS ? SBX_GUEST_PORTS : (int)v;
}

/* --env's values to the guest (SETENV on its first port), and its
 * answer, by end: 0; else -1. The answers to pings on the way are
 * skipped (counted). */
static int
give_env(struct keeper *k, const struct sbx_qemu_boot *b, long long end)
{
	struct sbx_buf f = SBX_BUF_INIT;
	struct pollfd p;
	struct sbx_msg m;
	uint32_t n = 0;
	int r, got = 0;

	while (b->env[n])
		n++;
	sbx_msg_put_u32(&f, n);
	for (n = 0; b->env[n]; n++)
		sbx_msg_put_str(&f, b->env[n]);
	r = sbx_msg_send(k->s[0].port, SBX_GUEST_SETENV, f.data, f.len, NULL,
	    0);
	sbx_buf_release(&f);
	while (r >= 0 && !got && sbx_mono_ms() < end) {
		p = (struct pollfd){.fd = k->s[0].port, .events = POLLIN};
		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			return -1;
		if (!(p.revents & POLLIN))
			continue;
		if (sbx_msg_recv(k->s[0].port, &m) <= 0)
			return -1;
		if (m.type == SBX_GUEST_PONG && k->pings > 0)
			k->pings--;
		got = m.type == SBX_GUEST_SETENV;
		sbx_msg_release(&m);
	}
	return got ? 0 : -1;
}

/* A guest made before its ports' device was on PCI finds none there and
 * says so on its console (tail): 1 once the creator is told to make it
 * again. */
static int
stale_guest(struct keeper *k, const char *tail)
{
	if (!strstr(tail, "no virtio port named " SBX_GUEST_PORT ":"))
		return 0;
	tell(k->ready, "its guest found no port, as one made by an older sbx "
	    "does: make it again (scripts/qemu-guest -d '%s')%s",
	    sbx_qemu_guest_dir(), tail);
	return 1;
}

/* Until the guest answers a ping on its first port: 0; else the reason
 * in the creator's pipe, and -1. The creator gone: the sandbox goes
 * too. */
static int
boot(struct keeper *k, const struct sbx_qemu_boot *b, const char *dir)
{
	long long end = sbx_mono_ms() + b->start_ms, next = 0, now;
	int port = k->s[0].port;
	struct pollfd p[2];
	struct sbx_msg m;
	char tail[2048], why[64];
	int st = 0, r, proto = 0;

	for (;;) {
		now = sbx_mono_ms();
		if (now >= next) {
			if (sbx_msg_send(port, SBX_GUEST_PING, NULL, 0, NULL,
			    0) < 0 && errno != EAGAIN)
				break;
			k->pings++;
			next = now + PING_MS;
		}
		if (now >= end) {
			sbx_qemu_console_tail(dir, tail, sizeof tail);
			snprintf(why, sizeof why, "%lld", b->start_ms / 1000);
			tell(k->ready, "its guest did not answer in %s s%s", why,
			    tail);
			return -1;
		}
		p[0] = (struct pollfd){.fd = port, .events = POLLIN};
		p[1] = (struct pollfd){.fd = k->ready, .events = 0};
		if (poll(p, 2, 100) < 0 && errno != EINTR)
			break;
		if (p[1].revents & (POLLERR | POLLHUP)) {
			/* sbx-create is gone: so is what it was making, QEMU's
			 * cgroup with it; a resume's sandbox stays stopped. */
			stop_qemu(k);
			if (b->cg)
				sbx_cg_remove(b->cg);
			if (!b->resume)
				sbx_rmtree(dir);
			_exit(1);
		}
		if (qemu_ended(k, &st)) {
			sbx_qemu_console_tail(dir, tail, sizeof tail);
			snprintf(why, sizeof why, WIFEXITED(st) ? "exit %d" :
			    "signal %d", WIFEXITED(st) ? WEXITSTATUS(st) :
			    WTERMSIG(st));
			if (!stale_guest(k, tail))
				tell(k->ready, "QEMU ended (%s) before its guest "
				    "answered%s", why, tail);
			return -1;
		}
		if (!(p[0].revents & POLLIN))
			continue;
		if ((r = sbx_msg_recv(port, &m)) <= 0)
			break;
		r = m.type == SBX_GUEST_PONG;
		if (r)
			k->nports = pong_of(m.data + m.off, m.len - m.off,
			    &proto);
		sbx_msg_release(&m);
		if (r && proto != SBX_GUEST_PROTO) {
			snprintf(why, sizeof why, "%d", proto);
			tell(k->ready, "its guest speaks protocol %s, not this "
			    "sbx's: make it again (scripts/qemu-guest -d '%s')",
			    why, sbx_qemu_guest_dir());
			return -1;
		}
		if (r && b->env && b->env[0] && give_env(k, b, end) < 0) {
			sbx_qemu_console_tail(dir, tail, sizeof tail);
			tell(k->ready, "its guest did not take its environment%s%s",
			    tail, "");
			return -1;
		}
		if (r) {
			/* The others queued for a port not yet open: their
			 * answers are on the way. */
			k->pings--;
			tell(k->ready, "OK", "", "");
			close(k->ready);
			k->ready = -1;
			return 0;
		}
	}
	r = errno;
	sbx_qemu_console_tail(dir, tail, sizeof tail);
	if (!stale_guest(k, tail))
		tell(k->ready, "lost its guest's port: %s%s", strerror(r), tail);
	return -1;
}

/* The file pages process pid maps (its binary's, its libraries'), back
 * to the page cache, which drops them: with files (NULL-ended) only
 * those files' (paths, "(deleted)" ones too). QEMU keeps the guest's
 * kernel and initramfs as it loaded them, for a reset: -no-reboot makes
 * none, so once the guest is up those pages (~40 MiB of its RSS, the
 * initramfs ~1) are of no use. Of QEMU's own binary and libraries (~21
 * MiB) an idle VM uses ~4, an exec of true ~1.5 more, faulted in again
 * (from the page cache while another VM maps them): they were clean
 * pages the host could reclaim anyway, counted whole in the RSS of
 * each. Only a page no other process maps goes (the kernel's rule);
 * without CAP_SYS_NICE nothing does. */
static void
drop_files(pid_t pid, char *const *files)
{
	struct iovec iov[64];
	char path[64], line[4400], *e, *name;
	unsigned long lo, hi, ino;
	size_t n = 0;
	int pfd, at, j, last = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "re")))
		return;
	if ((pfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
		fclose(f);
		return;
	}
	while (!last) {
		if (!fgets(line, sizeof line, f))
			last = 1;
		else {
			line[strcspn(line, "\n")] = '\0';
			/* A guest made again meanwhile: its old files. */
			if ((e = strstr(line, " (deleted)")) && !e[10])
				*e = '\0';
			at = 0;
			if (sscanf(line, "%lx-%lx %*s %*s %*s %lu %n", &lo, &hi,
			    &ino, &at) < 3 || !ino || !at)
				continue;
			name = line + at;
			/* Not the guest's memory (RAM_FD's): its pages would
			 * leave QEMU's page tables, not the host's memory. */
			if (!strncmp(name, "/memfd:", 7))
				continue;
			for (j = 0; files && files[j]; j++)
				if (!strcmp(name, files[j]))
					break;
			if (files && !files[j])
				continue;
			iov[n++] = (struct iovec){(void *)lo, hi - lo};
		}
		if (n && (last || n == sizeof iov / sizeof *iov)) {
			syscall(SYS_process_madvise, pfd, iov, n, MADV_PAGEOUT,
			    0);
			n = 0;
		}
	}
	close(pfd);
	fclose(f);
}

/* The kernel and initramfs QEMU loaded (drop_files), once the guest is
 * up. */
static void
drop_loaded(const struct sbx_qemu_boot *b, pid_t qemu)
{
	char *file[3] = {NULL, NULL, NULL};
	size_t i, n = 0;

	for (i = 0; b->argv[i] && b->argv[i + 1] && n < 2; i++)
		if (!strcmp(b->argv[i], "-kernel") ||
		    !strcmp(b->argv[i], "-initrd"))
			file[n++] = b->argv[i + 1];
	if (n)
		drop_files(qemu, file);
}

static void
drop_client(struct slot *s)
{
	uint32_t w[2];

	close(s->client);
	s->client = -1;
	s->from_client.len = 0;
	s->to_client.len = 0;
	if (s->running && !s->orphan) {
		/* Nobody waits for it: it ends. */
		w[0] = s->run_id;
		w[1] = SIGKILL;
		sbx_qemu_frame_put(&s->to_port, SBX_GUEST_SIGNAL, w, sizeof w);
		s->orphan = 1;
	}
}

/* A frame of the client's, to the guest. */
static int
client_frame(void *arg, uint32_t type, const char *p, size_t n)
{
	struct slot *s = arg;
	uint32_t id;

	s->k->last = sbx_mono_ms();
	switch (type) {
	case SBX_GUEST_EXEC:
		if (s->running || n < 4) {
			sbx_qemu_frame_put(&s->to_client, SBX_GUEST_ERROR,
			    "busy", 4);
			return 0;
		}
		memcpy(&id, p, 4);
		s->running = 1;
		s->run_id = id;
		/* fall through */
	case SBX_GUEST_PING:
	case SBX_GUEST_IN:
	case SBX_GUEST_SIGNAL:
	case SBX_GUEST_WINCH:
	case SBX_GUEST_SYNC:
		sbx_qemu_frame_put(&s->to_port, type, p, n);
		break;
	default:
		/* POWEROFF is not a client's. */
		sbx_qemu_frame_put(&s->to_client, SBX_GUEST_ERROR,
		    "unknown frame", 13);
	}
	return 0;
}

/* A frame of the guest's, to the client. */
static int
guest_frame(void *arg, uint32_t type, const char *p, size_t n)
{
	struct slot *s = arg;
	uint32_t id = 0;
	int mine = 1;

	if (n >= 4)
		memcpy(&id, p, 4);
	if (type == SBX_GUEST_PONG && s == s->k->s && s->k->pings > 0) {
		s->k->pings--;
		mine = 0;
	} else if (type == SBX_GUEST_EXIT && n >= 4 && s->running &&
	    id == s->run_id) {
		s->running = 0;
		s->k->last = sbx_mono_ms();
		if (s->k->act >= 0)
			futimens(s->k->act, NULL);
		if (s->orphan) {
			s->orphan = 0;
			mine = 0;
		}
	} else if (s->orphan) {
		mine = 0;
	}
	if (mine && s->client >= 0)
		sbx_qemu_frame_put(&s->to_client, type, p, n);
	return 0;
}

/* What fd has, into in, and each whole frame of it to fn; 0 at its end
 * or on a frame no peer of ours sends (too long). */
static int
take(struct slot *s, int fd, struct sbx_buf *in,
    int (*fn)(void *, uint32_t, const char *, size_t))
{
	static char buf[65536];
	ssize_t n;

	n = read(fd, buf, sizeof buf);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return 0;
	if (n > 0)
		sbx_buf_add(in, buf, (size_t)n);
	return sbx_qemu_frames_take(in, fn, s) == 0;
}

/* What q holds, to fd, as much as it takes now; -1 when it is gone. */
static int
flush(int fd, struct sbx_buf *q)
{
	ssize_t n;

	if (!q->len)
		return 0;
	n = send(fd, q->data, q->len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	memmove(q->data, q->data + n, q->len - (size_t)n);
	q->len -= (size_t)n;
	return 0;
}

/* Whether the VM is suspended (sbx-pause): its time so is not idle
 * time, by which the clock of the last activity moves on once it
 * resumed. */
static int
suspended(struct keeper *k, long long now)
{
	char buf[64];
	long long at = 0;
	ssize_t n = -1;
	int fd;

	if ((fd = open(SBX_PAUSED_FILE, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
	}
	if (n >= 0) {
		buf[n] = '\0';
		if (!k->paused_at)
			k->paused_at = sscanf(buf, "suspend %lld", &at) == 1 &&
			    at > 0 && at <= now ? at : now;
		return 1;
	}
	if (k->paused_at) {
		k->last += now - k->paused_at;
		k->paused_at = 0;
	}
	return 0;
}

/* A stop (SBX_QEMU_SIG_STOP): no client any more, its command killed;
 * once no command runs, the guest syncs its disks and powers off. 1 when
 * its time is up. */
static int
stopping(struct keeper *k, long long now)
{
	int i, running = 0;

	if (!k->stop_end) {
		k->stop_end = now + STOP_MS;
		for (i = 0; i < k->nports; i++)
			if (k->s[i].client >= 0)
				drop_client(&k->s[i]);
	}
	for (i = 0; i < k->nports; i++)
		running |= k->s[i].running;
	if (!running && !k->off_sent) {
		sbx_qemu_frame_put(&k->s[0].to_port, SBX_GUEST_POWEROFF, NULL,
		    0);
		k->off_sent = 1;
	}
	return now >= k->stop_end;
}

static void
mark(const char *status)
{
	sbx_file_write_atomic("status", status, strlen(status), 0600, 0,
	    NULL);
}

/* Whether any port has a client or runs a command. */
static int
busy(const struct keeper *k)
{
	int i;

	for (i = 0; i < k->nports; i++)
		if (k->s[i].client >= 0 || k->s[i].running)
			return 1;
	return 0;
}

/* The first port free for a client, or NULL. */
static struct slot *
free_slot(struct keeper *k)
{
	int i;

	for (i = 0; i < k->nports; i++)
		if (k->s[i].client < 0 && !k->s[i].orphan && !k->s[i].running)
			return &k->s[i];
	return NULL;
}

/* The guest's memory its boot (or its commands) touched and freed,
 * given back to the host, by a process of ours (QMP waits): its balloon
 * inflated by TRIM_MIB takes free pages of the guest's, the last freed
 * first, which QEMU discards (madvise); deflated, they are the guest's
 * again, untouched on the host. Under TCG: 12 MiB of an idle VM's RSS
 * (the freed parts of the kernel's image, the initramfs's), in ~0.2 s.
 * Then the file pages QEMU and the keeper map and an idle VM does not
 * use (drop_files): ~16 MiB more. */
static pid_t
trim(uint64_t memory, pid_t qemu)
{
	struct sbx_err e;
	json_t *a, *r = NULL;
	uint64_t take = (uint64_t)TRIM_MIB << 20;
	json_int_t want, got, last = -1;
	long long end;
	pid_t keeper = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close_range(3, ~0u, 0);
	if (take > memory / 8)
		take = memory / 8;
	want = (json_int_t)(memory - take);
	a = json_pack("{sI}", "value", want);
	if (sbx_qemu_qmp_call(".", "balloon", a, NULL, &e) == 0) {
		/* Until it has them, or the guest has no more to give. */
		for (end = sbx_mono_ms() + TRIM_MS; sbx_mono_ms() < end;
		    last = got) {
			usleep(50000);
			if (sbx_qemu_qmp_call(".", "query-balloon", NULL, &r,
			    &e) < 0)
				break;
			got = sbx_json_int(r, "actual", -1);
			json_decref(r);
			if (got <= want || got == last)
				break;
		}
	}
	json_decref(a);
	a = json_pack("{sI}", "value", (json_int_t)memory);
	sbx_qemu_qmp_call(".", "balloon", a, NULL, &e);
	json_decref(a);
	drop_files(qemu, NULL);
	drop_files(keeper, NULL);
	_exit(0);
}

/* Punch the pages of [at, at + len) out of the guest's memory. */
static void
punch(int ram, off_t at, off_t len)
{
	if (len > 0)
		fallocate(ram, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at,
		    len);
}

/* The guest's pages that hold only zeros, given back to the host: a
 * hole punched in its memory reads as zeros, as they did, until the
 * guest writes there again. Under TCG ~18 MiB of an idle VM's RSS after
 * its boot: the kernel's .bss (cleared at boot, ~14 MiB of it never
 * written again), free pages. QEMU is stopped (SIGSTOP: no vCPU, device or QMP command
 * writes meanwhile) for the ~30 ms of the scan. */
static void
zero_pages(struct keeper *k)
{
	static const char zero[4096];
	static char buf[1 << 16];
	off_t size = lseek(k->ram, 0, SEEK_END), off = 0, data, hole, run;
	ssize_t n, i;
	int st;

	if (size <= 0 || kill(k->qemu, SIGSTOP) < 0)
		return;
	while (waitpid(k->qemu, &st, WUNTRACED) < 0)
		if (errno != EINTR) {
			/* Not seen stopped: not left stopped either. */
			kill(k->qemu, SIGCONT);
			return;
		}
	if (!WIFSTOPPED(st)) {
		k->qemu = 0; /* it ended: serve() sees it */
		return;
	}
	while (off < size && (data = lseek(k->ram, off, SEEK_DATA)) >= 0) {
		if ((hole = lseek(k->ram, data, SEEK_HOLE)) < 0)
			hole = size;
		for (run = -1, off = data; off < hole; off += n) {
			n = pread(k->ram, buf, (size_t)(hole - off) < sizeof buf ?
			    (size_t)(hole - off) : sizeof buf, off);
			if (n <= 0) {
				hole = off;
				break;
			}
			for (i = 0; i + 4096 <= n; i += 4096)
				if (memcmp(buf + i, zero, 4096)) {
					if (run >= 0)
						punch(k->ram, run, off + i -
						    run);
					run = -1;
				} else if (run < 0) {
					run = off + i;
				}
		}
		if (run >= 0)
			punch(k->ram, run, off - run);
		off = hole;
	}
	kill(k->qemu, SIGCONT);
}

/* The relay: for each port, each side is read while the queue to the
 * other is short, and written while its own queue holds something, never
 * blocking, so that a full pipe one way never stops the other way (nor
 * another port). */
static void
serve(struct keeper *k, const sigset_t *mask)
{
	struct pollfd p[2 * SBX_GUEST_PORTS + 1];
	struct timespec ts;
	long long wait, idle, now;
	struct slot *s, *f;
	int st, i, np = 2 * k->nports;

	for (;;) {
		now = sbx_mono_ms();
		if (stop_asked && stopping(k, now))
			return;
		for (i = 0; i < k->nports; i++) {
			s = &k->s[i];
			p[2 * i] = (struct pollfd){.fd = s->port, .events =
			    (s->to_client.len < QUEUE_MAX ? POLLIN : 0) |
			    (s->to_port.len ? POLLOUT : 0)};
			p[2 * i + 1] = (struct pollfd){.fd = s->client,
			    .events = (s->to_port.len < QUEUE_MAX ? POLLIN : 0) |
			    (s->to_client.len ? POLLOUT : 0)};
		}
		/* A client for each free port; the next waits in the
		 * backlog. None while a stop ends the VM. */
		f = stop_asked ? NULL : free_slot(k);
		p[np] = (struct pollfd){.fd = f ? k->lsn : -1, .events =
		    POLLIN};
		wait = 1000;
		if (k->timeout && !stop_asked && !suspended(k, now) &&
		    !busy(k)) {
			idle = now - k->last;
			if (idle >= (long long)k->timeout * 1000) {
				mark("expired\n");
				stop_qemu(k);
				return;
			}
			if ((long long)k->timeout * 1000 - idle < wait)
				wait = (long long)k->timeout * 1000 - idle;
		}
		/* When idle after the boot, and again when idle after
		 * later activity (a command's freed memory, the code QEMU
		 * ran for it). */
		if (k->trimmer > 0 && waitpid(k->trimmer, NULL, WNOHANG) ==
		    k->trimmer) {
			k->trimmer = 0;
			/* Once: what a boot leaves, not what a command does
			 * (its freed pages are not cleared), scanned while
			 * the VM stands still (~30 ms here, longer for a VM
			 * that holds GiBs). */
			if (k->ram >= 0 && !k->zeroed && !stop_asked &&
			    !busy(k) && !suspended(k, now)) {
				zero_pages(k);
				k->zeroed = 1;
			}
		}
		if (k->trim && !k->trimmer && k->last != k->trimmed &&
		    !stop_asked && !busy(k) && !suspended(k, now)) {
			long long after = k->trimmed < 0 ? TRIM_IDLE_MS :
			    TRIM_AGAIN_MS;

			idle = now - k->last;
			if (idle >= after) {
				k->trimmer = trim(k->trim, k->qemu);
				k->trimmed = k->last;
			} else if (after - idle < wait) {
				wait = after - idle;
			}
		}
		ts = (struct timespec){wait / 1000, wait % 1000 * 1000000};
		if (ppoll(p, (nfds_t)np + 1, &ts, mask) < 0) {
			if (errno != EINTR)
				return;
			continue;
		}
		if (qemu_ended(k, &st)) {
			/* Stopped: ended as asked. */
			if (!stop_asked)
				mark("dead\n");
			return;
		}
		for (i = 0; i < k->nports; i++) {
			s = &k->s[i];
			if ((p[2 * i].revents & POLLERR) ||
			    ((p[2 * i].revents & (POLLIN | POLLHUP)) &&
			    !take(s, s->port, &s->from_port, guest_frame)) ||
			    flush(s->port, &s->to_port) < 0) {
				if (!stop_asked)
					mark("dead\n");
				return;
			}
			if (s->client >= 0 && (((p[2 * i + 1].revents &
			    (POLLIN | POLLHUP | POLLERR)) && !take(s,
			    s->client, &s->from_client, client_frame)) ||
			    flush(s->client, &s->to_client) < 0))
				drop_client(s);
		}
		if (f && (p[np].revents & POLLIN) && (f->client =
		    accept4(k->lsn, NULL, NULL, SOCK_CLOEXEC |
		    SOCK_NONBLOCK)) >= 0) {
			k->last = sbx_mono_ms();
			if (k->act >= 0)
				futimens(k->act, NULL);
		}
	}
}

static int
listen_here(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = "sock"};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	unlink("sock");
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    listen(fd, 64) < 0)
		return -1;
	return fd;
}

/* QEMU in its network namespace, sbx-netd told its pid and ready there,
 * then QEMU let go on: 0; else -1, the reason told to the creator. */
static int
net_up(struct keeper *k, const struct sbx_qemu_boot *b, int gate)
{
	struct sbx_err err = {0};
	char c = 0, t[64];
	pid_t netd;
	int n;

	if (read(gate, &c, 1) != 1 || c != 'n') {
		close(gate);
		close(b->net_pidw);
		close(b->net_ready);
		tell(k->ready, "cannot give QEMU a network namespace%s%s",
		    geteuid() ? " (user namespaces may be off: "
		    "kernel.unprivileged_userns_clone)" : "", "");
		return -1;
	}
	sbx_local_net_pid(b->net_pidw, k->qemu);
	if (sbx_local_net_ready(b->net_ready, b->dir, &netd, &err) < 0) {
		close(gate);
		tell(k->ready, "%s%s", err.msg, "");
		return -1;
	}
	n = snprintf(t, sizeof t, "%d %llu\n", (int)netd,
	    sbx_local_starttime(netd));
	if (sbx_file_write_atomic("netd.pid", t, (size_t)n, 0600, 0,
	    NULL) < 0 || write(gate, "g", 1) != 1) {
		close(gate);
		sbx_local_net_stop(netd, sbx_local_starttime(netd));
		tell(k->ready, "cannot start QEMU: %s%s", strerror(errno), "");
		return -1;
	}
	close(gate);
	return 0;
}

static void
on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static void
keeper_main(const struct sbx_qemu_boot *b, int ready)
{
	struct sigaction sa = {.sa_handler = on_stop};
	sigset_t block, mask;
	struct keeper k = {.ready = ready, .timeout = b->timeout,
	    .nports = 1, .trim = b->trim, .trimmed = -1, .ram = -1};
	int sp[2], null, gate, i, theirs[SBX_GUEST_PORTS];
	char pids[128];

	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "sbx-qemu-keeper");
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	if (chdir(b->dir) < 0 || (k.lsn = listen_here()) < 0) {
		tell(ready, "cannot make its socket: %s%s", strerror(errno), "");
		_exit(1);
	}
	/* Made now: the boot is its first activity. */
	k.act = open("activity", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600);
	for (i = 0; i < SBX_GUEST_PORTS; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
		    sp) < 0) {
			tell(ready, "cannot make its ports: %s%s",
			    strerror(errno), "");
			_exit(1);
		}
		k.s[i] = (struct slot){.k = &k, .port = sp[0], .client = -1,
		    .from_port = SBX_BUF_INIT, .from_client = SBX_BUF_INIT,
		    .to_port = SBX_BUF_INIT, .to_client = SBX_BUF_INIT};
		theirs[i] = sp[1];
	}
	/* Under TCG (trim) the guest's memory is a memfd of ours, which
	 * QEMU maps shared. */
	if (b->trim && ((k.ram = memfd_create("sbx-ram", MFD_CLOEXEC)) < 0 ||
	    ftruncate(k.ram, (off_t)b->trim) < 0)) {
		tell(ready, "cannot make its memory: %s%s", strerror(errno), "");
		_exit(1);
	}
	if ((k.qemu = spawn(b, theirs, k.ram, &gate)) < 0) {
		tell(ready, "cannot start QEMU: %s%s", strerror(errno), "");
		_exit(1);
	}
	for (i = 0; i < SBX_GUEST_PORTS; i++)
		close(theirs[i]);
	if (b->net && net_up(&k, b, gate) < 0) {
		stop_qemu(&k);
		unlink("sock");
		_exit(1);
	}
	/* Blocked but in ppoll (and not in QEMU, which has its own use for
	 * SIGUSR1), before the pids tell sbx-pause where we are. */
	sigemptyset(&block);
	sigaddset(&block, SBX_QEMU_SIG_STOP);
	sigprocmask(SIG_BLOCK, &block, &mask);
	sigdelset(&mask, SBX_QEMU_SIG_STOP);
	sigaction(SBX_QEMU_SIG_STOP, &sa, NULL);
	snprintf(pids, sizeof pids, "%d %llu %d %llu\n", (int)getpid(),
	    sbx_local_starttime(getpid()), (int)k.qemu,
	    sbx_local_starttime(k.qemu));
	if (sbx_file_write_atomic("keeper.pid", pids, strlen(pids), 0600, 0,
	    NULL) < 0 || boot(&k, b, b->dir) < 0) {
		stop_qemu(&k);
		unlink("sock");
		_exit(1);
	}
	drop_loaded(b, k.qemu);
	k.last = sbx_mono_ms();
	for (i = 0; i < SBX_GUEST_PORTS; i++)
		fcntl(k.s[i].port, F_SETFL, O_NONBLOCK);
	serve(&k, &mask);
	stop_qemu(&k);
	unlink("sock");
	_exit(0);
}

int
sbx_qemu_keeper_start(const struct sbx_qemu_boot *b, struct sbx_err *err)
{
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	pid_t pid;
	int rp[2] = {-1, -1}, st;

	if (pipe2(rp, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start the VM:");
		if (rp[0] >= 0) {
			close(rp[0]);
			close(rp[1]);
		}
		if (b->net) {
			close(b->net_ready);
			close(b->net_pidw);
		}
		return -1;
	}
	if (pid == 0) {
		/* A session of its own, not our child: it outlives us,
		 * holding none of our fds (a state file's lock among them)
		 * but the pipe, as fd 3. */
		struct sbx_qemu_boot kb = *b;

		int w = rp[1], r = b->net_ready, p = b->net_pidw;

		setsid();
		/* Above 5 first: none of them is overwritten by another. */
		if ((w = fcntl(w, F_DUPFD, 6)) < 0 || (b->net && ((r =
		    fcntl(r, F_DUPFD, 6)) < 0 || (p = fcntl(p, F_DUPFD,
		    6)) < 0)) || dup2(w, 3) < 0 || (b->net && (dup2(r, 4) < 0 ||
		    dup2(p, 5) < 0)))
			_exit(1);
		kb.net_ready = 4;
		kb.net_pidw = 5;
		close_range(b->net ? 6 : 4, ~0u, 0);
		if (fork() == 0)
			keeper_main(&kb, 3);
		_exit(0);
	}
	close(rp[1]);
	/* sbx-netd's are the keeper's now. */
	if (b->net) {
		close(b->net_ready);
		close(b->net_pidw);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	/* The keeper holds the guest to its start timeout: this read ends
	 * with its answer, or its end. */
	while (len < sizeof buf - 1 && (n = read(rp[0], buf + len,
	    sizeof buf - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)n;
	}
	close(rp[0]);
	buf[len] = '\0';
	if (!strcmp(buf, "OK"))
		return 0;
	return sbx_err_set(err, SBX_EX_FAIL, "the VM did not start: %s",
	    len ? buf : "its keeper ended");
}
