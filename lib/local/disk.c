/* disk.c - a sandbox's quota on what it writes: its own ext4 image
 * (DIR/disk.img, sparse) on a loop device, holding the overlay's upper
 * and work directories; the kernel says ENOSPC past its size, and
 * inodes run out at one per SBX_DISK_INODE_RATIO bytes */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"

/* mkfs costs 20-50 ms (it syncs): done once per size, into a template
 * in ROOT/.disk that every sandbox of that size copies (a few hundred
 * KiB of metadata, the rest holes). */
static const char *const mke2fs_paths[] = {
	"/usr/sbin/mke2fs", "/sbin/mke2fs",
};

static const char *const sub[] = {"upper", "work"};

/* Run mke2fs on fd (as the child's fd 3), the filesystem holding what
 * is in skel; -1 with err. */
static int
mkfs(int fd, uint64_t size, const char *skel, struct sbx_err *err)
{
	char ratio[32], msg[256];
	char *argv[] = {"mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096",
	    "-I", "256", "-i", ratio, "-m", "0",
	    /* No journal: what a sandbox writes is scratch, and mounting
	     * one costs a kernel thread and milliseconds. No room kept for
	     * growing it. No backup superblocks, and every bitmap and inode
	     * table at the start: the image's data is 4 extents, not one
	     * per group of blocks, and a copy of it 4 calls. Small
	     * directories in their inodes: the overlay's work directory,
	     * made at each mount, allocated the disk's first block, whose
	     * bitmaps it read through the loop device (a quarter of a
	     * millisecond of CPU of each create). */
	    "-O", "^has_journal,^resize_inode,sparse_super2,inline_data",
	    "-E", "lazy_itable_init=1,nodiscard,num_backup_sb=0,"
	    "packed_meta_blocks=1", "-d", (char *)skel, "/proc/self/fd/3",
	    NULL};
	int ep[2], status;
	ssize_t n = 0;
	size_t i;
	pid_t pid;

	snprintf(ratio, sizeof ratio, "%d", SBX_DISK_INODE_RATIO);
	if (pipe2(ep, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot create a pipe:");
	if ((pid = fork()) < 0) {
		close(ep[0]);
		close(ep[1]);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (dup2(fd, 3) < 0 || null < 0 || dup2(null, 0) < 0 ||
		    dup2(null, 1) < 0 || dup2(ep[1], 2) < 0)
			_exit(127);
		for (i = 0; i < sizeof mke2fs_paths / sizeof *mke2fs_paths;
		    i++)
			execv(mke2fs_paths[i], argv);
		execvp("mke2fs", argv);
		dprintf(2, "cannot run mke2fs: %s (install e2fsprogs)",
		    strerror(errno));
		_exit(127);
	}
	close(ep[1]);
	while (n < (ssize_t)sizeof msg - 1) {
		ssize_t r = read(ep[0], msg + n, sizeof msg - 1 - (size_t)n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += r;
	}
	msg[n] = '\0';
	close(ep[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		msg[strcspn(msg, "\n")] = '\0';
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a filesystem "
		    "of %llu bytes: %s", (unsigned long long)size,
		    *msg ? msg : "mke2fs failed");
	}
	return 0;
}

/* The template of size bytes, open for reading; made (an unnamed file,
 * named once whole: an interrupted mkfs leaves nothing) when missing. */
static int
template(uint64_t size, struct sbx_err *err)
{
	char *dir = sbx_xasprintf("%s/.disk", sbx_local_root());
	char *path = sbx_xasprintf("%s/ext4-v3-%llu.img", dir,
	    (unsigned long long)size), fdp[64];
	char *skel = sbx_xasprintf("%s/skel", dir), *p = NULL;
	int fd, i;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0 || errno != ENOENT) {
		if (fd < 0)
			sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", path);
		goto out;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", dir);
		goto out;
	}
	if ((fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0 ||
	    ftruncate(fd, (off_t)size) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create a disk image in "
		    "'%s':", dir);
		goto fail;
	}
	/* The overlay's directories are in the template: made on each new
	 * disk, they cost a read of its bitmaps on the way to a sandbox. */
	for (i = 0; i < 3; i++) {
		free(p);
		p = i ? sbx_xasprintf("%s/%s", skel, sub[i - 1]) :
		    sbx_xstrdup(skel);
		if ((mkdir(p, 0700) < 0 && errno != EEXIST) ||
		    chmod(p, i ? 0755 : 0700) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", p);
			goto fail;
		}
	}
	if (mkfs(fd, size, skel, err) < 0)
		goto fail;
	/* Durable before it has a name: a template is trusted forever. */
	snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
	if (fsync(fd) < 0 || (linkat(AT_FDCWD, fdp, AT_FDCWD, path,
	    AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", path);
		goto fail;
	}
	goto out;
fail:
	if (fd >= 0)
		close(fd);
	fd = -1;
out:
	free(p);
	free(skel);
	free(path);
	free(dir);
	return fd;
}

int
sbx_local_copy_sparse(int in, int out)
{
	char buf[65536];
	off_t d = 0, h, o;
	ssize_t n;

	while ((d = lseek(in, d, SEEK_DATA)) >= 0) {
		if ((h = lseek(in, d, SEEK_HOLE)) < 0)
			return -1;
		for (o = d; o < h; ) {
			off_t to = o;

			n = copy_file_range(in, &o, out, &to, (size_t)(h - o),
			    0);
			if (n < 0 && (errno == EXDEV || errno == EINVAL ||
			    errno == ENOSYS || errno == EOPNOTSUPP)) {
				/* Another filesystem that will not: by hand. */
				n = pread(in, buf, (size_t)(h - o) < sizeof buf ?
				    (size_t)(h - o) : sizeof buf, o);
				if (n > 0 && pwrite(out, buf, (size_t)n, o) != n)
					n = -1;
				if (n > 0)
					o += n;
			}
			if (n <= 0)
				return -1;
		}
		d = h;
	}
	return errno == ENXIO ? 0 : -1;
}

/* A free loop device set up on fd (cleared by itself once nothing holds
 * it: the mount, or us before there is one). */
static int
loop_attach(int fd, char *dev, size_t n, struct sbx_err *err)
{
	struct loop_config c = {.fd = (uint32_t)fd, .block_size = 4096};
	int ctl, lfd = -1, nr, i, e, k, own;

	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open "
		    "'/dev/loop-control':");
	/* Another process may take the device we were told is free: all
	 * are told the same one, and each round one of them gets it. 32
	 * rounds were too few for 16 creates at once (1 of 500 lost every
	 * one, scripts/bench/density); a round is two calls. */
	for (i = 0; i < 1024 && lfd < 0; i++) {
		if ((nr = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "no free loop device:");
			break;
		}
		/* First a device a little past it, each create its own:
		 * all told the same one, they queued on its open behind the
		 * one that set it up (and fsynced its image), one after the
		 * other (wchan: a sixth of a fleet's creates' time). A free
		 * device there, or a new one, is as good. */
		own = i == 0 && (k = nr + 1 + (int)(getpid() % 16),
		    ioctl(ctl, LOOP_CTL_ADD, k) >= 0 || errno == EEXIST);
		if (own)
			nr = k;
		snprintf(dev, n, "/dev/loop%d", nr);
		if ((lfd = open(dev, O_RDWR | O_CLOEXEC)) < 0 && own)
			continue;
		if (lfd < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", dev);
			break;
		}
		/* No direct I/O: setting it up syncs the image just copied
		 * to the disk, milliseconds a create cannot spare. */
		c.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(lfd, LOOP_CONFIGURE, &c) == 0)
			break;
		e = errno;
		close(lfd);
		lfd = -1;
		if (e != EBUSY) {
			errno = e;
			sbx_err_set(err, SBX_EX_FAIL, "cannot set up '%s':", dev);
			break;
		}
	}
	if (lfd < 0 && !err->msg[0])
		sbx_err_set(err, SBX_EX_FAIL, "no free loop device");
	close(ctl);
	return lfd;
}

/* The ext4 on dev (the disk img), mounted nowhere: its fd, or -1. A
 * device whose filesystem is mounted already gives its superblock again. */
static int
disk_fsmount(const char *dev, const char *img, struct sbx_err *err)
{
	int fs, mfd = -1;

	if ((fs = fsopen("ext4", FSOPEN_CLOEXEC)) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    /* Its inode tables are never written ahead, nor its bitmaps
	     * read ahead (a kernel thread each mount): the image stays as
	     * small as what is in it. */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "no_prefetch_block_bitmaps",
	    NULL, 0) < 0 ||
	    /* No cache flushes: the loop device turns each into an fsync
	     * of the image, milliseconds of the host's disk at mount (the
	     * superblock's write) and at unmount, for a scratch disk that
	     * does not outlive a crash of the host anyway. */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "nobarrier", NULL, 0) < 0 ||
	    /* No cache of extended attribute blocks to share (a hash
	     * table of 8 KiB and a shrinker a mount, 8.5 KiB of the
	     * host's memory a sandbox): overlay's and the sandbox's
	     * attributes fit in the inode (256 bytes). */
	    fsconfig(fs, FSCONFIG_SET_FLAG, "nombcache", NULL, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (mfd = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID |
	    MOUNT_ATTR_NODEV)) < 0)
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount the disk '%s':",
		    img);
	if (fs >= 0)
		close(fs);
	return mfd;
}

