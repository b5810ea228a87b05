/* files.c - moving files in and out of a local sandbox: a child of ours
 * joins the sandbox's user and mount namespaces, as its root, and reads or
 * writes there (what `docker cp` does); no tool inside is needed */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"

/* Fork a child inside the sandbox, in dir (default its workdir). Parent:
 * the pid, with job->errfd; child: 0. */
static pid_t
enter(const json_t *ref, const char *dir, struct sbx_job *job,
    struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char *sdir = NULL, *id = NULL, *p;
	json_t *meta = NULL;
	pid_t pid = -1, init;
	int pidfd = -1, ep[2] = {-1, -1};
	unsigned long long st;
	struct sbx_err cerr = {0};

	job->pid = -1;
	job->errfd = -1;
	if (!want || !(sdir = sbx_local_find(want, &id))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' does not "
		    "exist", want ? want : "?");
		goto out;
	}
	p = sbx_xasprintf("%s/meta.json", sdir);
	meta = json_load_file(p, 0, NULL);
	free(p);
	init = (pid_t)sbx_json_int(meta, "pid", 0);
	st = (unsigned long long)sbx_json_int(meta, "starttime", 0);
	if (init > 0)
		pidfd = (int)syscall(SYS_pidfd_open, init, 0);
	/* Checked after the pidfd is held, so the pid cannot be reused. */
	if (pidfd < 0 || !st || sbx_local_starttime(init) != st) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' is not "
		    "running", id);
		goto out;
	}
	if (!dir)
		dir = sbx_json_str(meta, "workdir");
	if (!dir || *dir != '/') {
		sbx_err_set(err, SBX_EX_DATA, "'%s': no workdir", id);
		goto out;
	}
	if (pipe2(ep, O_CLOEXEC) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "pipe:");
		goto out;
	}
	fflush(NULL);
	if ((pid = fork()) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "fork:");
		goto out;
	}
	if (pid == 0) {
		close(ep[0]);
		signal(SIGPIPE, SIG_DFL);
		/* Nothing in the sandbox may look into this process. */
		prctl(PR_SET_DUMPABLE, 0);
		if (setns(pidfd, CLONE_NEWUSER | CLONE_NEWNS) < 0) {
			sbx_err_set(&cerr, SBX_EX_FAIL, "cannot enter sandbox "
			    "'%s':", id);
			sbx_job_fail(ep[1], &cerr);
		}
		setgroups(0, NULL); /* refused in a rootless sandbox */
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
			sbx_err_set(&cerr, SBX_EX_FAIL, "cannot become the "
			    "root of sandbox '%s':", id);
			sbx_job_fail(ep[1], &cerr);
		}
		umask(022);
		if (chdir(dir) < 0) {
			sbx_err_set(&cerr, errno == ENOENT ? SBX_EX_USAGE :
			    SBX_EX_FAIL, "no directory '%s' in the sandbox:",
			    dir);
			sbx_job_fail(ep[1], &cerr);
		}
		job->errfd = ep[1];
		goto out;
	}
	close(ep[1]);
	ep[1] = -1;
	job->pid = pid;
	job->errfd = ep[0];
	ep[0] = -1;
out:
	if (pid != 0) {
		if (ep[0] >= 0)
			close(ep[0]);
		if (ep[1] >= 0)
			close(ep[1]);
	}
	if (pidfd >= 0)
		close(pidfd);
	json_decref(meta);
	free(sdir);
	free(id);
	return pid;
}

/* enter() with a pipe: the child gets its own end in *child_end (the
 * read end when to_child), the parent the other in *fd. */
static pid_t
enter_piped(const json_t *ref, const char *dir, int to_child, int *fd,
    int *child_end, struct sbx_job *job, struct sbx_err *err)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "pipe:");
	if ((pid = enter(ref, dir, job, err)) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	*child_end = to_child ? p[0] : p[1];
	*fd = to_child ? p[1] : p[0];
	close(pid == 0 ? *fd : *child_end);
	return pid;
}

