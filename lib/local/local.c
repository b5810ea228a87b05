/* local.c - the local backend: create, kill and list sandboxes made of
 * Linux namespaces, cgroups and an overlay, each run by its sbx-init */
#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "local.h"
#include "image/image.h"

int sbx_local_shell(const json_t *ref, const struct sbx_shell_req *rq,
    json_t **out, struct sbx_err *err);
int sbx_local_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

/* The sbx-init binary: beside our own, or one up (the remote flavour's
 * bin/remote/ and libexec/sbx/remote/), or in ../libexec/sbx/. */
static char *
init_find(int *fd, struct sbx_err *err)
{
	static const char *const where[] = {"sbx-init", "../sbx-init",
	    "../libexec/sbx/sbx-init"};
	char *p = NULL;
	size_t i;

	*fd = -1;
	for (i = 0; *fd < 0 && i < sizeof where / sizeof where[0]; i++) {
		free(p);
		if (!(p = sbx_sibling(where[i]))) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot find myself:");
			return NULL;
		}
		*fd = open(p, O_RDONLY | O_CLOEXEC);
	}
	if (*fd < 0)
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", p);
	return p;
}

int
sbx_local_init_open(struct sbx_err *err)
{
	int fd;

	free(init_find(&fd, err));
	return fd;
}

char *
sbx_local_init_path(struct sbx_err *err)
{
	int fd;
	char *p = init_find(&fd, err);

	if (fd < 0) {
		free(p);
		return NULL;
	}
	close(fd);
	return p;
}

void
sbx_local_new_id(char *id)
{
	unsigned char r[SBX_ID_LEN / 2];
	size_t i;

	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		for (i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(rand() ^ getpid() ^ time(NULL));
	for (i = 0; i < sizeof r; i++)
		snprintf(id + 2 * i, 3, "%02x", r[i]);
}

/* Claim a uid range slot with an exclusive create: no lock needed. The
 * id is written first and linked into place, so that a slot file always
 * names its sandbox: one killed while it claims leaves nothing that
 * release_slot cannot find. */
static int
claim_slot(const char *root, const char *id, uint32_t *slot,
    struct sbx_err *err)
{
	char *dir = sbx_xasprintf("%s/.slots", root), *p;
	char *tmp = sbx_xasprintf("%s/.%s", dir, id);
	uint32_t start, i, s;
	int fd, w, rc = -1;

	/* (A mkdir of one there locks the store, as each create's does.) */
	if (access(dir, F_OK) < 0)
		mkdir(dir, 0700);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	/* A full disk is not a lack of uid ranges. */
	if (fd < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", tmp);
		goto out;
	}
	w = dprintf(fd, "%s\n", id);
	if (close(fd) < 0 || w < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", tmp);
		goto out;
	}
	getrandom(&start, sizeof start, 0);
	for (i = 0; i < SBX_UID_SLOTS && rc < 0; i++) {
		s = (start + i) % SBX_UID_SLOTS;
		p = sbx_xasprintf("%s/%u", dir, s);
		if (link(tmp, p) == 0) {
			*slot = s;
			rc = 0;
		}
		free(p);
	}
	if (rc < 0)
		sbx_err_set(err, SBX_EX_FAIL, "no free uid range");
out:
	unlink(tmp);
	free(tmp);
	free(dir);
	return rc;
}

/* The slot meta.json records, while its file names id; or, when there is
 * no meta.json (a creation or a kill that died half-way), the slot whose
 * file names id. */
static void
release_slot(const char *root, json_t *meta, const char *id)
{
	json_t *s = json_object_get(meta, "slot");
	char *dir = sbx_xasprintf("%s/.slots", root), *p, *text, num[24];
	struct dirent *e;
	DIR *d;

	if (json_is_integer(s)) {
		/* Only while its file names id: a slot taken since by
		 * another sandbox (what a killed kill left, freed late from
		 * the trash) stays. */
		snprintf(num, sizeof num, "%lld", (long long)
		    json_integer_value(s));
		if ((text = sbx_local_read_small(dir, num))) {
			text[strcspn(text, "\n")] = '\0';
			if (!id || !strcmp(text, id)) {
				p = sbx_xasprintf("%s/%s", dir, num);
				unlink(p);
				free(p);
			}
			free(text);
		}
	} else if (!meta && id && (d = opendir(dir))) {
		p = sbx_xasprintf("%s/.%s", dir, id);
		unlink(p);
		free(p);
		while ((e = readdir(d)))
			if (e->d_name[0] != '.' && (text = sbx_local_read_small(dir,
			    e->d_name))) {
				text[strcspn(text, "\n")] = '\0';
				if (!strcmp(text, id))
					unlinkat(dirfd(d), e->d_name, 0);
				free(text);
			}
		closedir(d);
	}
	free(dir);
}

int
sbx_local_release_of(const char *dir, const char *id)
{
	json_t *meta = sbx_local_meta(dir);
	struct sbx_err err = {0};
	int rc = sbx_local_reap(dir, id, meta, &err);

	/* Its uid is free only once none of its processes is left. */
	if (rc == 0)
		release_slot(sbx_local_root(), meta, id);
	sbx_local_release_name(sbx_local_root(), sbx_json_str(meta, "name"),
	    id);
	json_decref(meta);
	return rc;
}

void
sbx_local_release_name(const char *root, const char *name, const char *id)
{
	char *p, target[64];
	ssize_t n;

	if (!name)
		return;
	p = sbx_xasprintf("%s/.names/%s", root, name);
	n = readlink(p, target, sizeof target - 1);
	if (n > 0) {
		target[n] = '\0';
		if (!strcmp(target, id))
			unlink(p);
	}
	free(p);
}

static int
write_map(pid_t pid, const char *file, const char *map)
{
	char path[64];
	int fd, rc = 0;

	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (write(fd, map, strlen(map)) != (ssize_t)strlen(map))
		rc = -1;
	close(fd);
	return rc;
}

static int
lo_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return rc;
}

/* Move fd to number to. */
static int
place(int fd, int to)
{
	return fd == to ? fcntl(fd, F_SETFD, 0) : dup2(fd, to);
}

/* The child of clone: sandbox root in the new namespaces. It builds the
 * rootfs, then becomes sbx-init. Never returns. */
static void
sandbox_child(struct sbx_local_setup *s, int go_fd, int err_fd, int img_sock)
{
	struct sbx_err err = {0};
	char c;
	char *const argv[] = {"sbx-init", NULL}, *const envp[] = {NULL};
	int fds[5], i;

	/* Into its cgroups before anything else, by itself: see
	 * sbx_cg_join (the parent's write of our pid waited 5 to 15 ms for
	 * an RCU grace period). */
	if (sbx_cg_join(s->cg_fd, s->ncg, s->cg_placed ? s->cg_v2 : -1) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot join the sandbox's "
		    "cgroups:");
		goto fail;
	}
	if (read(go_fd, &c, 1) != 1)
		_exit(1);
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot become sandbox root:");
		goto fail;
	}
	if (!s->rootless)
		setgroups(0, NULL);
	if (sethostname(s->hostname, strlen(s->hostname)) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot set the hostname:");
		goto fail;
	}
	if (lo_up() < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot bring up loopback:");
		goto fail;
	}
	/* What the root is made of comes last: its mounts are the slow
	 * part of the parent's work. */
	if (img_sock >= 0) {
		struct sbx_msg m;
		int k;

		/* type: 1 the image's mount, 2 the disk's, 4 the volumes',
		 * above 4 bits the number of snapshot layers; fds: image,
		 * layers, disk, volumes. */
		if (sbx_msg_recv(img_sock, &m) > 0 && m.nfds == (k = !!(m.type &
		    1) + (int)(m.type >> 4) + !!(m.type & 2)) + (m.type & 4 ?
		    s->nvols : 0) && (int)(m.type >> 4) == s->nsnap) {
			if (m.type & 1)
				s->image_fd = m.fds[0];
			for (i = 0; i < s->nsnap; i++)
				s->snap_fd[i] = m.fds[!!(m.type & 1) + i];
			if (m.type & 2)
				s->disk_fd = m.fds[k - 1];
			for (i = 0; (m.type & 4) && i < s->nvols; i++)
				s->vol_fd[i] = m.fds[k + i];
			m.nfds = 0;
		}
		sbx_msg_release(&m);
		close(img_sock);
	}
	if (sbx_local_mount_rootfs(s, &err) < 0)
		goto fail;
	/* Its cgroups, joined first thing, are the root of its cgroup
	 * namespace; nothing of the sandbox's own has run yet. */
	if (read(go_fd, &c, 1) != 1)
		_exit(1);
	close(go_fd);
	if (unshare(CLONE_NEWCGROUP) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL,
		    "cannot create a cgroup namespace:");
		goto fail;
	}
	/* Lift the fds the agent needs above any target, then place them. */
	fds[0] = fcntl(s->config_fd, F_DUPFD_CLOEXEC, 100);
	fds[1] = fcntl(s->listen_fd, F_DUPFD_CLOEXEC, 100);
	fds[2] = fcntl(s->status_fd, F_DUPFD_CLOEXEC, 100);
	fds[3] = fcntl(s->log_fd, F_DUPFD_CLOEXEC, 100);
	fds[4] = fcntl(s->init_fd, F_DUPFD_CLOEXEC, 100);
	for (i = 0; i < 5; i++)
		if (fds[i] < 0) {
			sbx_err_set(&err, SBX_EX_FAIL, "cannot pass fds:");
			goto fail;
		}
	if (place(fds[0], 3) < 0 || place(fds[1], 4) < 0 ||
	    place(fds[2], 5) < 0 || place(fds[3], 2) < 0) {
		sbx_err_set(&err, SBX_EX_FAIL, "cannot pass fds:");
		goto fail;
	}
	syscall(SYS_close_range, 6, ~0U, CLOSE_RANGE_CLOEXEC);
	fexecve(fds[4], argv, envp);
	sbx_err_set(&err, SBX_EX_FAIL, "cannot start sbx-init:");