/* The disk of size bytes of the sandbox in dir, mounted nowhere, with
 * its upper and work directories (the template's): its mount's fd, or
 * -1 with err. */
static int
disk_mount(const char *dir, uint64_t size, char *dev, size_t devn,
    struct sbx_err *err)
{
	char *img = sbx_xasprintf("%s/%s", dir, SBX_DISK_IMAGE);
	int fd, tpl = -1, lfd = -1, mfd = -1;

	/* A stopped sandbox's disk is there; a new one is the template's
	 * copy. */
	if ((fd = open(img, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		if (errno != ENOENT || (tpl = template(size, err)) < 0)
			goto out;
		if ((fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600)) < 0 || ftruncate(fd, (off_t)size) < 0 ||
		    sbx_local_copy_sparse(tpl, fd) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':",
			    img);
			goto out;
		}
	}
	if ((lfd = loop_attach(fd, dev, devn, err)) < 0)
		goto out;
	mfd = disk_fsmount(dev, img, err);
out:
	/* The mount holds the device now (or nothing does: it goes). */
	if (lfd >= 0)
		close(lfd);
	if (tpl >= 0)
		close(tpl);
	if (fd >= 0)
		close(fd);
	free(img);
	return mfd;
}

/* The loop device and the mount cost milliseconds of waiting on the
 * kernel: a helper process does them while the sandbox is set up. */
