/* mounts.c - the sandbox's root filesystem: an overlay over the image (or
 * a skeleton with the host's system directories bound read-only), a fresh
 * /proc with its sensitive entries masked, a minimal /dev; then pivot */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "local.h"

/* What the host image shows of the host, read-only. */
static const char *const host_dirs[] = {
	"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt",
};

/* Empty and private in every sandbox (1777 for tmp). */
static const char *const private_dirs[] = {
	"home", "root", "tmp", "var", "run", "proc", "dev", "sys",
};

/* The host image's lower layer: mount points, the host's symlinks
 * (/bin -> usr/bin) and the private directories, on a small tmpfs made
 * by sandbox root itself, so it owns them and nothing touches the disk. */
static int
make_skeleton(const char *lower, const char *workdir, int accounts,
    struct sbx_err *err)
{
	char link[256], *p;
	struct stat st;
	size_t i;
	ssize_t n;
	int rc = 0;

	for (i = 0; i < sizeof host_dirs / sizeof host_dirs[0] && !rc; i++) {
		char *host = sbx_xasprintf("/%s", host_dirs[i]);

		p = sbx_xasprintf("%s/%s", lower, host_dirs[i]);
		if (lstat(host, &st) < 0) {
			/* not on this host */
		} else if (S_ISLNK(st.st_mode)) {
			n = readlink(host, link, sizeof link - 1);
			if (n > 0) {
				link[n] = '\0';
				if (symlink(link, p) < 0)
					rc = sbx_err_set(err, SBX_EX_FAIL,
					    "cannot create '%s':", p);
			}
		} else if (S_ISDIR(st.st_mode) && mkdir(p, 0755) < 0) {
			rc = sbx_err_set(err, SBX_EX_FAIL,
			    "cannot create '%s':", p);
		}
		free(host);
		free(p);
	}
	for (i = 0; i < sizeof private_dirs / sizeof private_dirs[0] && !rc;
	    i++) {
		int tmp = !strcmp(private_dirs[i], "tmp");

		p = sbx_xasprintf("%s/%s", lower, private_dirs[i]);
		if (mkdir(p, 0755) < 0 || (tmp && chmod(p, 01777) < 0))
			rc = sbx_err_set(err, SBX_EX_FAIL,
			    "cannot create '%s':", p);
		free(p);
	}
	/* The home of the account the host image adds, the user's. */
	if (!rc && accounts) {
		p = sbx_xasprintf("%s/home/" SBX_LOCAL_USER_NAME, lower);
		if (mkdir(p, 0755) < 0 || chown(p, SBX_LOCAL_USER_ID,
		    SBX_LOCAL_USER_ID) < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL,
			    "cannot create '%s':", p);
		free(p);
	}
	if (!rc) {
		/* The workdir and its parents, owned by sandbox root. */
		p = sbx_xasprintf("%s%s", lower, workdir);
		rc = sbx_mkdirs(p, 0755, err);
		free(p);
	}
	return rc;
}

/* Header injection, host image: sbx-netd's CA (DIR/certs) over the
 * host's /etc/ssl/certs, read-only, as an image has it in its upper. */
static int
ca_certs(const struct sbx_local_setup *s, const char *root,
    struct sbx_err *err)
{
	char *ours = sbx_xasprintf("%s/certs", s->dir), *to, *opts;
	struct stat st;
	int rc = 0;

	if (stat(ours, &st) < 0 || stat("/etc/ssl/certs", &st) < 0 ||
	    !S_ISDIR(st.st_mode)) {
		free(ours);
		return 0;
	}
	to = sbx_xasprintf("%s/etc/ssl/certs", root);
	opts = sbx_xasprintf("lowerdir=%s:/etc/ssl/certs%s", ours,
	    s->rootless || s->uid_base ? ",userxattr" : "");
	if (mount("overlay", to, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
	    opts) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot mount the CA on "
		    "/etc/ssl/certs:");
	free(opts);
	free(to);
	free(ours);
	return rc;
}

static int
bind_ro(const char *src, const char *dst, struct sbx_err *err)
{
	struct mount_attr a = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
		    MOUNT_ATTR_NODEV,
	};

	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot bind '%s':", src);
	if (mount_setattr(AT_FDCWD, dst, AT_RECURSIVE, &a, sizeof a) < 0)
		return sbx_err_set(err, SBX_EX_FAIL,
		    "cannot make '%s' read-only:", dst);
	return 0;
}

/* The host image's account (sbx_local_host_accounts): DIR/passwd and
 * DIR/group over the host's, read-only as the rest of its /etc. */
static int
accounts(const struct sbx_local_setup *s, const char *root,
    struct sbx_err *err)
{
	static const char *const f[] = {"passwd", "group"};
	char *src, *dst;
	size_t i;
	int rc = 0;

