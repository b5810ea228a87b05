/* state.c - the state file: locked, atomic, schema-versioned (sbx-state(5)) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"

/* The directories above a state file, made as needed. */
static int
mkdir_parents(const char *path, struct sbx_err *err)
{
	char *p = sbx_xstrdup(path), *slash = strrchr(p, '/');
	int rc = 0;

	if (slash && slash != p) {
		*slash = '\0';
		rc = sbx_mkdirs(p, 0755, err);
	}
	free(p);
	return rc;
}

/* A ref is written to state files and printed: a key that names a
 * credential means someone put one there, and we will not use it. */
static const char *
secret_key(const json_t *ref)
{
	static const char *const bad[] = {"token", "api_key", "apikey",
	    "secret", "password", "authorization", "access_token", NULL};
	const char *key;
	json_t *v;
	size_t i;

	json_object_foreach((json_t *)ref, key, v)
		for (i = 0; bad[i]; i++)
			if (!strcasecmp(key, bad[i]))
				return key;
	return NULL;
}

static int
check_schema(json_t *root, const char *path, struct sbx_err *err)
{
	long long v = sbx_json_int(root, "schema", 0);
	const char *secret;

	if (v != SBX_STATE_SCHEMA || !json_is_object(json_object_get(root,
	    "ref")))
		return sbx_err_set(err, SBX_EX_DATA,
		    "'%s' is not an sbx state file (schema %d with a ref)",
		    path, SBX_STATE_SCHEMA);
	/* Never written, never used, never repeated in a message. */
	if ((secret = secret_key(json_object_get(root, "ref"))))
		return sbx_err_set(err, SBX_EX_DATA, "'%s': the ref holds a "
		    "credential ('%s'); refs must be secret-free", path, secret);
	return 0;
}

/* Whether name is base's temp file, or its baseline's: what
 * sbx_file_write_atomic makes, base.tmpXXXXXX. */
static int
is_temp_of(const char *name, const char *base)
{
	size_t n = strlen(base);

	if (strncmp(name, base, n))
		return 0;
	name += n;
	if (!strncmp(name, ".baseline", 9))
		name += 9;
	return !strncmp(name, ".tmp", 4) && strlen(name) == 10;
}

/* Every writer of a state file (and of its sync baseline) holds its lock
 * while it writes: under the lock, a temp file is a killed writer's. */
static void
remove_temps(const char *path)
{
	char *a = sbx_xstrdup(path), *b = sbx_xstrdup(path);
	const char *dir = dirname(a), *base = basename(b);
	struct dirent *de;
	DIR *d;
	int fd;

	if ((d = opendir(dir))) {
		fd = dirfd(d);
		while ((de = readdir(d)))
			if (is_temp_of(de->d_name, base))
				unlinkat(fd, de->d_name, 0);
		closedir(d);
	}
	free(a);
	free(b);
}

int
sbx_state_tidy(const char *path)
{
	char *lock = sbx_xasprintf("%s.lock", path);
	int fd, rc = 0;

	fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = -1;
	} else {
		remove_temps(path);
		/* As sbx_state_release: no state file, no lock file. */
		if (access(path, F_OK) < 0 && errno == ENOENT)
			unlink(lock);
	}
	if (fd >= 0)
		close(fd);
	free(lock);
	return rc;
}

int
sbx_state_dir_prepare(const char *path, struct sbx_err *err)
{
	char *dir = sbx_xstrdup(path), *slash = strrchr(dir, '/'), *ign;
	const char *base;
	int rc = 0;

	if (!slash) {
		free(dir);
		return 0;
	}
	*slash = '\0';
	base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	if (strcmp(base, ".sbx")) {
		free(dir);
		return 0;
	}
	ign = sbx_xasprintf("%s/.gitignore", dir);
	if (sbx_mkdirs(dir, 0755, err) < 0)
		rc = -1;
	else if (access(ign, F_OK) < 0 && errno == ENOENT)
		rc = sbx_file_write_atomic(ign, "*\n", 2, 0644, 0, err);
	free(ign);
	free(dir);
	return rc;
}

int
sbx_state_read(struct sbx_state *st, const char *path, struct sbx_err *err)
{
	memset(st, 0, sizeof *st);
	st->lockfd = -1;
	st->path = sbx_xstrdup(path);
	if (!(st->root = sbx_json_load_object(path, err)) ||
	    check_schema(st->root, path, err) < 0) {
		sbx_state_release(st);
		return -1;
	}
	return 0;
}

/* Whether path is a regular file of no bytes. */
static int
empty_file(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0;
}

int
sbx_state_open(struct sbx_state *st, const char *path, struct sbx_err *err)
{
	char *lock = sbx_xasprintf("%s.lock", path);
	struct stat sb;
	int rc = -1;

	memset(st, 0, sizeof *st);
	st->lockfd = -1;
	st->path = sbx_xstrdup(path);
	if (mkdir_parents(path, err) < 0)
		goto out;
	for (;;) {
		struct stat a, b;

		st->lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (st->lockfd < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':",
			    lock);
			goto out;
		}
		if (flock(st->lockfd, LOCK_EX) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot lock '%s':",
			    lock);
			goto out;
		}
		/* The holder we waited for may have removed the lock file
		 * (sbx_state_release, when no state came of it): a lock on
		 * that inode locks nothing; take the file there now. */
		if (fstat(st->lockfd, &a) == 0 && stat(lock, &b) == 0 &&
		    a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			break;
		close(st->lockfd);
		st->lockfd = -1;
	}
	/* A writer marks the lock file while its temp file may exist (see
	 * sbx_state_write): only a marked one has temps to look for, and a
	 * directory of a thousand state files is not read at each open. */
	if (fstat(st->lockfd, &sb) == 0 && sb.st_size > 0) {
		remove_temps(path);
		(void)!ftruncate(st->lockfd, 0);
	}
	/* None yet; or an empty one, all a crash leaves of a state file of
	 * this host's sandboxes (written without fsync: sbx-state(5)), which
	 * names nothing: a new one is made there. */
	if ((access(path, F_OK) < 0 && errno == ENOENT) || empty_file(path)) {
		st->root = json_object();
		rc = 0;
		goto out;
	}
	if (!(st->root = sbx_json_load_object(path, err)))
		goto out;
	if (json_object_size(st->root) && check_schema(st->root, path,
	    err) < 0)
		goto out;
	rc = 0;