int
sbx_local_disk_start(const char *dir, uint64_t size, pid_t *pid,
    struct sbx_err *err)
{
	struct sbx_err e = {0};
	struct sbx_buf b = SBX_BUF_INIT;
	char dev[32];
	int sp[2], mfd;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot create a "
		    "socket pair:");
	if ((*pid = fork()) < 0) {
		close(sp[0]);
		close(sp[1]);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
	}
	if (*pid == 0) {
		/* With sbx-create, whatever kills it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		if ((mfd = disk_mount(dir, size, dev, sizeof dev, &e)) >= 0) {
			sbx_msg_put_str(&b, dev);
			_exit(sbx_msg_send(sp[1], 0, b.data, b.len, &mfd, 1) <
			    0);
		}
		sbx_msg_put_str(&b, e.msg);
		_exit(sbx_msg_send(sp[1], 1, b.data, b.len, NULL, 0) < 0);
	}
	close(sp[1]);
	return sp[0];
}

int
sbx_local_disk_finish(int sock, pid_t pid, uid_t uid, gid_t gid,
    char *dev, size_t devn, struct sbx_err *err)
{
	struct sbx_msg m;
	const char *msg;
	int mfd = -1, i;

	*dev = '\0';
	if (sbx_msg_recv(sock, &m) <= 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make the disk: its "
		    "helper ended");
		goto out;
	}
	if (m.type == 0 && m.nfds == 1) {
		mfd = m.fds[0];
		m.nfds = 0;
		/* "/dev/loop7": its name, as /sys/block says it. */
		if ((msg = sbx_msg_get_str(&m)) && !strncmp(msg, "/dev/", 5))
			snprintf(dev, devn, "%s", msg + 5);
	} else {
		msg = sbx_msg_get_str(&m);
		sbx_err_set(err, SBX_EX_FAIL, "%s", msg && *msg ? msg :
		    "cannot make the disk");
	}
	sbx_msg_release(&m);
	for (i = 0; mfd >= 0 && i < 2; i++)
		if (fchownat(mfd, sub[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot set up '%s' on "
			    "the sandbox's disk:", sub[i]);
			close(mfd);
			mfd = -1;
		}
out:
	close(sock);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return mfd;
}

/* The image is sparse: a disk the store has no room for would fail its
 * sandbox's writes later, as I/O errors of the loop device, and fill the
 * store under the other sandboxes and the host. */
int
sbx_local_disk_fit(const char *root, uint64_t *size, int dflt,
    struct sbx_err *err)
{
	char *p = sbx_xstrdup(root), *slash;
	struct statvfs sv;
	uint64_t avail, margin, cut;
	int rc = 0, top;