	for (i = 0; i < 2 && !rc; i++) {
		src = sbx_xasprintf("%s/%s", s->dir, f[i]);
		dst = sbx_xasprintf("%s/etc/%s", root, f[i]);
		rc = bind_ro(src, dst, err);
		free(src);
		free(dst);
	}
	return rc;
}

/* Mask one /proc entry: /dev/null over files, over directories a
 * read-only bind of /dev/pts as /dev's tmpfs has it (empty, and hidden
 * by devpts next), not a tmpfs of their own: a superblock costs every
 * memory cgroup of the host a slot in its shrinker map (each sandbox
 * has one), about 1 KiB per 64 superblocks. Entries this kernel lacks
 * are skipped. */
static int
mask_proc(const char *root, const char *entry, int ro, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/proc/%s", root, entry), *empty = NULL;
	struct stat st;
	int rc = 0;

	if (lstat(p, &st) == 0) {
		if (ro) {
			rc = bind_ro(p, p, err);
		} else if (S_ISDIR(st.st_mode)) {
			empty = sbx_xasprintf("%s/dev/pts", root);
			rc = bind_ro(empty, p, err);
		} else if (mount("/dev/null", p, NULL, MS_BIND, NULL) < 0) {
			rc = sbx_err_set(err, SBX_EX_FAIL,
			    "cannot mask '%s':", p);
		}
	}
	free(empty);
	free(p);
	return rc;
}

static int
mount_proc(const char *root, struct sbx_err *err)
{
	static const char *const ro[] = {
		"sys", "sysrq-trigger", "irq", "bus", "fs",
	};
	static const char *const hidden[] = {
		"kcore", "keys", "timer_list", "sched_debug", "kallsyms",
		"acpi", "scsi", "latency_stats", "kpagecount", "kpageflags",
		"kpagecgroup",
	};
	char *p = sbx_xasprintf("%s/proc", root);
	size_t i;
	int rc;

	rc = mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (rc < 0)
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount /proc:");
	free(p);
	for (i = 0; !rc && i < sizeof ro / sizeof ro[0]; i++)
		rc = mask_proc(root, ro[i], 1, err);
	for (i = 0; !rc && i < sizeof hidden / sizeof hidden[0]; i++)
		rc = mask_proc(root, hidden[i], 0, err);
	return rc;
}

/* The options of the tmpfs that holds /dev and /dev/shm: /dev/shm's
 * size (sbx_limits_shm: within the memory limit; without one, as before,
 * tmpfs's half of the host's memory); the rest holds no data. */
static char *
shm_opts(uint64_t shm)
{
	return shm ? sbx_xasprintf("mode=0755,size=%llu",
	    (unsigned long long)shm) : sbx_xstrdup("mode=0755");
}

/* /dev: a tmpfs of /dev/shm's size (or, given from, that directory of
 * the skeleton's, which has it); its nodes, bound from the host's, and
 * the empty directory /dev/pts (mount_proc masks with it). */
static int
mount_dev(const char *root, const char *from, uint64_t shm,
    struct sbx_err *err)
{
	static const char *const nodes[] = {
		"null", "zero", "full", "random", "urandom", "tty",
	};
	struct mount_attr a = {
		.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
		.attr_clr = MOUNT_ATTR_NODEV,
	};
	char *dev = sbx_xasprintf("%s/dev", root), *p, *src;
	char *opts = shm_opts(shm);
	size_t i;
	int fd, rc = -1;

	if (from ? mount(from, dev, NULL, MS_BIND, NULL) < 0 ||
	    mount_setattr(AT_FDCWD, dev, 0, &a, sizeof a) < 0 :
	    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, opts) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount /dev:");
		goto out;
	}
	for (i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		p = sbx_xasprintf("%s/%s", dev, nodes[i]);
		src = sbx_xasprintf("/dev/%s", nodes[i]);
		fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
		if (fd >= 0)
			close(fd);
		if (fd < 0 || mount(src, p, NULL, MS_BIND, NULL) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot bind '%s':", src);
			free(p);
			free(src);
			goto out;
		}
		free(p);
		free(src);
	}
	p = sbx_xasprintf("%s/pts", dev);
	if (mkdir(p, 0755) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", p);
		free(p);
		goto out;
	}
	free(p);
	rc = 0;
out:
	free(opts);
	free(dev);
	return rc;
}

/* The rest of /dev, once /proc is masked: devpts, /dev/shm (a directory
 * of /dev's tmpfs, bound on itself: not a tmpfs of its own, see
 * mask_proc), the links; then /dev's mount read-only (not its
 * filesystem: /dev/shm is on it). */