static int
local_put(const json_t *ref, const char *dir, int *fd, struct sbx_job *job,
    struct sbx_err *err)
{
	struct sbx_err cerr = {0};
	int in;
	pid_t pid = enter_piped(ref, dir, 1, fd, &in, job, err);

	if (pid == 0) {
		if (sbx_tar_extract(in, &cerr) < 0)
			sbx_job_fail(job->errfd, &cerr);
		_exit(0);
	}
	return pid < 0 ? -1 : 0;
}

/* The requested paths, with what lstat says now; vanished ones and
 * anything but files and symlinks are left out. */
static void
restat(const struct sbx_manifest *in, struct sbx_manifest *out)
{
	struct sbx_fentry e, *x;
	struct stat st;
	size_t i;

	for (i = 0; i < in->n; i++) {
		memset(&e, 0, sizeof e);
		if (!sbx_path_valid(in->e[i].path) ||
		    lstat(in->e[i].path, &st) < 0 || !sbx_fentry_stat(&e, &st))
			continue;
		x = sbx_manifest_add(out, in->e[i].path);
		e.path = x->path;
		*x = e;
	}
}

static int
local_get(const json_t *ref, const char *dir, const struct sbx_manifest *paths,
    int *fd, struct sbx_job *job, struct sbx_err *err)
{
	struct sbx_manifest m = {0};
	struct sbx_err cerr = {0};
	int out;
	pid_t pid = enter_piped(ref, dir, 0, fd, &out, job, err);

	if (pid == 0) {
		restat(paths, &m);
		if (sbx_tar_write(out, &m, SBX_COMPRESS_NONE, &cerr) < 0)
			sbx_job_fail(job->errfd, &cerr);
		_exit(0);
	}
	return pid < 0 ? -1 : 0;
}

/* --- scan ------------------------------------------------------------------ */

static void
put_entry(const struct sbx_fentry *e, void *arg)
{
	FILE *f = arg;
	uint32_t n = (uint32_t)strlen(e->path);

	fwrite(&n, sizeof n, 1, f);
	fwrite(e->path, 1, n, f);
	fwrite(&e->type, 1, 1, f);
	fwrite(&e->mode, sizeof e->mode, 1, f);
	fwrite(&e->size, sizeof e->size, 1, f);
	fwrite(&e->mtime, sizeof e->mtime, 1, f);
	fwrite(&e->has_hash, sizeof e->has_hash, 1, f);
	if (e->has_hash)
		fwrite(e->hash, 1, sizeof e->hash, f);
}

static int
get_bytes(const char **p, const char *end, void *out, size_t n)
{
	if ((size_t)(end - *p) < n)
		return -1;
	memcpy(out, *p, n);
	*p += n;
	return 0;
}

static int
parse_entries(const struct sbx_buf *b, struct sbx_manifest *out)
{
	const char *p = b->data, *end = b->data + b->len;
	uint32_t n;

	while (p < end) {
		struct sbx_fentry e = {0}, *x;
		char *path;

		if (get_bytes(&p, end, &n, sizeof n) < 0 || n >= 4096 ||
		    (size_t)(end - p) < n)
			return -1;
		path = sbx_xmalloc(n + 1);
		memcpy(path, p, n);
		path[n] = '\0';
		p += n;
		if (get_bytes(&p, end, &e.type, 1) < 0 ||
		    get_bytes(&p, end, &e.mode, sizeof e.mode) < 0 ||
		    get_bytes(&p, end, &e.size, sizeof e.size) < 0 ||
		    get_bytes(&p, end, &e.mtime, sizeof e.mtime) < 0 ||
		    get_bytes(&p, end, &e.has_hash, sizeof e.has_hash) < 0 ||
		    (e.has_hash && get_bytes(&p, end, e.hash,
		    sizeof e.hash) < 0)) {
			free(path);
			return -1;
		}
		x = sbx_manifest_add(out, path);
		free(path);
		e.path = x->path;
		*x = e;
	}
	return 0;
}

/* Two walkers (this machine's stat(2) is the cost; a second CPU halves
 * it), each on its own pipe, read here side by side. */