out:
	free(lock);
	if (rc < 0)
		sbx_state_release(st);
	return rc;
}

int
sbx_state_save(struct sbx_state *st, struct sbx_err *err)
{
	char ts[32], *s;
	long long now = sbx_now();
	int rc;

	sbx_time_fmt(now, ts, sizeof ts);
	json_object_set_new(st->root, "updated_at", json_string(ts));
	json_object_set_new(st->root, "updated_at_epoch", json_integer(now));
	s = json_dumps(st->root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
	    JSON_REAL_PRECISION(15));
	if (!s)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot encode state");
	/* The newline keeps the file friendly to cat and diff. */
	char *text = sbx_xasprintf("%s\n", s);
	rc = sbx_state_write(st, st->path, text, strlen(text), !st->lazy, err);
	free(text);
	free(s);
	return rc;
}

int
sbx_state_write(struct sbx_state *st, const char *path, const char *data,
    size_t n, int durable, struct sbx_err *err)
{
	int rc, marked = 0;

	/* One byte in the lock file: a temp file of ours may be there. */
	if (st->lockfd >= 0)
		marked = pwrite(st->lockfd, "w", 1, 0) == 1;
	rc = sbx_file_write_atomic(path, data, n, 0600, durable, err);
	/* (Left marked, the next open only looks in vain.) */
	if (marked)
		(void)!ftruncate(st->lockfd, 0);
	return rc;
}

void
sbx_state_release(struct sbx_state *st)
{
	char *lock;

	if (st->lockfd >= 0) {
		/* No state file came of it: leave no lock file either. */
		if (st->path && access(st->path, F_OK) < 0 && errno == ENOENT) {
			lock = sbx_xasprintf("%s.lock", st->path);
			unlink(lock);
			free(lock);
		}
		close(st->lockfd);
	}
	json_decref(st->root);
	free(st->path);
	memset(st, 0, sizeof *st);
	st->lockfd = -1;
}

json_t *
sbx_state_new_root(json_t *ref, const struct sbx_spec *spec)
{
	long long now = sbx_now();
	char ts[32];
	json_t *root = json_object(), *seg = json_array();

	sbx_time_fmt(now, ts, sizeof ts);
	json_object_set_new(root, "schema", json_integer(SBX_STATE_SCHEMA));
	json_object_set(root, "ref", ref);
	json_object_set_new(root, "status", json_string("running"));
	json_object_set_new(root, "template", json_string(spec->image));
	json_object_set_new(root, "workdir", json_string(spec->workdir));
	json_object_set_new(root, "timeout", json_integer((json_int_t)
	    spec->timeout));
	json_object_set(root, "labels", spec->labels);
	json_object_set_new(root, "created_at", json_string(ts));
	json_object_set_new(root, "created_at_epoch", json_integer(now));
	json_object_set_new(root, "updated_at", json_string(ts));
	json_object_set_new(root, "updated_at_epoch", json_integer(now));
	json_array_append_new(seg, json_pack("[In]", (json_int_t)now));
	json_object_set_new(root, "segments", seg);
	json_object_set_new(root, "accrued_cost", json_integer(0));
	json_object_set_new(root, "cost_alerted", json_false());
	json_object_set_new(root, "sync", json_object());
	if (json_object_size(spec->start))
		json_object_set(root, "start", spec->start);
	/* What a per-vCPU or per-GiB rate is applied to (sbx-cost): what
	 * the backend says the sandbox got, else what was asked. */
	if (json_is_object(json_object_get(ref, "resources")))
		json_object_set_new(root, "resources", json_deep_copy(
		    json_object_get(ref, "resources")));
	else
		json_object_set_new(root, "resources", json_pack(
		    "{s:f,s:o}", "vcpus", spec->cpus_milli ?
		    spec->cpus_milli / 1000.0 :
		    (double)sysconf(_SC_NPROCESSORS_ONLN), "memory_mib",
		    spec->memory ? json_integer((json_int_t)(spec->memory >>
		    20)) : json_null()));
	return root;
}

void
sbx_state_set_status(json_t *root, const char *status)
{
	json_t *segs = json_object_get(root, "segments"), *last;
	int running = !strcmp(status, "running");
	size_t n;

	json_object_set_new(root, "status", json_string(status));
	if (!json_is_array(segs)) {
		segs = json_array();
		json_object_set_new(root, "segments", segs);
	}
	n = json_array_size(segs);
	last = n ? json_array_get(segs, n - 1) : NULL;
	if (last && json_is_null(json_array_get(last, 1))) {
		if (!running)
			json_array_set_new(last, 1, json_integer(sbx_now()));
	} else if (running) {
		json_array_append_new(segs, json_pack("[In]",
		    (json_int_t)sbx_now()));
	}
}