fail:
	if (write(err_fd, err.msg, strlen(err.msg)) < 0)
		_exit(2);
	_exit(1);
}

/* The sandbox's first process, in its new namespaces (a fork's return:
 * 0 in it), placed in its cgroup v2 directory unified (NULL: none) by
 * clone3(CLONE_INTO_CGROUP), which takes none of the global lock that a
 * write to cgroup.procs takes (an RCU grace period, 5 to 15 ms); where
 * the kernel cannot, by clone, and it writes its cgroup.procs itself
 * (s->cg_placed says which it is). */
static pid_t
clone_sandbox(struct sbx_local_setup *s, const char *unified)
{
	uint64_t ns = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
	    CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET;
	struct clone_args ca = {.flags = ns | CLONE_INTO_CGROUP,
	    .exit_signal = SIGCHLD};
	pid_t pid = -1;
	int cgfd;

	s->cg_placed = 0;
	if (unified && s->cg_v2 >= 0 && (cgfd = open(unified, O_RDONLY |
	    O_DIRECTORY | O_CLOEXEC)) >= 0) {
		ca.cgroup = (uint64_t)cgfd;
		s->cg_placed = 1;
		pid = (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
		close(cgfd);
		if (pid >= 0)
			return pid;
		s->cg_placed = 0;
	}
	return (pid_t)syscall(SYS_clone, ns | SIGCHLD, NULL, NULL, NULL,
	    NULL);
}

/* An idmapped view of the image, so that its root owns it in the
 * sandbox: copy-up and new files work without touching the image. */
static int
idmapped_tree(const char *image, pid_t pid, const char *what,
    struct sbx_err *err)
{
	char path[64];
	struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP |
	    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	int fd, ns;

	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
	if ((ns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", path);
	a.userns_fd = (uint64_t)ns;
	fd = open_tree(AT_FDCWD, image, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0 || mount_setattr(fd, "", AT_EMPTY_PATH, &a, sizeof a) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot idmap the %s '%s':",
		    what, image);
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	close(ns);
	return fd;
}

static int
check_image(const char *image, char **real, struct sbx_err *err)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT};
	struct stat st;
	int dfd, fd;

	*real = NULL;
	if (!(*real = realpath(image, NULL)) || stat(*real, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		return sbx_err_set(err, SBX_EX_USAGE,
		    "image '%s' is not a directory", image);
	if ((dfd = open(*real, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "cannot open image '%s':",
		    image);
	/* Resolved inside the image, as the sandbox will see it. */
	fd = (int)syscall(SYS_openat2, dfd, "bin/sh", &how, sizeof how);
	close(dfd);
	if (fd < 0)
		return sbx_err_set(err, SBX_EX_USAGE,
		    "image '%s' has no /bin/sh", image);
	close(fd);
	return 0;
}

/* The image's User (its config's), checked now: a name the image does
 * not know, or an id outside the sandbox's uid map, is bad input. */
static int
image_user(const char *image, const json_t *config, int rootless,
    struct sbx_local_user *u, struct sbx_err *err)
{
	const char *spec = sbx_json_str(config, "User");
	int fd, rc;

	memset(u, 0, sizeof *u);
	if (!spec || !*spec)
		return 0;
	if ((fd = open(image, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "cannot open image '%s':",
		    image);
	rc = sbx_local_user_resolve(fd, spec, u, err);
	close(fd);
	if (rc < 0)
		return -1;
	/* Rootless, the map is sandbox root alone (and no setgroups). */
	if (rootless && (u->uid || u->gid))
		return sbx_err_set(err, SBX_EX_USAGE, "the image's user '%s' "
		    "is not root, the only user of a rootless sandbox", spec);
	if (rootless)
		u->ngroups = 0;
	if (u->uid >= SBX_UID_RANGE || u->gid >= SBX_UID_RANGE)
		return sbx_err_set(err, SBX_EX_USAGE, "the image's user '%s' "
		    "is outside the sandbox's %u ids", spec, SBX_UID_RANGE);
	for (uint32_t i = 0; i < u->ngroups; i++)
		if (u->groups[i] >= SBX_UID_RANGE)
			return sbx_err_set(err, SBX_EX_USAGE, "the image's user "
			    "'%s' has group %u, outside the sandbox's %u ids",
			    spec, u->groups[i], SBX_UID_RANGE);
	return 0;
}

/* Sandbox root mounts its overlay from paths under root: every directory
 * above must let others search it. */
static int
searchable(const char *root, struct sbx_err *err)
{
	char *p = sbx_xstrdup(root), *s;
	struct stat st;
	int rc = 0;

	for (s = p + strlen(p); s > p; ) {
		if (stat(p, &st) == 0 && !(st.st_mode & S_IXOTH)) {
			rc = sbx_err_set(err, SBX_EX_FAIL,
			    "'%s' is not searchable by sandbox users "
			    "(chmod o+x it, or choose another SBX_LOCAL_DIR)", p);
			break;
		}
		while (s > p && *s != '/')
			s--;
		*s = '\0';
	}
	free(p);
	return rc;
}

/* Everything create made, undone. */
static void
undo(const char *root, const char *dir, struct sbx_cgroups *cg,
    json_t *meta, const char *name, const char *id)
{
	if (cg) {
		sbx_cg_kill(cg, 2000);
		sbx_cg_remove(cg);
	}
	if (dir)
		sbx_rmtree(dir);
	release_slot(root, meta, id);
	sbx_local_release_name(root, name, id);
}

const char *const sbx_local_ca_env[SBX_LOCAL_CA_ENV] = {
	"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	"REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt",
	"NODE_EXTRA_CA_CERTS=/etc/ssl/certs/sbx-ca.pem",
};

/* ca: the sandbox has sbx-netd's CA in its trust store (header
 * injection): the variables that make clients that do not read
 * /etc/ssl/certs trust it. Before --env, which may replace them. */
static int
send_config(int fd, const struct sbx_spec *spec, const char *workdir, int ca,
    const json_t *imgenv, const struct sbx_local_user *u)
{
	struct sbx_buf b = SBX_BUF_INIT;
	uint32_t n = 0, nbase, nimg = 0;
	const json_t *v;
	size_t i;
	int rc;
	static const char *const base[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:"
		"/bin", "HOME=/root", "LANG=C.UTF-8",
	};

	while (spec->env && spec->env[n])
		n++;
	json_array_foreach(imgenv, i, v)
		if (json_is_string(v) && strchr(json_string_value(v), '='))
			nimg++;
	nbase = ca ? SBX_LOCAL_CA_ENV : 0;
	sbx_msg_put_u64(&b, spec->timeout);
	sbx_msg_put_str(&b, workdir);
	sbx_msg_put_u32(&b, n + 3 + nbase + nimg + !!u->set);
	for (i = 0; i < 3; i++)
		sbx_msg_put_str(&b, base[i]);
	/* The image's user's home, as docker gives it (its Env may not). */
	if (u->set) {
		char *home = sbx_xasprintf("HOME=%s", u->home);

		sbx_msg_put_str(&b, home);
		free(home);
	}
	/* The image's own (its PATH over ours), then the CA's and --env. */
	json_array_foreach(imgenv, i, v)
		if (json_is_string(v) && strchr(json_string_value(v), '='))
			sbx_msg_put_str(&b, json_string_value(v));
	for (i = 0; i < nbase; i++)
		sbx_msg_put_str(&b, sbx_local_ca_env[i]);
	for (i = 0; i < n; i++)
		sbx_msg_put_str(&b, spec->env[i]);
	sbx_msg_put_u32(&b, (uint32_t)u->set);
	sbx_msg_put_u32(&b, u->uid);
	sbx_msg_put_u32(&b, u->gid);
	sbx_msg_put_u32(&b, u->ngroups);
	for (i = 0; i < u->ngroups; i++)
		sbx_msg_put_u32(&b, u->groups[i]);
	rc = sbx_msg_send(fd, SBX_MSG_EXEC, b.data, b.len, NULL, 0);
	/* Values of --env may be secrets: leave no copy in our heap. */
	explicit_bzero(b.data, b.len);
	sbx_buf_release(&b);
	return rc;
}

static json_t *
make_meta(const struct sbx_spec *spec, const char *id, const char *image,
    const char *workdir, pid_t pid, uid_t base, long long slot,
    const char *warm)
{
	json_t *m = json_object(), *envk = json_array();
	size_t i;

	for (i = 0; spec->env && spec->env[i]; i++)
		json_array_append_new(envk, json_stringn(spec->env[i],
		    strcspn(spec->env[i], "=")));
	json_object_set_new(m, "id", json_string(id));
	json_object_set_new(m, "name", spec->name ? json_string(spec->name) :
	    json_null());
	json_object_set_new(m, "image", json_string(image));
	json_object_set_new(m, "workdir", json_string(workdir));
	json_object_set_new(m, "created_at_epoch", json_integer(sbx_now()));
	json_object_set_new(m, "timeout", json_integer((json_int_t)
	    spec->timeout));
	json_object_set_new(m, "network", json_string(spec->network ==
	    SBX_NET_ALLOW ? "allow" : "deny"));
	json_object_set_new(m, "memory", json_integer((json_int_t)
	    spec->memory));
	json_object_set_new(m, "cpus_milli", json_integer((json_int_t)
	    spec->cpus_milli));
	json_object_set_new(m, "pids_max", json_integer((json_int_t)
	    spec->pids));
	json_object_set_new(m, "shm", json_integer((json_int_t)
	    sbx_limits_shm(spec->memory)));
	json_object_set(m, "labels", spec->labels ? spec->labels :
	    json_object());
	json_object_set_new(m, "env_names", envk);
	json_object_set_new(m, "pid", json_integer(pid));
	json_object_set_new(m, "starttime", json_integer((json_int_t)
	    sbx_local_starttime(pid)));
	json_object_set_new(m, "uid_base", json_integer((json_int_t)base));
	json_object_set_new(m, "slot", slot >= 0 ? json_integer(slot) :
	    json_null());
	if (spec->start)
		json_object_set(m, "start", spec->start);
	if (warm)
		json_object_set_new(m, "warm", json_string(warm));
	return m;
}

/* The trees of snapshot from's layers, top first, into snaps and s
 * (rootless: their paths are the layers). */
static int
snap_layers(const char *from, json_t **layers, char **snaps,
    struct sbx_local_setup *s, struct sbx_err *err)
{
	json_t *m = sbx_snap_get(from, err), *v;
	size_t i;

	if (!m)
		return -1;
	*layers = json_incref(json_object_get(m, "layers"));
	json_decref(m);
	if (!json_array_size(*layers) || json_array_size(*layers) >
	    SBX_SNAP_DEPTH)
		return sbx_err_set(err, SBX_EX_DATA, "snapshot '%s' has bad "
		    "layers", from);
	json_array_foreach(*layers, i, v) {
		if (!json_is_string(v) || !(snaps[i] = sbx_snap_tree(
		    json_string_value(v))))
			return sbx_err_set(err, SBX_EX_FAIL, "snapshot '%s': "
			    "its layer '%s' is gone", from, json_is_string(v) ?
			    json_string_value(v) : "?");
		s->snap_path[i] = snaps[i];
	}
	s->nsnap = (int)i;
	return 0;
}

/* Create a sandbox, or (rid) start a stopped one again over its files:
 * the same id, directory, uid range and name. warm: made ahead for
 * local.warm's pool, the key it is made for. */
static int
start_sandbox(const struct sbx_spec *asked, const char *rid, json_t *oldmeta,
    const char *warm, json_t **ref, struct sbx_err *err)
{
	/* What it gets: a default limit it cannot have is left out. */
	struct sbx_spec got = *asked, *spec = &got;
	const char *root = sbx_local_root();
	const char *workdir = spec->workdir ? spec->workdir : "/workspace";
	int host = !spec->image || !strcmp(spec->image, "host");
	int rootless = geteuid() != 0, rc = -1, cg_made = 0;
	struct sbx_local_setup s = {0};
	struct sbx_cgroups cg = {0};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char id[SBX_ID_LEN + 1], *dir = NULL, *image = NULL, *p, msg[512];
	char hostname[64], map[64], loopdev[32] = "", c = 'g';
	int go[2] = {-1, -1}, ep[2] = {-1, -1}, cp[2] = {-1, -1};
	int is[2] = {-1, -1}, img = -1, i, named = 0, early = 0;
	json_t *meta = NULL;
	uint32_t slot = 0;
	ssize_t n = 0;
	pid_t pid = -1, netd = 0;
	int netfd = -1, snaplk = -1, vollk = -1; /* sbx-netd's readiness, until it is read */
	uint64_t disk = spec->disk;
	int diskfd = -1, disksock = -1;
	pid_t diskpid = -1;
	int pidw = -1; /* where sbx-netd waits for the sandbox's pid */
	struct sbx_image_use iu = {0};
	struct sbx_local_user user = {0};
	struct sbx_err ignored;
	char *snaps[SBX_SNAP_DEPTH] = {0};
	json_t *layers = NULL;

	*ref = NULL;
	s.listen_fd = s.status_fd = s.log_fd = s.init_fd = s.image_fd = -1;
	s.disk_fd = -1;
	/* Loop devices are root's: rootless, no quota on the disk. */
	if (disk && rootless && !spec->disk_default)
		return sbx_err_set(err, SBX_EX_USAGE, "--disk needs root: a "
		    "rootless sandbox cannot have a disk quota");
	if (disk && rootless) {
		sbx_note("limits.disk not applied: a rootless sandbox cannot "
		    "have a disk quota");
		disk = 0;
	}
	if (disk && access("/dev/loop-control", R_OK | W_OK) < 0) {
		/* A container without loop devices, say. */
		if (!spec->disk_default)
			return sbx_err_set(err, SBX_EX_USAGE, "--disk needs "
			    "loop devices: '/dev/loop-control':");
		sbx_note("limits.disk not applied: no loop devices "
		    "('/dev/loop-control': %s)", strerror(errno));
		disk = 0;
	}
	if (!sbx_path_plain(workdir))
		return sbx_err_set(err, SBX_EX_USAGE,
		    "invalid workdir '%s' (want an absolute, plain path)",
		    workdir);
	/* A stopped sandbox's disk is there already. */
	if (disk && !rid && sbx_local_disk_fit(root, &disk,
	    spec->disk_default, err) < 0)
		return -1;
	if (sbx_local_net_check(spec, err) < 0)
		return -1;
	/* A name of the image store (sbx-image pull), unless a path. */
	if (!host && !sbx_image_is_path(spec->image)) {
		if (sbx_image_lookup(spec->image, &iu, err) < 0)
			return -1;
		spec->image = iu.rootfs;
	} else if (!host && rid && sbx_json_str(oldmeta, "image_config")) {
		/* Started again: its image's environment as at create. */
		sbx_image_config_of(sbx_json_str(oldmeta, "image_config"),
		    &iu.config);
	}
	if (!host && (check_image(spec->image, &image, err) < 0 ||
	    image_user(image, iu.config, rootless, &user, err) < 0)) {
		free(image);
		sbx_image_use_release(&iu);
		return -1;
	}
	for (i = 0; i < SBX_SNAP_DEPTH; i++)
		s.snap_fd[i] = -1;
	/* What it stands on stays until its meta.json says so. */
	if (spec->from)
		snaplk = sbx_local_lock(sbx_snap_root(), 0);
	if (json_array_size(spec->volumes))
		vollk = sbx_local_volumes_lock(0);
	if (spec->from && snap_layers(spec->from, &layers, snaps, &s,
	    err) < 0)
		goto out;
	if ((s.init_fd = sbx_local_init_open(err)) < 0)
		goto out;
	if (json_array_size(spec->volumes) > SBX_LOCAL_VOLUMES_MAX) {
		sbx_err_set(err, SBX_EX_USAGE, "at most %d volumes in a local "
		    "sandbox", SBX_LOCAL_VOLUMES_MAX);
		goto out;
	}
	/* The image, the snapshot layers, the disk and the volumes go to
	 * the sandbox's first process in one message. */
	if (2 + s.nsnap + (int)json_array_size(spec->volumes) > SBX_MSG_FDS) {
		sbx_err_set(err, SBX_EX_USAGE, "a local sandbox takes at most "
		    "%d snapshot layers and volumes together (this one: %d "
		    "layers, %zu volumes)", SBX_MSG_FDS - 2, s.nsnap,
		    json_array_size(spec->volumes));
		goto out;
	}
	/* Each volume's directory, made at its first use (as docker). */
	for (s.nvols = 0; s.nvols < (int)json_array_size(spec->volumes);
	    s.nvols++) {
		json_t *v = json_array_get(spec->volumes, (size_t)s.nvols);

		s.vol_fd[s.nvols] = -1;
		s.vol_dst[s.nvols] = sbx_json_str(v, "path");
		if (!s.vol_dst[s.nvols] || !sbx_json_str(v, "name") ||
		    !(s.vol_src[s.nvols] = sbx_local_volume_path(
		    sbx_json_str(v, "name"), 1, err))) {
			if (!err->msg[0])
				sbx_err_set(err, SBX_EX_DATA, "bad volume");
			goto out;
		}
	}
	if (sbx_mkdirs(root, rootless ? 0700 : 0711, err) < 0)
		goto out;
	if (!rootless && searchable(root, err) < 0)
		goto out;
	for (i = 0; i < 16 && !rid; i++) {
		sbx_local_new_id(id);
		free(dir);
		dir = sbx_xasprintf("%s/%s", root, id);
		if (mkdir(dir, 0700) == 0)
			break;
		if (errno != EEXIST) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", dir);
			free(dir);
			dir = NULL;
			goto out;
		}
	}
	if (rid) {
		snprintf(id, sizeof id, "%s", rid);
		dir = sbx_xasprintf("%s/%s", root, id);
	}
	if (disk && (disksock = sbx_local_disk_start(dir, disk, &diskpid,
	    err)) < 0)
		goto fail;
	if (rid) {
		/* started again */
	} else if (spec->name) {
		if (sbx_local_claim_name(root, spec->name, id, err) < 0)
			goto fail;
		named = 1;
	}
	s.dir = dir;
	s.id = id;
	s.rootless = rootless;
	s.image = host ? NULL : image;
	s.workdir = workdir;
	/* Rootless, the sandbox has root's id alone: no account to add. */
	if (host && !rootless) {
		if (sbx_local_host_accounts(dir, err) < 0)
			goto fail;
		s.accounts = 1;
	}
	if (rootless) {
		s.uid_base = getuid();
		s.gid_base = getgid();
	} else if (rid) {
		slot = (uint32_t)sbx_json_int(oldmeta, "slot", 0);
		s.uid_base = SBX_UID_BASE + slot * SBX_UID_RANGE;
		s.gid_base = s.uid_base;
	} else {
		if (claim_slot(root, id, &slot, err) < 0)
			goto fail;
		meta = json_pack("{sI}", "slot", (json_int_t)slot);
		s.uid_base = SBX_UID_BASE + slot * SBX_UID_RANGE;
		s.gid_base = s.uid_base;
		/* Only we and this sandbox's root may pass through. */
		if (chown(dir, 0, s.gid_base) < 0 || chmod(dir, 0710) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot set up '%s':", dir);
			goto fail;
		}
	}
	snprintf(hostname, sizeof hostname, "%s", spec->name ? spec->name : id);
	s.hostname = hostname;
	{
		static const char *const sub[] = {"upper", "work", "rootfs",
		    "lower", SBX_DISK_MOUNT};

		for (i = 0; i < 5 + s.nsnap && !rid; i++) {
			/* A disk holds the overlay's work directory. */
			if ((!disk && i == 4) || (disk && i == 1))
				continue;
			p = i < 5 ? sbx_xasprintf("%s/%s", dir, sub[i]) :
			    sbx_xasprintf("%s/snap%d", dir, i - 5);
			if (mkdir(p, 0755) < 0 || lchown(p, s.uid_base,
			    s.gid_base) < 0) {
				sbx_err_set(err, SBX_EX_FAIL,
				    "cannot create '%s':", p);
				free(p);
				goto fail;
			}
			free(p);
		}
	}
	/* sbx-netd starts now, while the sandbox is made: its exec and its
	 * files are out of the way by the time it has the sandbox's pid. */
	if (sbx_local_net_wanted(dir, spec) && (netfd = sbx_local_net_spawn(
	    dir, id, host ? "/" : image, 0, &pidw, spec, err)) < 0)
		goto fail;
	/* The agent's socket: only we may connect to it. */
	if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", dir) >=
	    (int)sizeof sa.sun_path) {
		sbx_err_set(err, SBX_EX_USAGE,
		    "sandbox directory '%s' is too long for a socket path", dir);
		goto fail;
	}
	if (rid)
		unlink(sa.sun_path); /* the stopped agent's */
	s.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.listen_fd < 0 || bind(s.listen_fd, (struct sockaddr *)&sa,
	    sizeof sa) < 0 || chmod(sa.sun_path, 0600) < 0 ||
	    listen(s.listen_fd, 128) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot listen on '%s':",
		    sa.sun_path);
		goto fail;
	}
	p = sbx_xasprintf("%s/status", dir);
	s.status_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	free(p);
	p = sbx_xasprintf("%s/init.log", dir);
	s.log_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	free(p);
	if (s.status_fd < 0 || s.log_fd < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create files in '%s':",
		    dir);
		goto fail;
	}
	if (rid) {
		/* A resume's sandbox has no agent (its caller checked): what
		 * is in its cgroups is a resume's killed half-way, an agent
		 * no meta names. Gone before the new one. */
		struct sbx_cgroups old;

		sbx_cg_find(&old, id);
		sbx_cg_kill(&old, 5000);
		sbx_cg_remove(&old);
		sbx_cg_release(&old);
	}
	if (sbx_cg_create(&cg, id, spec, err) < 0)
		goto fail;
	cg_made = 1;
	if ((s.ncg = sbx_cg_join_open(&cg, s.cg_fd, &s.cg_v2, err)) < 0) {
		s.ncg = 0;
		goto fail;
	}
	s.shm = sbx_limits_shm(spec->memory);
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) < 0 ||
	    ((!host || disk || s.nsnap || s.nvols) && !rootless &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, is) < 0)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create pipes:");
		goto fail;
	}
	s.config_fd = cp[1];
	/* A network namespace of its own whatever the network: allow is
	 * sbx-netd's way out of it, never the host's namespace. */
	pid = clone_sandbox(&s, cg.unified);
	if (pid < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create namespaces:");
		goto fail;
	}
	if (pid == 0) {
		close(go[1]);
		close(ep[0]);
		close(cp[0]);
		if (is[0] >= 0)
			close(is[0]);
		sandbox_child(&s, go[0], ep[1], is[1]);
	}
	/* sbx-netd joins its namespaces now, beside the maps, the cgroup
	 * and the disk (the sandbox waits on go until we are done). */
	if (pidw >= 0) {
		sbx_local_net_pid(pidw, pid);
		pidw = -1;
	}
	close(go[0]);
	close(ep[1]);
	close(cp[1]);
	go[0] = ep[1] = cp[1] = -1;
	for (i = 0; i < s.ncg; i++)
		close(s.cg_fd[i]);
	s.ncg = 0;
	if (is[1] >= 0) {
		close(is[1]);
		is[1] = -1;
	}
	if (rootless) {
		snprintf(map, sizeof map, "0 %u 1\n", (unsigned)s.uid_base);
		rc = write_map(pid, "uid_map", map);
		if (!rc)
			rc = write_map(pid, "setgroups", "deny");
		snprintf(map, sizeof map, "0 %u 1\n", (unsigned)s.gid_base);
		if (!rc)
			rc = write_map(pid, "gid_map", map);
	} else {
		snprintf(map, sizeof map, "0 %u %u\n", (unsigned)s.uid_base,
		    SBX_UID_RANGE);
		rc = write_map(pid, "uid_map", map);
		if (!rc)
			rc = write_map(pid, "gid_map", map);
	}
	if (rc < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write the uid map:");
		goto fail;
	}
	rc = -1;
	/* A sandbox whose root waits for its mounts starts now on what
	 * needs none of them (its hostname, cgroup namespace, loopback),
	 * while its disk is finished; not one whose root must wait for
	 * sbx-netd's CA as well (below). */
	early = is[0] >= 0 && !(netfd >= 0 &&
	    json_array_size(spec->net_inject));
	if (early && write(go[1], &c, 1) != 1) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start the sandbox:");
		goto fail;
	}
	if (disksock >= 0) {
		diskfd = sbx_local_disk_finish(disksock, diskpid, s.uid_base,
		    s.gid_base, loopdev, sizeof loopdev, err);
		disksock = -1;
		if (diskfd < 0)
			goto fail;
	}
	if (is[0] >= 0) {
		int mfds[SBX_MSG_FDS], nm = 0;

		if (!host && (img = idmapped_tree(image, pid, "image",
		    err)) < 0)
			goto fail;
		if (!host)
			mfds[nm++] = img;
		for (i = 0; i < s.nsnap; i++) {
			if ((s.snap_fd[i] = idmapped_tree(snaps[i], pid,
			    "snapshot", err)) < 0)
				goto fail;
			mfds[nm++] = s.snap_fd[i];
		}
		if (diskfd >= 0)
			mfds[nm++] = diskfd;
		for (i = 0; i < s.nvols; i++) {
			if ((s.vol_fd[i] = idmapped_tree(s.vol_src[i], pid,
			    "volume", err)) < 0)
				goto fail;
			mfds[nm++] = s.vol_fd[i];
		}
		/* (A sandbox that failed on its way here said why.) */
		if (sbx_msg_send(is[0], (!host ? 1u : 0u) | (diskfd >= 0 ?
		    2u : 0u) | (s.nvols ? 4u : 0u) | (unsigned)s.nsnap << 4, NULL,
		    0, mfds, nm) < 0 &&
		    (n = read(ep[0], msg,
		    sizeof msg - 1)) <= 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot pass the image:");
			goto fail;
		}
		if (n > 0) {
			msg[n] = '\0';
			sbx_err_set(err, SBX_EX_FAIL, "%s", msg);
			goto fail;
		}
	}
	/* sbx-netd sets the network up while the sandbox builds its root,
	 * unless it must first put a new CA where the sandbox's mounts will
	 * find it (header injection at create). No command runs before
	 * both are done. */
	if (netfd >= 0 && json_array_size(spec->net_inject)) {
		rc = sbx_local_net_ready(netfd, dir, &netd, err);
		netfd = -1;
		if (rc < 0)
			goto fail;
	}
	/* sbx-netd made it (header injection) and put it in the sandbox's
	 * trust store; a stopped sandbox started again still has both. */
	p = sbx_xasprintf("%s/ca.crt", dir);
	i = spec->network == SBX_NET_ALLOW && access(p, F_OK) == 0;
	free(p);
	if ((!early && write(go[1], &c, 1) != 1) || write(go[1], &c, 1) !=
	    1 || send_config(cp[0],
	    spec, workdir, i, json_object_get(iu.config, "Env"), &user) < 0) {
		/* One that failed on its way (its root) says why. */
		if ((n = read(ep[0], msg, sizeof msg - 1)) > 0) {
			msg[n] = '\0';
			sbx_err_set(err, SBX_EX_FAIL, "%s", msg);
		} else {
			sbx_err_set(err, SBX_EX_FAIL, "cannot start the "
			    "sandbox:");
		}
		goto fail;
	}
	n = read(ep[0], msg, sizeof msg - 1);
	if (n > 0) {
		msg[n] = '\0';
		sbx_err_set(err, SBX_EX_FAIL, "%s", msg);
		goto fail;
	}
	if (netfd >= 0) {
		rc = sbx_local_net_ready(netfd, dir, &netd, err);
		netfd = -1;
		if (rc < 0)
			goto fail;
	}
	json_decref(meta);
	meta = make_meta(spec, id, host ? "host" : image, workdir, pid,
	    s.uid_base, rootless ? -1 : (long long)slot, warm);
	if (rid)
		json_object_set(meta, "created_at_epoch", json_object_get(
		    oldmeta, "created_at_epoch"));
	json_object_set_new(meta, "disk", json_integer((json_int_t)disk));
	if (*loopdev)
		json_object_set_new(meta, "loop", json_string(loopdev));
	if (layers) {
		json_object_set_new(meta, "snapshot", json_string(spec->from));
		json_object_set(meta, "layers", layers);
	}
	json_object_set_new(meta, "volumes", spec->volumes ?
	    json_incref(spec->volumes) : json_array());
	if (iu.name) {
		json_object_set_new(meta, "image_ref", json_string(iu.name));
		json_object_set_new(meta, "image_digest",
		    json_string(iu.digest));
		if (iu.config_digest)
			json_object_set_new(meta, "image_config",
			    json_string(iu.config_digest));
	} else if (rid) {
		json_object_set(meta, "image_ref", json_object_get(oldmeta,
		    "image_ref"));
		json_object_set(meta, "image_digest", json_object_get(oldmeta,
		    "image_digest"));
		json_object_set(meta, "image_config", json_object_get(oldmeta,
		    "image_config"));
	}
	if (netd) {
		json_object_set_new(meta, "net_pid", json_integer(netd));
		json_object_set_new(meta, "net_starttime", json_integer(
		    (json_int_t)sbx_local_starttime(netd)));
	}
	p = sbx_xasprintf("%s/meta.json", dir);
	{
		char *text = json_dumps(meta, JSON_COMPACT |
		    JSON_PRESERVE_ORDER);

		rc = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);
		free(text);
	}
	free(p);
	if (rc < 0)
		goto fail;
	*ref = json_pack("{ssssss}", "backend", "local", "id", id, "dir", dir);
	goto out;