static void
walker(const struct sbx_scan_opts *o, unsigned part, int out, int errfd)
{
	struct sbx_err cerr = {0};
	FILE *f = fdopen(out, "w");
	int dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (!f || dfd < 0) {
		sbx_err_set(&cerr, SBX_EX_FAIL, "cannot read the sandbox's "
		    "directory:");
		sbx_job_fail(errfd, &cerr);
	}
	sbx_walk(dfd, o, part, 2, put_entry, f);
	if (fclose(f) != 0)
		_exit(SBX_EX_FAIL);
}

/* --- what changed since the last listing: the agent knows (watch.c) --- */

static int
by_path(const void *a, const void *b)
{
	return strcmp(((const struct sbx_fentry *)a)->path,
	    ((const struct sbx_fentry *)b)->path);
}

/* Ask the agent; 1 when d lists the directories that changed (then the
 * rest is as the listing of o->since found it), 0 when all must be
 * listed. d->token is set whenever the agent answered. */
static int
ask_dirty(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_scan_delta *d)
{
	const char *want = sbx_json_str(ref, "id"), *tok, *path;
	struct timeval tv = {2, 0};
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_msg m;
	struct sbx_fentry *e;
	char *sdir, *p;
	uint32_t all = 1, n = 0, kind, i;
	size_t j, k;
	int fd = -1, got = 0;

	if (!want || !(sdir = sbx_local_find(want, NULL)))
		return 0;
	/* A frozen agent cannot answer. */
	p = sbx_xasprintf("%s/%s", sdir, SBX_PAUSED_FILE);
	if (access(p, F_OK) == 0 || (fd = sbx_local_connect(sdir)) < 0)
		goto out;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	sbx_msg_put_str(&b, o->since ? o->since : "");
	sbx_msg_put_str(&b, o->dir ? o->dir : "");
	if (sbx_msg_send(fd, SBX_MSG_DIRTY, b.data, b.len, NULL, 0) < 0 ||
	    sbx_msg_recv(fd, &m) <= 0)
		goto out;
	got = 1;
	if (m.type != SBX_MSG_DIRTYREP || !(tok = sbx_msg_get_str(&m)) ||
	    sbx_msg_get_u32(&m, &all) < 0 || sbx_msg_get_u32(&m, &n) < 0)
		all = 1;
	else
		d->token = sbx_xstrdup(tok);
	for (i = 0; !all && i < n; i++) {
		if (sbx_msg_get_u32(&m, &kind) < 0 ||
		    !(path = sbx_msg_get_str(&m)) || (*path &&
		    !sbx_path_valid(path))) {
			all = 1;
			break;
		}
		e = sbx_manifest_add(&d->dirs, path);
		e->mode = (kind & SBX_DIRTY_FLAT ? SBX_SCAN_FLAT : 0) |
		    (kind & SBX_DIRTY_TREE ? SBX_SCAN_TREE : 0) |
		    (kind & SBX_DIRTY_GONE ? SBX_SCAN_GONE : 0);
	}
	sbx_msg_release(&m);
	/* One entry a directory, what was said of it together. */
	if (d->dirs.n)
		qsort(d->dirs.e, d->dirs.n, sizeof *d->dirs.e, by_path);
	for (j = k = 0; j < d->dirs.n; j++) {
		if (k && !strcmp(d->dirs.e[k - 1].path, d->dirs.e[j].path)) {
			d->dirs.e[k - 1].mode |= d->dirs.e[j].mode;
			free(d->dirs.e[j].path);
			continue;
		}
		d->dirs.e[k++] = d->dirs.e[j];
	}
	d->dirs.n = k;
	d->dirs.sorted = 1;
out:
	if (fd >= 0)
		close(fd);
	sbx_buf_release(&b);
	free(p);
	free(sdir);
	if (!got || all) {
		sbx_manifest_release(&d->dirs);
		return 0;
	}
	d->partial = 1;
	return 1;
}