static int
finish_dev(const char *root, struct sbx_err *err)
{
	/* /dev/shm as it was: executable, no devices, no setuid. */
	struct mount_attr a = {
		.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
		.attr_clr = MOUNT_ATTR_NOEXEC,
	};
	static const char *const links[][2] = {
		{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"},
		{"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"},
		{"/proc/self/fd/2", "stderr"},
	};
	char *dev = sbx_xasprintf("%s/dev", root), *p;
	size_t i;
	int rc = -1;

	p = sbx_xasprintf("%s/pts", dev);
	if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC,
	    "newinstance,ptmxmode=0666,mode=0620") < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount /dev/pts:");
		free(p);
		goto out;
	}
	free(p);
	p = sbx_xasprintf("%s/shm", dev);
	if (mkdir(p, 01777) < 0 || chmod(p, 01777) < 0 ||
	    mount(p, p, NULL, MS_BIND, NULL) < 0 ||
	    mount_setattr(AT_FDCWD, p, 0, &a, sizeof a) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount /dev/shm:");
		free(p);
		goto out;
	}
	free(p);
	for (i = 0; i < sizeof links / sizeof links[0]; i++) {
		p = sbx_xasprintf("%s/%s", dev, links[i][1]);
		if (symlink(links[i][0], p) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", p);
			free(p);
			goto out;
		}
		free(p);
	}
	/* Nothing more may be created in /dev. */
	a.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
	a.attr_clr = 0;
	if (mount_setattr(AT_FDCWD, dev, 0, &a, sizeof a) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make /dev read-only:");
		goto out;
	}
	rc = 0;
out:
	free(dev);
	return rc;
}

/* Only characters that mount's option syntax leaves alone. */
static int
plain_path(const char *p)
{
	return !strpbrk(p, ",:\\\n");
}

/* The directory path (absolute, plain) in the rootfs at rootfd, made
 * where missing, never through a symlink: an O_PATH fd, or -1. */
static int
open_target(int rootfd, const char *path)
{
	char *copy = sbx_xstrdup(path), *c, *save = NULL;
	int fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0), next;

	for (c = strtok_r(copy, "/", &save); c && fd >= 0;
	    c = strtok_r(NULL, "/", &save)) {
		if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST)
			next = -1;
		else
			next = openat(fd, c, O_PATH | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	free(copy);
	return fd;
}

/* Each volume on its path: its idmapped mount, or (rootless) a bind of
 * its directory, which our one id owns. */
static int
mount_volumes(const struct sbx_local_setup *s, const char *root,
    struct sbx_err *err)
{
	int i, rootfd, to, from, rc = 0;