fail:
	rc = -1;
	for (i = 0; i < s.ncg; i++)
		close(s.cg_fd[i]);
	if (disksock >= 0) {
		/* Its mount, if made, goes with it. */
		kill(diskpid, SIGKILL);
		close(disksock);
		waitpid(diskpid, NULL, 0);
	}
	/* A helper still starting: without a pid it ends; with one, it is
	 * stopped below once it says which it is. */
	if (pidw >= 0)
		close(pidw);
	pidw = -1;
	if (netfd >= 0 && sbx_local_net_ready(netfd, dir, &netd,
	    &ignored) < 0)
		netd = 0;
	netfd = -1;
	if (netd)
		sbx_local_net_stop(netd, sbx_local_starttime(netd));
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (!rid)
		undo(root, dir, cg_made ? &cg : NULL, meta, named ?
		    spec->name : NULL, id);
	else if (cg_made)
		sbx_cg_remove(&cg);
out:
	{
		int fds[] = {go[0], go[1], ep[0], ep[1], cp[0], cp[1], is[0],
		    is[1], img, s.listen_fd, s.status_fd, s.log_fd, s.init_fd,
		    netfd, diskfd, snaplk, vollk};

		for (i = 0; i < (int)(sizeof fds / sizeof fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
		for (i = 0; i < s.nvols; i++) {
			if (s.vol_fd[i] >= 0)
				close(s.vol_fd[i]);
			free(s.vol_src[i]);
		}
	}
	for (i = 0; i < SBX_SNAP_DEPTH; i++) {
		if (s.snap_fd[i] >= 0)
			close(s.snap_fd[i]);
		free(snaps[i]);
	}
	json_decref(layers);
	sbx_cg_release(&cg);
	json_decref(meta);
	sbx_image_use_release(&iu);
	free(image);
	free(dir);
	return rc;
}

/* --- kill ----------------------------------------------------------------- */

static pid_t
live_init(json_t *meta)
{
	pid_t pid = (pid_t)sbx_json_int(meta, "pid", 0);
	unsigned long long st = (unsigned long long)sbx_json_int(meta,
	    "starttime", 0);

	if (pid <= 0 || !st || sbx_local_starttime(pid) != st)
		return 0;
	return pid;
}

pid_t
sbx_local_live(json_t *meta)
{
	return live_init(meta);
}

int
sbx_local_reap(const char *dir, const char *id, json_t *meta,
    struct sbx_err *err)
{
	struct sbx_cgroups cg;
	pid_t pid = live_init(meta);
	int i, rc = 0;

	sbx_cg_find(&cg, id);
	if (cg.n && sbx_cg_kill(&cg, 5000) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL,
		    "processes of '%s' did not die", id);
	if (pid && live_init(meta)) {
		kill(pid, SIGKILL);
		/* Killing the pid namespace's init kills all in it. */
		for (i = 0; i < 2500 && live_init(meta); i++)
			usleep(2000);
	}
	if (sbx_cg_remove(&cg) < 0 && !rc)
		rc = sbx_err_set(err, SBX_EX_FAIL,
		    "cannot remove the cgroups of '%s':", id);
	sbx_cg_release(&cg);
	/* Its end lets go of its disk's loop device; a process that still
	 * holds a file in it (a sync's helper) does when it closes it. */
	if (!rc && sbx_local_disk_wait(dir, sbx_json_str(meta, "loop"),
	    2000) < 0)
		sbx_note("the disk of '%s' is still on a loop device, until "
		    "what holds it lets go", id);
	return rc;
}

/* The directory of a sandbox not in this store but in the one its ref's
 * dir names (made with another SBX_LOCAL_DIR; sbx-exec reaches it
 * there), or NULL. */
const char *
sbx_local_other_dir(const json_t *ref)
{
	const char *id = sbx_json_str(ref, "id"), *dir = sbx_json_str(ref,
	    "dir"), *base;
	char *p;
	int there;

	if (!id || !dir || !(base = strrchr(dir, '/')) || strcmp(base + 1,
	    id) || base == dir || !sbx_local_valid_id(id))
		return NULL;
	p = sbx_xasprintf("%s/meta.json", dir);
	there = access(p, F_OK) == 0;
	free(p);
	return there ? dir : NULL;
}

/* Such a sandbox is never "gone" while it may run: -1 and err saying
 * which store. Its trash, uid slot and name are that store's: it is
 * killed from there. */
static int
elsewhere(const json_t *ref, struct sbx_err *err)
{
	const char *dir = sbx_local_other_dir(ref);
	int n = dir ? (int)(strrchr(dir, '/') - dir) : 0;

	if (!dir)
		return 0;
	return sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is in the store "
	    "'%.*s', not this one ('%s'): kill it with SBX_LOCAL_DIR=%.*s",
	    sbx_json_str(ref, "id"), n, dir, sbx_local_root(), n, dir);
}