/* Whether a directory, or one on its way, is left out. */
static int
dir_skipped(const struct sbx_scan_opts *o, const char *dir)
{
	char buf[4096];
	size_t i, n = strlen(dir);

	if (!o->skip || !n)
		return 0;
	if (n >= sizeof buf)
		return 1;
	memcpy(buf, dir, n + 1);
	for (i = 0; i <= n; i++)
		if (buf[i] == '/' || !buf[i]) {
			buf[i] = '\0';
			if (o->skip(buf, 1, o->arg))
				return 1;
			if (i < n)
				buf[i] = '/';
		}
	return 0;
}

/* In the sandbox: list the directories the agent named, each flat or
 * whole, never through a symlink. */
static void
list_dirty(const struct sbx_scan_opts *o, const struct sbx_manifest *dirs,
    int out, int errfd)
{
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
	    RESOLVE_BENEATH};
	struct sbx_err cerr = {0};
	FILE *f = fdopen(out, "w");
	size_t i;
	int dfd;

	if (!f) {
		sbx_err_set(&cerr, SBX_EX_FAIL, "cannot list:");
		sbx_job_fail(errfd, &cerr);
	}
	for (i = 0; i < dirs->n; i++) {
		const struct sbx_fentry *e = &dirs->e[i];
		int tree = e->mode & SBX_SCAN_TREE;

		if (!(e->mode & (SBX_SCAN_FLAT | SBX_SCAN_TREE)) ||
		    sbx_dirs_cover(dirs, e->path, SBX_SCAN_TREE, 0) || dir_skipped(o, e->path))
			continue;
		dfd = (int)syscall(SYS_openat2, AT_FDCWD, *e->path ? e->path :
		    ".", &how, sizeof how);
		if (dfd >= 0)
			sbx_walk_at(dfd, e->path, !tree, o, put_entry, f);
	}
	if (fclose(f) != 0)
		_exit(SBX_EX_FAIL);
}