	if (!s->nvols)
		return 0;
	if ((rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open the rootfs:");
	for (i = 0; i < s->nvols && !rc; i++) {
		from = s->vol_fd[i] >= 0 ? s->vol_fd[i] : open_tree(AT_FDCWD,
		    s->vol_src[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if ((to = open_target(rootfd, s->vol_dst[i])) < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot create the "
			    "volume's '%s':", s->vol_dst[i]);
		else if (from < 0 || move_mount(from, "", to, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot mount the "
			    "volume on '%s':", s->vol_dst[i]);
		if (to >= 0)
			close(to);
		if (from >= 0)
			close(from);
	}
	close(rootfd);
	return rc;
}

int
sbx_local_mount_rootfs(const struct sbx_local_setup *s, struct sbx_err *err)
{
	char *root = sbx_xasprintf("%s/rootfs", s->dir);
	char *lower = sbx_xasprintf("%s/lower", s->dir);
	char *skel = sbx_xasprintf("%s/root", lower);
	char *devdir = sbx_xasprintf("%s/dev", lower);
	char *opts = NULL, *p, *snaps = NULL;
	const char *base;
	size_t i;
	int rc = -1;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make mounts private:");
		goto out;
	}
	if (s->image_fd >= 0 && move_mount(s->image_fd, "", AT_FDCWD, lower,
	    MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount the image:");
		goto out;
	}
	/* The skeleton in root/, and in dev/ what /dev (and /dev/shm)
	 * show: one tmpfs, not two (see mask_proc: a superblock is not
	 * free). */
	p = shm_opts(s->shm);
	rc = !s->image ? mount("tmpfs", lower, "tmpfs", MS_NOSUID | MS_NODEV,
	    p) : 0;
	free(p);
	if (!s->image && (rc < 0 || mkdir(skel, 0755) < 0 ||
	    mkdir(devdir, 0755) < 0 ||
	    make_skeleton(skel, s->workdir, s->accounts, err) < 0)) {
		if (!err->msg[0])
			sbx_err_set(err, SBX_EX_FAIL, "cannot mount the skeleton:");
		rc = -1;
		goto out;
	}
	rc = -1;
	base = !s->image ? skel : s->image_fd < 0 ? s->image : lower;
	if (!plain_path(s->dir) || (s->image && s->image_fd < 0 &&
	    !plain_path(s->image))) {
		sbx_err_set(err, SBX_EX_USAGE,
		    "paths with ',', ':' or '\\' cannot be overlay layers");
		goto out;
	}
	/* A snapshot's layers, over the image. */
	snaps = sbx_xstrdup("");
	for (i = 0; i < (size_t)s->nsnap; i++) {
		if (s->snap_fd[i] >= 0) {
			p = sbx_xasprintf("%s/snap%zu", s->dir, i);
			if (move_mount(s->snap_fd[i], "", AT_FDCWD, p,
			    MOVE_MOUNT_F_EMPTY_PATH) < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot mount the "
				    "snapshot:");
				free(p);
				goto out;
			}
		} else if (!plain_path(s->snap_path[i])) {
			sbx_err_set(err, SBX_EX_USAGE, "paths with ',', ':' "
			    "or '\\' cannot be overlay layers");
			goto out;
		} else
			p = sbx_xstrdup(s->snap_path[i]);
		opts = sbx_xasprintf("%s%s:", snaps, p);
		free(snaps);
		free(p);
		snaps = opts;
		opts = NULL;
	}
	if (s->disk_fd >= 0) {
		/* The disk holds upper and work; DIR/upper stays, under
		 * the image, for what sbx-netd puts there (its CA). */
		p = sbx_xasprintf("%s/" SBX_DISK_MOUNT, s->dir);
		rc = move_mount(s->disk_fd, "", AT_FDCWD, p,
		    MOVE_MOUNT_F_EMPTY_PATH);
		free(p);
		rc = rc < 0 ? sbx_err_set(err, SBX_EX_FAIL, "cannot mount the "
		    "disk:") : 0;
		if (rc < 0)
			goto out;
		rc = -1;
		opts = sbx_xasprintf("lowerdir=%s%s%s%s,upperdir=%s/"
		    SBX_DISK_MOUNT "/upper,workdir=%s/" SBX_DISK_MOUNT
		    "/work%s", s->image ? s->dir : "", s->image ? "/upper:" :
		    "", snaps, base, s->dir, s->dir, s->rootless ||
		    s->uid_base ? ",userxattr" : "");
	} else
		opts = sbx_xasprintf("lowerdir=%s%s,upperdir=%s/upper,"
		    "workdir=%s/work%s", snaps, base, s->dir, s->dir,
		    s->rootless || s->uid_base ? ",userxattr" : "");
	if (mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV, opts) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount the overlay:");
		goto out;
	}
	if (!s->image) {
		struct stat st;

		for (i = 0; i < sizeof host_dirs / sizeof host_dirs[0]; i++) {
			char *host = sbx_xasprintf("/%s", host_dirs[i]);

			p = sbx_xasprintf("%s/%s", root, host_dirs[i]);
			rc = 0;
			if (lstat(host, &st) == 0 && S_ISDIR(st.st_mode))
				rc = bind_ro(host, p, err);
			free(host);
			free(p);
			if (rc < 0)
				goto out;
		}
		if (ca_certs(s, root, err) < 0 || (s->accounts &&
		    accounts(s, root, err) < 0))
			goto out;
	} else {
		/* An image may lack the mount points and the workdir. */
		for (i = 0; i < sizeof private_dirs / sizeof private_dirs[0];
		    i++) {
			int tmp = !strcmp(private_dirs[i], "tmp");

			p = sbx_xasprintf("%s/%s", root, private_dirs[i]);
			if (mkdir(p, 0755) == 0 && tmp)
				chmod(p, 01777);
			free(p);
		}
		p = sbx_xasprintf("%s%s", root, s->workdir);
		rc = sbx_mkdirs(p, 0755, err);
		free(p);
		if (rc < 0)
			goto out;
	}
	rc = -1;
	if (mount_volumes(s, root, err) < 0 || mount_dev(root, s->image ? NULL :
	    devdir, s->shm, err) < 0 || mount_proc(root, err) < 0 ||
	    finish_dev(root, err) < 0)
		goto out;
	p = sbx_xasprintf("%s/sys", root);
	/* sysfs goes with a network namespace of our own (every sandbox
	 * has one). */
	if (mount("sysfs", p, "sysfs", MS_RDONLY |
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot mount /sys:");
		free(p);
		goto out;
	}
	free(p);
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot pivot into the rootfs:");
		goto out;
	}
	/* The old root sits under the new one: detach it, nothing of the
	 * host remains reachable by path. */
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot detach the old root:");
		goto out;
	}
	rc = 0;
out:
	free(snaps);
	free(opts);
	free(devdir);
	free(skel);
	free(root);
	free(lower);
	return rc;
}