/* Killed: every process of it sent SIGKILL, its directory out of the
 * store (or, with keep, marked killed). Where cgroup.kill did it, the
 * processes' end, their cgroups' and the disk's are left to the
 * trash's remover (sbx_local_reap before it removes the directory): a
 * killed process never runs again, and its mounts go with its mount
 * namespace's last one. */
static int
local_kill(json_t *ref, int keep, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = sbx_local_find(want, &id), *p;
	struct sbx_cgroups cg;
	json_t *meta;
	int rc = 0, later;

	if (!dir)
		return elsewhere(ref, err) < 0 ? -1 : sbx_err_set(err,
		    SBX_EX_NOSANDBOX, "no sandbox '%s'", want);
	json_object_set_new(ref, "id", json_string(id));
	meta = sbx_local_meta(dir);
	sbx_local_net_stop_of(meta);
	sbx_cg_find(&cg, id);
	later = !keep && sbx_cg_kill_start(&cg) == 0;
	sbx_cg_release(&cg);
	if (later && sbx_local_trash(dir, id) < 0) {
		later = 0;
		sbx_note("cannot move '%s' to the trash (%s): removing it here",
		    dir, strerror(errno));
	}
	if (!later)
		rc = sbx_local_reap(dir, id, meta, err);
	if (keep) {
		p = sbx_xasprintf("%s/status", dir);
		FILE *f = fopen(p, "ae");

		if (f) {
			fprintf(f, "killed %lld\n", sbx_now());
			fclose(f);
		}
		free(p);
		p = sbx_xasprintf("%s/sock", dir);
		unlink(p);
		free(p);
		p = sbx_xasprintf("%s/" SBX_PAUSED_FILE, dir);
		unlink(p);
		free(p);
	} else {
		/* Not renamed to the trash above: its removal here, after
		 * its end (15 ms seen for the disk's image alone). */
		if (!later && !rc && sbx_local_trash(dir, id) < 0 &&
		    sbx_rmtree(dir) < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':",
			    dir);
		/* Its uid slot the remover frees, once its processes are
		 * gone; its name at once, for the next sandbox of it. */
		if (!later && !rc)
			release_slot(sbx_local_root(), meta, id);
		sbx_local_release_name(sbx_local_root(), sbx_json_str(meta,
		    "name"), id);
	}
	json_decref(meta);
	free(dir);
	free(id);
	return rc;
}