static int
scan_dirty(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_job job;
	char buf[65536];
	int fd, child_end, rc;
	ssize_t n;
	pid_t pid = enter_piped(ref, o->dir, 0, &fd, &child_end, &job, err);

	if (pid < 0)
		return -1;
	if (pid == 0) {
		list_dirty(o, &o->delta->dirs, child_end, job.errfd);
		_exit(0);
	}
	if (o->meanwhile)
		o->meanwhile(o->arg);
	while ((n = read(fd, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		sbx_buf_add(&b, buf, (size_t)n);
	}
	close(fd);
	rc = sbx_job_wait(&job, err);
	if (rc == 0 && parse_entries(&b, out) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "bad listing from the "
		    "sandbox");
	sbx_manifest_sort(out);
	sbx_buf_release(&b);
	return rc;
}

static int
local_scan(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err)
{
	struct sbx_job job;
	struct sbx_buf bufs[2] = {SBX_BUF_INIT, SBX_BUF_INIT};
	struct pollfd pf[2];
	char buf[65536];
	int p[2][2] = {{-1, -1}, {-1, -1}}, rc = -1, k, open_n, st;
	ssize_t n;
	pid_t pid, second;

	if (o->delta && ask_dirty(ref, o, o->delta))
		return scan_dirty(ref, o, out, err);
	for (k = 0; k < 2; k++) {
		if (pipe2(p[k], O_CLOEXEC) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "pipe:");
			goto out;
		}
		/* Room for a big tree's listing while we do other work. */
		fcntl(p[k][1], F_SETPIPE_SZ, 1 << 20);
	}
	if ((pid = enter(ref, o->dir, &job, err)) < 0)
		goto out;
	if (pid == 0) {
		close(p[0][0]);
		close(p[1][0]);
		if ((second = fork()) == 0) {
			close(p[0][1]);
			walker(o, 1, p[1][1], job.errfd);
			_exit(0);
		}
		close(p[1][1]);
		walker(o, 0, p[0][1], job.errfd);
		if (second < 0 || waitpid(second, &st, 0) < 0 ||
		    !WIFEXITED(st) || WEXITSTATUS(st))
			_exit(SBX_EX_FAIL);
		_exit(0);
	}
	for (k = 0; k < 2; k++) {
		close(p[k][1]);
		p[k][1] = -1;
	}
	if (o->meanwhile)
		o->meanwhile(o->arg);
	for (open_n = 2; open_n;) {
		for (k = 0; k < 2; k++)
			pf[k] = (struct pollfd){p[k][0], POLLIN, 0};
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		for (k = 0; k < 2; k++) {
			if (p[k][0] < 0 || !pf[k].revents)
				continue;
			n = read(p[k][0], buf, sizeof buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(p[k][0]);
				p[k][0] = -1;
				open_n--;
				continue;
			}
			/* Each walker's records, whole, one after the other. */
			sbx_buf_add(&bufs[k], buf, (size_t)n);
		}
	}
	rc = sbx_job_wait(&job, err);
	if (rc == 0 && (parse_entries(&bufs[0], out) < 0 ||
	    parse_entries(&bufs[1], out) < 0))
		rc = sbx_err_set(err, SBX_EX_FAIL, "bad listing from the "
		    "sandbox");
	sbx_manifest_sort(out);
out:
	for (k = 0; k < 2; k++) {
		if (p[k][0] >= 0)
			close(p[k][0]);
		if (p[k][1] >= 0)
			close(p[k][1]);
		sbx_buf_release(&bufs[k]);
	}
	return rc;
}

/* The child writes one record per file: its index and a hash, or
 * nothing for one that is gone. */
static int
local_hash(const json_t *ref, const char *dir, struct sbx_manifest *m,
    struct sbx_err *err)
{
	struct sbx_job job;
	unsigned char rec[4 + 32];
	uint32_t k;
	size_t i;
	int p[2], fd, rc;
	pid_t pid;

	if (!m->n)
		return 0;
	if ((pid = enter_piped(ref, dir, 0, &fd, &p[1], &job, err)) < 0)
		return -1;
	if (pid == 0) {
		for (i = 0; i < m->n; i++) {
			int f = sbx_path_valid(m->e[i].path) ? open(m->e[i].path,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
			    O_NOCTTY) : -1;
			struct stat st;

			k = (uint32_t)i;
			memcpy(rec, &k, 4);
			if (f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode) &&
			    sbx_sha256_fd(f, rec + 4) == 0 &&
			    sbx_write_all(p[1], rec, sizeof rec) < 0)
				_exit(SBX_EX_FAIL);
			if (f >= 0)
				close(f);
		}
		_exit(0);
	}
	while (read(fd, rec, sizeof rec) == (ssize_t)sizeof rec) {
		memcpy(&k, rec, 4);
		if (k < m->n) {
			memcpy(m->e[k].hash, rec + 4, 32);
			m->e[k].has_hash = 1;
		}
	}
	close(fd);
	rc = sbx_job_wait(&job, err);
	return rc;
}

static int
local_remove(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, struct sbx_err *err)
{
	struct sbx_job job;
	struct stat st;
	size_t i;
	pid_t pid;

	if ((pid = enter(ref, dir, &job, err)) < 0)
		return -1;
	if (pid == 0) {
		for (i = 0; i < paths->n; i++) {
			const char *f = paths->e[i].path;

			if (sbx_path_valid(f) && lstat(f, &st) == 0 &&
			    !S_ISDIR(st.st_mode) && unlink(f) < 0 &&
			    errno != ENOENT) {
				struct sbx_err cerr = {0};

				sbx_err_set(&cerr, SBX_EX_FAIL, "cannot remove "
				    "'%s' in the sandbox:", f);
				sbx_job_fail(job.errfd, &cerr);
			}
		}
		_exit(0);
	}
	return sbx_job_wait(&job, err);
}

static pid_t
local_enter(const json_t *ref, struct sbx_job *job, struct sbx_err *err)
{
	return enter(ref, "/", job, err);
}

const struct sbx_files sbx_local_files = {
	.put_archive = local_put,
	.get_archive = local_get,
	.scan = local_scan,
	.hash = local_hash,
	.remove = local_remove,
	.enter = local_enter,
	.connect = sbx_local_port_connect,
};
