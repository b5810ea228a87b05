/* secret.c - the secret store (secret.h): one value file and one metadata
 * file per secret under the credentials directory, changed under a lock */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secret.h"

/* E2B's limits on a secret's metadata. */
#define META_MAX_KEYS 32
#define META_MAX_KEY 128
#define META_MAX_VALUE 1024
#define META_MAX_TOTAL 8192

/* A directory of ours that nobody else may read: owned by us, 0700. */
static int
dir_ok(const char *dir, struct sbx_err *err)
{
	struct stat sb;

	if (lstat(dir, &sb) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot stat '%s':", dir);
	if (!S_ISDIR(sb.st_mode) || sb.st_uid != geteuid())
		return sbx_err_set(err, SBX_EX_CRED, "secret store '%s' is not "
		    "a directory of yours; refusing it", dir);
	if (sb.st_mode & 077)
		return sbx_err_set(err, SBX_EX_CRED, "secret store '%s' is "
		    "open to others (mode %03o, want 0700); refusing it", dir,
		    (unsigned)(sb.st_mode & 0777));
	return 0;
}

char *
sbx_secret_dir(int make, struct sbx_err *err)
{
	char *cred = sbx_config_cred_dir(), *dir;

	if (!cred) {
		sbx_err_set(err, SBX_EX_CRED, "no credentials directory (set "
		    "XDG_CONFIG_HOME or HOME)");
		return NULL;
	}
	dir = sbx_xasprintf("%s/secrets", cred);
	if (make && (sbx_mkdirs(cred, 0700, err) < 0 ||
	    (mkdir(dir, 0700) < 0 && errno != EEXIST &&
	    sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", dir) < 0)))
		goto bad;
	if (make && dir_ok(dir, err) < 0)
		goto bad;
	free(cred);
	return dir;
bad:
	free(cred);
	free(dir);
	return NULL;
}

int
sbx_secret_name(const char *name, char *out, struct sbx_err *err)
{
	size_t i, n = strlen(name);

	for (i = 0; i < n && i < 64; i++) {
		if (!isalnum((unsigned char)name[i]) && name[i] != '_' &&
		    name[i] != '-')
			break;
		out[i] = (char)tolower((unsigned char)name[i]);
	}
	if (!n || i != n)
		return sbx_err_set(err, SBX_EX_USAGE, "invalid secret name "
		    "'%.80s' (want 1 to 64 of a-z, 0-9, _ and -)", name);
	out[n] = '\0';
	if (!strncmp(out, "sec_", 4))
		return sbx_err_set(err, SBX_EX_USAGE, "invalid secret name "
		    "'%s': the prefix 'sec_' is reserved", name);
	return 0;
}

/* The store (not made) and NAME's two paths; -1 on a bad name. */
static int
paths(const char *name, char *canon, char **dir, char **val, char **meta,
    struct sbx_err *err)
{
	*dir = *val = *meta = NULL;
	if (sbx_secret_name(name, canon, err) < 0 ||
	    !(*dir = sbx_secret_dir(0, err)))
		return -1;
	*val = sbx_xasprintf("%s/%s", *dir, canon);
	*meta = sbx_xasprintf("%s/%s.json", *dir, canon);
	return 0;
}

static void
paths_free(char *dir, char *val, char *meta)
{
	free(dir);
	free(val);
	free(meta);
}

char *
sbx_secret_get(const char *name, size_t *len, struct sbx_err *err)
{
	char canon[65], *dir, *val, *meta, *buf = NULL;
	struct stat sb;
	ssize_t r;
	size_t n = 0;
	int fd = -1;

	if (paths(name, canon, &dir, &val, &meta, err) < 0)
		goto out;
	if ((fd = open(val, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		if (errno == ENOENT || errno == ELOOP)
			sbx_err_set(err, SBX_EX_CRED, "no secret '%s'", canon);
		else
			sbx_err_set(err, SBX_EX_CRED, "cannot open '%s':", val);
		goto out;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		sbx_err_set(err, SBX_EX_CRED, "secret file '%s' is not a "
		    "regular file; refusing it", val);
		goto out;
	}
	if (sb.st_uid != geteuid() || (sb.st_mode & 0777) != 0600) {
		sbx_err_set(err, SBX_EX_CRED, "secret file '%s' is %s (want "
		    "mode 0600, owned by you); refusing it", val,
		    sb.st_uid != geteuid() ? "not yours" : "not mode 0600");
		goto out;
	}
	if (sb.st_size > SBX_SECRET_MAX) {
		sbx_err_set(err, SBX_EX_CRED, "secret file '%s' is larger "
		    "than %d bytes; refusing it", val, SBX_SECRET_MAX);
		goto out;
	}
	buf = sbx_xmalloc((size_t)sb.st_size + 1);
	while (n < (size_t)sb.st_size) {
		r = read(fd, buf + n, (size_t)sb.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s'%s", val,
			    r < 0 ? ":" : " (it changed)");
			explicit_bzero(buf, n);
			free(buf);
			buf = NULL;
			goto out;
		}
		n += (size_t)r;
	}
	buf[n] = '\0';
	*len = n;
out:
	if (fd >= 0)
		close(fd);
	paths_free(dir, val, meta);
	return buf;
}

/* metadata: NULL, or an object of strings within E2B's limits. */
static int
meta_ok(const json_t *m, struct sbx_err *err)
{
	const char *k;
	json_t *v;
	size_t total = 0;

	if (!m)
		return 0;
	if (!json_is_object(m))
		return sbx_err_set(err, SBX_EX_USAGE, "secret metadata must be "
		    "an object of strings");
	if (json_object_size(m) > META_MAX_KEYS)
		return sbx_err_set(err, SBX_EX_USAGE, "secret metadata has more "
		    "than %d keys", META_MAX_KEYS);
	json_object_foreach((json_t *)m, k, v) {
		if (!json_is_string(v))
			return sbx_err_set(err, SBX_EX_USAGE, "secret metadata "
			    "'%.80s' is not a string", k);
		if (!*k || strlen(k) > META_MAX_KEY ||
		    json_string_length(v) > META_MAX_VALUE)
			return sbx_err_set(err, SBX_EX_USAGE, "secret metadata "
			    "'%.80s': keys are 1 to %d bytes, values at most %d",
			    k, META_MAX_KEY, META_MAX_VALUE);
		total += strlen(k) + json_string_length(v);
	}
	if (total > META_MAX_TOTAL)
		return sbx_err_set(err, SBX_EX_USAGE, "secret metadata is larger "
		    "than %d bytes", META_MAX_TOTAL);
	return 0;
}

/* The store's lock, held while a secret changes (flock: threads of sbxd
 * and other processes alike, each with an open file of its own). */
static int
lock_store(const char *dir, struct sbx_err *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", dir);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			close(fd);
			return sbx_err_set(err, SBX_EX_FAIL, "cannot lock "
			    "'%s':", dir);
		}
	}
	return fd;
}

/* NAME.json, or NULL: code SBX_EX_CRED when there is none. */
static json_t *
load_meta(const char *path, const char *name, struct sbx_err *err)
{
	json_t *j;

	if (!(j = sbx_json_load_object(path, err))) {
		if (err->code == SBX_EX_NOSANDBOX)
			sbx_err_set(err, SBX_EX_CRED, "no secret '%s'", name);
		return NULL;
	}
	return j;
}

json_t *
sbx_secret_set(const char *name, const char *value, size_t len,
    const json_t *metadata, struct sbx_err *err)
{
	char canon[65], ts[40], *dir, *val, *meta, *text = NULL;
	json_t *old = NULL, *j = NULL, *m;
	long long version = 1;
	int lk = -1;

	if (paths(name, canon, &dir, &val, &meta, err) < 0 ||
	    meta_ok(metadata, err) < 0)
		goto out;
	if (!len) {
		sbx_err_set(err, SBX_EX_USAGE, "the value of secret '%s' is "
		    "empty", canon);
		goto out;
	}
	if (len > SBX_SECRET_MAX) {
		sbx_err_set(err, SBX_EX_USAGE, "the value of secret '%s' is "
		    "larger than %d bytes", canon, SBX_SECRET_MAX);
		goto out;
	}
	free(dir);
	if (!(dir = sbx_secret_dir(1, err)) || (lk = lock_store(dir, err)) < 0)
		goto out;
	sbx_time_fmt(sbx_now(), ts, sizeof ts);
	if (access(meta, F_OK) == 0) {
		if (!(old = load_meta(meta, canon, err)))
			goto out;
		version = sbx_json_int(old, "version", 0) + 1;
	}
	m = metadata ? json_deep_copy(metadata) :
	    json_is_object(json_object_get(old, "metadata")) ?
	    json_deep_copy(json_object_get(old, "metadata")) : json_object();
	j = json_pack("{s:s,s:I,s:s,s:s,s:o}", "name", canon, "version",
	    (json_int_t)version, "created_at",
	    old && sbx_json_str(old, "created_at") ?
	    sbx_json_str(old, "created_at") : ts, "updated_at", ts,
	    "metadata", m);
	/* The value first: a secret is listed once its metadata is there. */
	if (sbx_file_write_atomic(val, value, len, 0600, 1, err) < 0)
		goto bad;
	text = json_dumps(j, JSON_COMPACT);
	if (sbx_file_write_atomic(meta, text, strlen(text), 0600, 1, err) < 0)
		goto bad;
	goto out;
bad:
	json_decref(j);
	j = NULL;
out:
	if (lk >= 0)
		close(lk);
	free(text);
	json_decref(old);
	paths_free(dir, val, meta);
	return j;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(sbx_json_str(*(json_t *const *)a, "name"),
	    sbx_json_str(*(json_t *const *)b, "name"));
}

json_t *
sbx_secret_list(struct sbx_err *err)
{
	char *dir = sbx_secret_dir(0, err), canon[65], stem[80], *p;
	json_t *arr, **all = NULL, *j;
	struct sbx_err e2;
	struct dirent *d;
	size_t n = 0, i, len;
	DIR *dp;

	if (!dir)
		return NULL;
	if (!(dp = opendir(dir))) {
		if (errno == ENOENT) {
			free(dir);
			return json_array();
		}
		sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", dir);
		free(dir);
		return NULL;
	}
	if (dir_ok(dir, err) < 0) {
		closedir(dp);
		free(dir);
		return NULL;
	}
	while ((d = readdir(dp))) {
		len = strlen(d->d_name);
		/* NAME.json with a NAME as we write them: not the temp files
		 * of a write under way, nor anything else. */
		if (len < 6 || len - 5 >= sizeof stem ||
		    strcmp(d->d_name + len - 5, ".json"))
			continue;
		memcpy(stem, d->d_name, len - 5);
		stem[len - 5] = '\0';
		if (sbx_secret_name(stem, canon, &e2) < 0 || strcmp(stem, canon))
			continue;
		p = sbx_xasprintf("%s/%s", dir, d->d_name);
		j = sbx_json_load_object(p, &e2);
		free(p);
		/* One file gone or broken does not hide the rest. */
		if (!j || !sbx_json_str(j, "name"))
			continue;
		all = sbx_xrealloc(all, (n + 1) * sizeof *all);
		all[n++] = j;
	}
	closedir(dp);
	free(dir);
	if (n)
		qsort(all, n, sizeof *all, by_name);
	arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(arr, all[i]);
	free(all);
	return arr;
}

json_t *
sbx_secret_info(const char *name, struct sbx_err *err)
{
	char canon[65], *dir, *val, *meta;
	json_t *j = NULL;

	if (paths(name, canon, &dir, &val, &meta, err) == 0)
		j = load_meta(meta, canon, err);
	paths_free(dir, val, meta);
	return j;
}

int
sbx_secret_rm(const char *name, struct sbx_err *err)
{
	char canon[65], *dir, *val, *meta;
	int lk = -1, rc = -1, gone = 0;

	if (paths(name, canon, &dir, &val, &meta, err) < 0)
		goto out;
	if (access(dir, F_OK) < 0) {
		sbx_err_set(err, SBX_EX_CRED, "no secret '%s'", canon);
		goto out;
	}
	if ((lk = lock_store(dir, err)) < 0)
		goto out;
	/* The value first: what is left of a failed rm is never a value
	 * without its metadata, which ls would not show. */
	if (unlink(val) == 0)
		gone = 1;
	else if (errno != ENOENT) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':", val);
		goto out;
	}
	if (unlink(meta) == 0)
		gone = 1;
	else if (errno != ENOENT) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':", meta);
		goto out;
	}
	if (!gone) {
		sbx_err_set(err, SBX_EX_CRED, "no secret '%s'", canon);
		goto out;
	}
	rc = 0;
out:
	if (lk >= 0)
		close(lk);
	paths_free(dir, val, meta);
	return rc;
}