/* --- list ----------------------------------------------------------------- */

static int
ask_agent(const char *dir, long long *activity, long long *procs)
{
	struct timeval tv = {1, 0};
	struct sbx_msg m;
	uint64_t act;
	uint32_t np, nh;
	int fd = sbx_local_connect(dir), rc = -1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (sbx_msg_send(fd, SBX_MSG_INFO, NULL, 0, NULL, 0) == 0 &&
	    sbx_msg_recv(fd, &m) > 0) {
		if (m.type == SBX_MSG_INFOREP && !sbx_msg_get_u64(&m, &act) &&
		    !sbx_msg_get_u32(&m, &np) && !sbx_msg_get_u32(&m, &nh)) {
			*activity = (long long)act;
			*procs = np;
			rc = 0;
		}
		sbx_msg_release(&m);
	}
	close(fd);
	return rc;
}

static int
frozen(const struct sbx_cgroups *cg)
{
	char *s = NULL;
	int f = 0;

	if (cg->unified && (s = sbx_local_read_small(cg->unified, "cgroup.freeze")))
		f = s[0] == '1';
	else if (cg->freezer && (s = sbx_local_read_small(cg->freezer,
	    "freezer.state")))
		f = !strncmp(s, "FROZEN", 6);
	free(s);
	return f;
}