	while (statvfs(p, &sv) < 0) {
		if (errno != ENOENT || !(slash = strrchr(p, '/')) ||
		    slash == p) {
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read the "
			    "free space of '%s':", p);
			goto out;
		}
		*slash = '\0';
	}
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (!dflt) {
		if (*size > avail)
			rc = sbx_err_set(err, SBX_EX_USAGE, "--disk of %llu MiB "
			    "is more than the %llu MiB free on '%s'",
			    (unsigned long long)(*size >> 20),
			    (unsigned long long)(avail >> 20), p);
		goto out;
	}
	/* Room kept for the host and the other sandboxes' disks. */
	margin = avail / 20 > SBX_DISK_MIN ? avail / 20 : SBX_DISK_MIN;
	if (*size + margin <= avail)
		goto out;
	if (avail < margin + SBX_DISK_MIN) {
		errno = ENOSPC;
		rc = sbx_err_set(err, SBX_EX_FAIL, "no room for a disk on '%s' "
		    "(limits.disk; 0 for none): %llu MiB free:", p,
		    (unsigned long long)(avail >> 20));
		goto out;
	}
	/* Three significant bits: a few sizes, so a few templates. */
	cut = avail - margin;
	top = 63 - __builtin_clzll(cut);
	cut &= ~((1ull << (top - 2)) - 1);
	sbx_note("limits.disk cut from %llu MiB to %llu MiB: %llu MiB free "
	    "on '%s'", (unsigned long long)(*size >> 20),
	    (unsigned long long)(cut >> 20), (unsigned long long)(avail >> 20),
	    p);
	*size = cut;
out:
	free(p);
	return rc;
}

/* Whether the loop device name ("loop7") is bound to the file whose
 * path is img. */
static int
loop_bound(const char *name, const char *img)
{
	char p[PATH_MAX], buf[PATH_MAX + 16];
	size_t len = strlen(img);
	ssize_t n;
	int fd;

	snprintf(p, sizeof p, "/sys/block/%s/loop/backing_file", name);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return !strncmp(buf, img, len) && (!buf[len] ||
	    !strcmp(buf + len, " (deleted)"));
}

/* Whether a loop device is bound to the file whose path is img (its
 * name in dev, when not NULL): each of them looked at, a few hundred
 * milliseconds for a thousand. */
static int
loop_find(const char *img, char *dev, size_t devn)
{
	struct dirent *e;
	DIR *d = opendir("/sys/block");
	int found = 0;

	while (d && !found && (e = readdir(d))) {
		if (strncmp(e->d_name, "loop", 4))
			continue;
		found = loop_bound(e->d_name, img);
		if (found && dev)
			snprintf(dev, devn, "/dev/%s", e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

int
sbx_local_disk_wait(const char *dir, const char *dev, int ms)
{
	char *p = sbx_xasprintf("%s/%s", dir, SBX_DISK_IMAGE), *img;
	int i, rc = 0;
	struct stat st;

	if (lstat(p, &st) < 0) {
		free(p);
		return 0;
	}
	img = realpath(p, NULL);
	free(p);
	if (!img)
		return 0;
	/* The sandbox's last process took its mount, and the device, with
	 * it; the kernel lets go of them a moment later. */
	if (dev && (strncmp(dev, "loop", 4) || !dev[4] ||
	    dev[4 + strspn(dev + 4, "0123456789")]))
		dev = NULL;
	for (i = 0; dev ? loop_bound(dev, img) : loop_find(img, NULL, 0);
	    i++) {
		if (i * 2 >= ms) {
			rc = -1;
			break;
		}
		usleep(2000);
	}
	free(img);
	return rc;
}

int
sbx_local_disk_open(const char *dir, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/%s", dir, SBX_DISK_IMAGE), *img;
	char dev[PATH_MAX];
	int fd, lfd, mfd = -1;

	if (!(img = realpath(p, NULL))) {
		if (errno == ENOENT)
			mfd = -2;
		else
			sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", p);
		free(p);
		return mfd;
	}
	free(p);
	if (loop_find(img, dev, sizeof dev)) {
		mfd = disk_fsmount(dev, img, err);
	} else if ((fd = open(img, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", img);
	} else {
		/* A stopped sandbox's: a device of our own, gone with the
		 * mount. */
		if ((lfd = loop_attach(fd, dev, sizeof dev, err)) >= 0) {
			mfd = disk_fsmount(dev, img, err);
			close(lfd);
		}
		close(fd);
	}
	free(img);
	return mfd;
}