/* The CPU time the sandbox's processes used, in microseconds: v2
 * cpu.stat counts without a cpu controller, v1 cpuacct in nanoseconds;
 * -1 when unknown. */
static long long
cpu_usec(const struct sbx_cgroups *cg)
{
	char *p, line[128];
	long long v = -1;
	FILE *f;

	if (cg->unified) {
		p = sbx_xasprintf("%s/cpu.stat", cg->unified);
		f = fopen(p, "re");
		free(p);
		while (f && v < 0 && fgets(line, sizeof line, f))
			if (sscanf(line, "usage_usec %lld", &v) != 1)
				v = -1;
		if (f)
			fclose(f);
	}
	if (v < 0 && cg->cpuacct &&
	    (v = sbx_cg_read_ll(cg->cpuacct, "cpuacct.usage")) >= 0)
		v /= 1000;
	return v;
}

static json_t *
info_in(const char *dir, const char *id)
{
	char *status;
	json_t *meta = sbx_local_meta(dir), *o;
	long long created, act = 0, procs = -1, mem = -1;
	long long cpu;
	const char *st = "dead";
	struct sbx_cgroups cg;

	created = sbx_json_int(meta, "created_at_epoch", 0);
	/* No meta.json: sbx-create is still at work on it (or died at it),
	 * since the directory's time. sbx-gc must leave it alone. */
	if (!meta && (created = sbx_local_dir_born(dir)) < 0)
		created = 0;
	sbx_cg_find(&cg, id);
	if (live_init(meta)) {
		st = frozen(&cg) ? "paused" : "running";
		if (!strcmp(st, "running"))
			ask_agent(dir, &act, &procs);
		if (cg.memory)
			mem = sbx_cg_read_ll(cg.memory, cg.memory == cg.unified ?
			    "memory.current" : "memory.usage_in_bytes");
	} else if (sbx_local_paused(dir, NULL) == 't') {
		st = "stopped";
	} else if ((status = sbx_local_read_small(dir, "status"))) {
		if (strstr(status, "killed"))
			st = "killed";
		else if (strstr(status, "expired"))
			st = "expired";
		free(status);
	}
	if (!act)
		act = created;
	o = sbx_local_info_head("local", id, meta, st, created, act);
	json_object_set_new(o, "processes", procs >= 0 ? json_integer(procs) :
	    json_null());
	json_object_set_new(o, "memory_bytes", mem >= 0 ? json_integer(mem) :
	    json_null());
	cpu = cpu_usec(&cg);
	json_object_set_new(o, "cpu_s", cpu >= 0 ? json_real((double)cpu /
	    1e6) : json_null());
	json_object_set_new(o, "limits", sbx_limits_json((uint64_t)
	    sbx_json_int(meta, "memory", 0), (uint64_t)sbx_json_int(meta,
	    "cpus_milli", 0), (uint64_t)sbx_json_int(meta, "pids_max", 0),
	    (uint64_t)sbx_json_int(meta, "shm", 0)));
	json_object_set_new(o, "dir", json_string(dir));
	if (!meta)
		json_object_set_new(o, "creating", json_true());
	else if (sbx_json_str(meta, "warm"))
		json_object_set_new(o, "warm", json_true());
	sbx_cg_release(&cg);
	json_decref(meta);
	return o;
}

static json_t *
info_of(const char *id)
{
	char *dir = sbx_xasprintf("%s/%s", sbx_local_root(), id);
	json_t *o = info_in(dir, id);

	free(dir);
	return o;
}

/* --- pause and resume ------------------------------------------------------ */

/* How a sandbox was paused ('s' suspend, 't' stop, 0 not) and when. */
/* The spec a stopped sandbox was made with, from its meta.json (all but
 * the -e environment, whose values are never written down). */
static void
spec_of(json_t *meta, struct sbx_spec *spec)
{
	const char *net = sbx_json_str(meta, "network");

	memset(spec, 0, sizeof *spec);
	spec->image = sbx_json_str(meta, "image");
	spec->workdir = sbx_json_str(meta, "workdir");
	spec->name = sbx_json_str(meta, "name");
	spec->memory = (uint64_t)sbx_json_int(meta, "memory", 0);
	spec->cpus_milli = (uint64_t)sbx_json_int(meta, "cpus_milli", 0);
	spec->pids = (uint64_t)sbx_json_int(meta, "pids_max", 0);
	spec->disk = (uint64_t)sbx_json_int(meta, "disk", 0);
	spec->timeout = (uint64_t)sbx_json_int(meta, "timeout", 0);
	spec->network = net && !strcmp(net, "allow") ? SBX_NET_ALLOW :
	    SBX_NET_DENY;
	spec->labels = json_object_get(meta, "labels");
	spec->start = json_object_get(meta, "start");
	spec->from = sbx_json_str(meta, "snapshot");
	spec->volumes = json_array_size(json_object_get(meta, "volumes")) ?
	    json_object_get(meta, "volumes") : NULL;
}

/* The sandbox a ref names (the ref's id made its own), its meta, how it
 * is paused and its live agent, for pause and resume. */
static int
find_paused(json_t *ref, char **id, char **dir, json_t **meta, int *how,
    long long *when, pid_t *pid, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");

	if (!want || !(*dir = sbx_local_find(want, id)))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
	json_object_set_new(ref, "id", json_string(*id));
	*meta = sbx_local_meta(*dir);
	*how = sbx_local_paused(*dir, when);
	*pid = live_init(*meta);
	return 0;
}

/* Stop a sandbox marked stopped: its processes killed, init (pid) gone,
 * its cgroups and its network with them. */
static int
stop_now(struct sbx_cgroups *cg, json_t *meta, pid_t pid, const char *id,
    struct sbx_err *err)
{
	if (sbx_cg_kill(cg, 5000) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "processes of '%s' did "
		    "not die", id);
	kill(pid, SIGKILL);
	for (int i = 0; i < 2500 && live_init(meta); i++)
		usleep(2000);
	sbx_cg_remove(cg);
	/* It would go by itself, with init; gone now, its ports closed,
	 * when the pause returns. */
	sbx_local_net_stop_of(meta);
	return 0;
}

static int
local_pause(json_t *ref, int stop, struct sbx_err *err)
{
	char *id = NULL, *dir = NULL;
	struct sbx_cgroups cg = {0};
	json_t *meta = NULL;
	int rc = -1, how;
	pid_t pid;

	if (find_paused(ref, &id, &dir, &meta, &how, NULL, &pid, err) < 0)
		goto out;
	if ((how == 't' && !pid) || (how == 's' && pid)) {
		rc = 0; /* already paused: nothing to do */
		goto out;
	}
	/* Marked stopped, still running: a stop killed half-way, which
	 * this one finishes. */
	if (how == 't')
		stop = 1;
	if (!pid) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is not "
		    "running", id);
		goto out;
	}
	sbx_cg_find(&cg, id);
	/* Marked first: an exec that comes meanwhile fails fast instead of
	 * waiting on a frozen agent. */
	if (sbx_local_mark_paused(dir, stop ? "stop" : "suspend", err) < 0)
		goto out;
	if (stop) {
		if (stop_now(&cg, meta, pid, id, err) < 0)
			goto out;
	} else if (sbx_cg_freeze(&cg, 1, 5000) < 0) {
		sbx_cg_freeze(&cg, 0, 1000);
		sbx_local_unmark_paused(dir);
		sbx_err_set(err, SBX_EX_FAIL, "cannot freeze '%s':", id);
		goto out;
	}
	rc = 0;
out:
	sbx_cg_release(&cg);
	json_decref(meta);
	free(dir);
	free(id);
	return rc;
}

static int
local_resume(json_t *ref, struct sbx_err *err)
{
	char *id = NULL, *dir = NULL;
	struct sbx_cgroups cg = {0};
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_spec spec;
	json_t *meta = NULL, *nref = NULL;
	long long when = 0;
	int rc = -1, how, sock;
	pid_t pid;

	if (find_paused(ref, &id, &dir, &meta, &how, &when, &pid, err) < 0)
		goto out;
	if (how == 't' && pid) {
		/* Marked stopped, still running: a stop killed half-way.
		 * Whether it had killed anything yet (cgroup.kill works
		 * while init still shows) cannot be told, so the stop is
		 * finished and the sandbox started as any stopped one. */
		sbx_cg_find(&cg, id);
		if (stop_now(&cg, meta, pid, id, err) < 0)
			goto out;
	}
	if (how == 't') {
		/* Stopped: a new agent over the same files. */
		spec_of(meta, &spec);
		if (start_sandbox(&spec, id, meta, NULL, &nref, err) < 0)
			goto out;
		sbx_local_unmark_paused(dir);
		json_decref(nref);
		rc = 0;
		/* Its processes ended with the stop: its start command is
		 * started again (its post-create is not). */
		if (sbx_start_restart(ref, spec.start, err) < 0)
			rc = -1;
		goto out;
	}
	if (!pid) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is not "
		    "running", id);
		goto out;
	}
	if (!how) {
		rc = 0; /* running: nothing to do */
		goto out;
	}
	sbx_cg_find(&cg, id);
	/* Told before it thaws, so that the agent reads it before it looks
	 * at a deadline: the time frozen does not count as idle. */
	if ((sock = sbx_local_connect(dir)) >= 0) {
		sbx_msg_put_u64(&b, (uint64_t)(when > 0 && sbx_mono_ms() > when ?
		    sbx_mono_ms() - when : 0));
		sbx_msg_send(sock, SBX_MSG_RESUMED, b.data, b.len, NULL, 0);
	}
	if (sbx_cg_freeze(&cg, 0, 5000) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot thaw '%s':", id);
		if (sock >= 0)
			close(sock);
		goto out;
	}
	if (sock >= 0)
		close(sock);
	sbx_local_unmark_paused(dir);
	rc = 0;
out:
	sbx_buf_release(&b);
	sbx_cg_release(&cg);
	json_decref(meta);
	free(dir);
	free(id);
	return rc;
}

static int
local_create(const struct sbx_spec *spec, json_t **ref, struct sbx_err *err)
{
	return start_sandbox(spec, NULL, NULL, NULL, ref, err);
}

int
sbx_local_make_warm(const struct sbx_spec *spec, const char *warm,
    json_t **ref, struct sbx_err *err)
{
	return start_sandbox(spec, NULL, NULL, warm, ref, err);
}

static int
local_list(int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err)
{
	return sbx_local_list_in(sbx_local_root(), info_of, fn, arg, err);
}

static json_t *
local_info(const json_t *ref, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id"), *other;
	char *id = NULL, *dir = want ? sbx_local_find(want, &id) : NULL;
	json_t *o;

	if (!dir) {
		/* One of another store, as sbx-exec reaches it: what it is
		 * (a create must not take its state file for free). */
		if ((other = sbx_local_other_dir(ref)))
			return info_in(other, want);
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	o = info_of(id);
	free(dir);
	free(id);
	return o;
}

/* --- stats (sbx-stats) ------------------------------------------------- */

static uint64_t upper_bytes;

static int
upper_add(const char *path, const struct stat *sb, int type, struct FTW *f)
{
	(void)path;
	(void)f;
	if (type == FTW_DNR || type == FTW_NS)
		return 1;
	upper_bytes += (uint64_t)sb->st_blocks * 512;
	return 0;
}

/* What the sandbox wrote: its disk's use (the overlay's statfs is its
 * upper's), else the blocks of DIR/upper; -1 when some of it cannot be
 * read (then it is not said). */
static long long
disk_used(const char *dir, pid_t pid, int has_disk)
{
	char *p;
	struct statvfs vf;
	int r;

	if (has_disk) {
		p = sbx_xasprintf("/proc/%d/root/", (int)pid);
		r = statvfs(p, &vf);
		free(p);
		return r < 0 ? -1 : (long long)((vf.f_blocks - vf.f_bfree) *
		    vf.f_frsize);
	}
	upper_bytes = 0;
	p = sbx_xasprintf("%s/upper", dir);
	r = nftw(p, upper_add, 16, FTW_PHYS | FTW_MOUNT);
	free(p);
	return r ? -1 : (long long)upper_bytes;
}

/* The bytes through the interfaces of init's network namespace but lo,
 * from the host: -1 when it shares ours (they are the host's). */
static void
net_bytes(pid_t pid, long long *rx, long long *tx)
{
	char *p = sbx_xasprintf("/proc/%d/ns/net", (int)pid), line[512];
	struct stat a, b;
	unsigned long long r, t, skip;
	char name[64];
	FILE *f = NULL;

	*rx = *tx = -1;
	if (stat(p, &a) == 0 && stat("/proc/self/ns/net", &b) == 0 &&
	    (a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
		free(p);
		p = sbx_xasprintf("/proc/%d/net/dev", (int)pid);
		f = fopen(p, "re");
	}
	free(p);
	if (!f)
		return;
	*rx = *tx = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, " %63[^:]: %llu %llu %llu %llu %llu %llu "
		    "%llu %llu %llu", name, &r, &skip, &skip, &skip, &skip,
		    &skip, &skip, &skip, &t) == 10 && strcmp(name, "lo")) {
			*rx += (long long)r;
			*tx += (long long)t;
		}
	fclose(f);
}

/* The page cache in the memory counted (memory.stat's file, v1's
 * cache), -1 when unknown. */
static long long
mem_cache(const char *dir, int v2)
{
	char *p = sbx_xasprintf("%s/memory.stat", dir), line[128];
	FILE *f = dir ? fopen(p, "re") : NULL;
	long long v = -1;

	free(p);
	while (f && v < 0 && fgets(line, sizeof line, f))
		if (sscanf(line, v2 ? "file %lld" : "cache %lld", &v) != 1)
			v = -1;
	if (f)
		fclose(f);
	return v;
}

static json_t *
int_or_null(long long v)
{
	return v > 0 ? json_integer(v) : json_null();
}

static json_t *
local_stats(const json_t *ref, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = want ? sbx_local_find(want, &id) : NULL;
	long long cpu, mem, lim = -1, rx, tx, quota;
	struct sbx_cgroups cg;
	json_t *meta, *o;
	pid_t pid;
	int v2;

	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	meta = sbx_local_meta(dir);
	if (!(pid = live_init(meta))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "sandbox '%s' is not "
		    "running", id);
		json_decref(meta);
		free(dir);
		free(id);
		return NULL;
	}
	sbx_cg_find(&cg, id);
	v2 = cg.memory && cg.memory == cg.unified;
	o = json_object();
	json_object_set_new(o, "backend", json_string("local"));
	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "status", json_string(frozen(&cg) ? "paused" :
	    "running"));
	cpu = cpu_usec(&cg);
	json_object_set_new(o, "cpu_s", cpu >= 0 ? json_real((double)cpu /
	    1e6) : json_null());
	json_object_set_new(o, "cpu_pct", json_null());
	json_object_set_new(o, "cpus", sbx_json_int(meta, "cpus_milli", 0) >
	    0 ? json_real((double)sbx_json_int(meta, "cpus_milli", 0) /
	    1000) : json_null());
	mem = sbx_cg_read_ll(cg.memory, v2 ? "memory.current" :
	    "memory.usage_in_bytes");
	/* "max" reads as 0; v1's none is a huge number. */
	if (cg.memory)
		lim = sbx_cg_read_ll(cg.memory, v2 ? "memory.max" :
		    "memory.limit_in_bytes");
	json_object_set_new(o, "memory_bytes", mem >= 0 ? json_integer(mem) :
	    json_null());
	json_object_set_new(o, "memory_limit", int_or_null(lim >= 1LL << 60 ?
	    -1 : lim));
	lim = cg.memory ? mem_cache(cg.memory, v2) : -1;
	json_object_set_new(o, "memory_cache", lim >= 0 ? json_integer(lim) :
	    json_null());
	quota = sbx_json_int(meta, "disk", 0);
	mem = disk_used(dir, pid, quota > 0);
	json_object_set_new(o, "disk_bytes", mem >= 0 ? json_integer(mem) :
	    json_null());
	json_object_set_new(o, "disk_limit", int_or_null(quota));
	json_object_set_new(o, "pids", cg.pids ? int_or_null(sbx_cg_read_ll(
	    cg.pids, "pids.current")) : json_null());
	json_object_set_new(o, "pids_limit", cg.pids ?
	    int_or_null(sbx_cg_read_ll(cg.pids, "pids.max")) : json_null());
	net_bytes(pid, &rx, &tx);
	json_object_set_new(o, "net_rx_bytes", rx >= 0 ? json_integer(rx) :
	    json_null());
	json_object_set_new(o, "net_tx_bytes", tx >= 0 ? json_integer(tx) :
	    json_null());
	sbx_cg_release(&cg);
	json_decref(meta);
	free(dir);
	free(id);
	return o;
}

/* The Entrypoint and Cmd of its image of the store, if it has one. */
static json_t *
local_image_cmd(const json_t *ref, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *id = NULL, *dir = want ? sbx_local_find(want, &id) : NULL;
	json_t *meta, *config = NULL, *a = NULL;

	if (!dir) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	meta = sbx_local_meta(dir);
	if (sbx_json_str(meta, "image_config") && sbx_image_config_of(
	    sbx_json_str(meta, "image_config"), &config) == 0)
		a = sbx_start_image_argv(config);
	json_decref(config);
	json_decref(meta);
	free(dir);
	free(id);
	return a;
}

/* sbx-gc: the empty cgroups of sandboxes gone out of our sight (their
 * store removed before its kills' removers were done), of this store
 * or another's; half-made snapshots. */
static int
local_sweep(long long before)
{
	/* And what a killed sbx-snapshot left half-made; local.warm's
	 * files of sandboxes gone. */
	sbx_snap_clean_stale(sbx_snap_root());
	sbx_local_warm_sweep();
	return sbx_cg_sweep(sbx_local_valid_id, before);
}

/* Weak here: the ops table alone does not link the file operations
 * (and libarchive) into every tool, only sbx_files_of's callers. */
extern const struct sbx_files sbx_local_files __attribute__((weak));

const struct sbx_backend_ops sbx_local_ops = {
	.pause = local_pause,
	.resume = local_resume,
	.create = local_create,
	.exec = sbx_local_exec,
	.kill = local_kill,
	.list = local_list,
	.sweep = local_sweep,
	.warm_take = sbx_local_warm_take,
	.warm_fill = sbx_local_warm_fill,
	.info = local_info,
	.files = &sbx_local_files,
	.net_rules = sbx_local_net_rules,
	.net_log = sbx_local_net_log,
	.ports = sbx_local_ports,
	.image_cmd = local_image_cmd,
	.snapshot = sbx_local_snapshot,
	.shell = sbx_local_shell,
	.stats = local_stats,
	.volume = sbx_local_volume,
};
