/* volume.c - E2B's volume content API (/volumecontent/ID/...): a volume's
 * files, read and written by sbxd, every path resolved inside the volume */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "sbxd.h"

#define LIST_DEPTH_MAX 64
#define NAME_MAX_LEN 255

/* The key of the volumes' tokens: STORE/volume.key, made once, so that a
 * token outlives a restart of sbxd. */
static unsigned char vkey[32];
static int vkey_ok;
static pthread_mutex_t vkey_mu = PTHREAD_MUTEX_INITIALIZER;

static int
vkey_load(void)
{
	char *p = sbx_xasprintf("%s/volume.key", sbxd.store);
	unsigned char k[32];
	int fd, rc = -1;

	pthread_mutex_lock(&vkey_mu);
	if (vkey_ok) {
		rc = 0;
		goto out;
	}
	if ((fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		rc = sbx_read_all(fd, vkey, sizeof vkey) == (int)sizeof vkey ?
		    0 : -1;
		close(fd);
	} else if (errno == ENOENT && RAND_bytes(k, sizeof k) == 1 &&
	    (fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) >= 0) {
		if (sbx_write_all(fd, k, sizeof k) == 0 && fsync(fd) == 0) {
			memcpy(vkey, k, sizeof k);
			rc = 0;
		}
		close(fd);
		if (rc < 0)
			unlink(p);
		explicit_bzero(k, sizeof k);
	}
	vkey_ok = rc == 0;
out:
	pthread_mutex_unlock(&vkey_mu);
	free(p);
	return rc;
}

/* The token of volume name, whose data directory is dfd: hex
 * HMAC-SHA256("volume", name, its device, inode and birth time), so that
 * a volume made again under the same name (maybe on the same inode) has
 * a new one. */
static int
vol_token_fd(const char *name, int dfd, char out[65])
{
	unsigned char mac[32];
	unsigned int n = sizeof mac;
	struct statx st;
	char *msg;
	int i;

	if (vkey_load() < 0 || statx(dfd, "", AT_EMPTY_PATH, STATX_INO |
	    STATX_BTIME, &st) < 0)
		return -1;
	if (!(st.stx_mask & STATX_BTIME))
		st.stx_btime.tv_sec = st.stx_btime.tv_nsec = 0;
	msg = sbx_xasprintf("volume:%s:%u:%u:%llu:%lld.%u", name,
	    st.stx_dev_major, st.stx_dev_minor,
	    (unsigned long long)st.stx_ino,
	    (long long)st.stx_btime.tv_sec, st.stx_btime.tv_nsec);
	HMAC(EVP_sha256(), vkey, sizeof vkey, (unsigned char *)msg,
	    strlen(msg), mac, &n);
	free(msg);
	for (i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	explicit_bzero(mac, sizeof mac);
	return 0;
}

/* The data directory of the backend's volume entry v, opened. */
static int
vol_open_dir(const json_t *v)
{
	const char *p = sbx_json_str(v, "path");

	return p ? open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) :
	    -1;
}

int
sbxd_vol_token(const json_t *v, char out[65])
{
	int fd = vol_open_dir(v), rc;

	if (fd < 0)
		return -1;
	rc = vol_token_fd(sbx_json_str(v, "name"), fd, out);
	close(fd);
	return rc;
}

/* --- answers: {"code","message"}, the code a word ---------------------- */

static const char *
code_word(int status)
{
	switch (status) {
	case 400: return "bad_request";
	case 401: return "unauthorized";
	case 403: return "forbidden";
	case 404: return "not_found";
	case 409: return "conflict";
	case 413: return "too_large";
	case 501: return "not_implemented";
	case 507: return "insufficient_storage";
	default: return "internal";
	}
}

/* A PUT's upload (below): its checks run as its body comes, when MHD
 * takes no answer, so their failure waits for the body's end. */
struct vput;
static int h_file_data(struct sbxd_req *r, const char *p, size_t n);
static int put_deferring(struct sbxd_req *r, int status, const char *msg);

__attribute__((format(printf, 3, 4))) static enum MHD_Result
vc_err(struct sbxd_req *r, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (r->route && r->route->data == h_file_data && r->up &&
	    put_deferring(r, status, msg))
		return MHD_YES;
	return sbxd_reply_json(r, status, json_pack("{s:s,s:s}", "code",
	    code_word(status), "message", msg));
}

static int
errno_status(int e)
{
	switch (e) {
	case ENOENT: return 404;
	case EEXIST: case ENOTEMPTY: return 409;
	case EACCES: case EPERM: return 403;
	case ENOSPC: case EDQUOT: return 507;
	case ENOTDIR: case EISDIR: case ELOOP: case EXDEV: case ENAMETOOLONG:
	case EINVAL: case EOPNOTSUPP: return 400;
	default: return 500;
	}
}

static enum MHD_Result
vc_errno(struct sbxd_req *r, const char *what, const char *path)
{
	int e = errno;

	return vc_err(r, errno_status(e), "%s '%s': %s", what, path,
	    e == ELOOP || e == EXDEV ? "a symlink on the way leaves the "
	    "volume or loops" : strerror(e));
}

/* --- the volume and the path ------------------------------------------- */

/* A request's volume: its data directory, or -1 after answering. The
 * token comes before the volume, so that no name is told without one. */
static int
vol_auth(struct sbxd_req *r, enum MHD_Result *ret)
{
	const char *a = sbxd_header(r, "Authorization");
	char *id = sbxd_path_seg(r, 1), want[65];
	struct sbx_err err = {0};
	json_t *v = NULL;
	int fd = -1;

	if (!a || strncasecmp(a, "Bearer ", 7) || !a[7]) {
		*ret = vc_err(r, 401, "a volume's token is required "
		    "(Authorization: Bearer)");
		goto out;
	}
	a += 7;
	if (!id || !sbx_volume_valid_name(id) ||
	    !(v = sbxd_vol_find(id, &err))) {
		*ret = err.msg[0] ? vc_err(r, 500, "cannot list the volumes: "
		    "%s", err.msg) : vc_err(r, 404, "volume '%s' not found",
		    id ? id : "");
		goto out;
	}
	if ((fd = vol_open_dir(v)) < 0) {
		*ret = vc_err(r, 501, "the backend's volumes have no local "
		    "directory");
		goto out;
	}
	if (vol_token_fd(id, fd, want) < 0) {
		*ret = vc_err(r, 500, "cannot make the volume's token");
	} else if (strlen(a) != 64 || CRYPTO_memcmp(a, want, 64)) {
		*ret = vc_err(r, 401, "invalid token for volume '%s'", id);
	} else {
		explicit_bzero(want, sizeof want);
		goto out;
	}
	explicit_bzero(want, sizeof want);
	close(fd);
	fd = -1;
out:
	json_decref(v);
	free(id);
	return fd;
}

/* A path in the volume, split: comps[0..n-1], no "", "." or "..". */
struct vpath {
	char *buf;
	char *comps[256];
	int n;
	char *rel;   /* "/a/b": what the answers say */
};

static void
vpath_free(struct vpath *p)
{
	free(p->buf);
	free(p->rel);
}

/* 0, or -1 after answering 400. */
static int
vpath_parse(struct sbxd_req *r, struct vpath *p, enum MHD_Result *ret)
{
	const char *q = sbxd_query(r, "path");
	struct sbx_buf rel = {0};
	char *c, *save = NULL;

	memset(p, 0, sizeof *p);
	if (!q) {
		*ret = vc_err(r, 400, "path is required");
		return -1;
	}
	p->buf = sbx_xstrdup(q);
	for (c = strtok_r(p->buf, "/", &save); c;
	    c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..") || strlen(c) > NAME_MAX_LEN ||
		    p->n == (int)(sizeof p->comps / sizeof p->comps[0])) {
			*ret = vc_err(r, 400, "path '%s': %s", q,
			    !strcmp(c, "..") ? "'..' is not allowed" :
			    "too long");
			sbx_buf_release(&rel);
			vpath_free(p);
			return -1;
		}
		p->comps[p->n++] = c;
		sbx_buf_add(&rel, "/", 1);
		sbx_buf_add(&rel, c, strlen(c));
	}
	if (!rel.len)
		sbx_buf_add(&rel, "/", 1);
	sbx_buf_add(&rel, "", 1);
	p->rel = rel.data;
	return 0;
}

/* The directory of the first k components, resolved in the volume
 * (symlinks on the way stay inside it): an fd, or -1 with errno. */
static int
vpath_dir(int vfd, const struct vpath *p, int k, int flags)
{
	struct open_how how = {.flags = (uint64_t)(O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC | flags), .resolve = RESOLVE_IN_ROOT |
	    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	struct sbx_buf b = {0};
	int i, fd, tries = 0;

	for (i = 0; i < k; i++) {
		if (i)
			sbx_buf_add(&b, "/", 1);
		sbx_buf_add(&b, p->comps[i], strlen(p->comps[i]));
	}
	if (!b.len)
		sbx_buf_add(&b, ".", 1);
	sbx_buf_add(&b, "", 1);
	do
		fd = (int)syscall(SYS_openat2, vfd, b.data, &how, sizeof how);
	while (fd < 0 && errno == EAGAIN && ++tries < 8);
	sbx_buf_release(&b);
	return fd;
}

/* --- stat --------------------------------------------------------------- */

static json_t *
time_json(const struct timespec *ts)
{
	char buf[48], frac[16];
	struct tm tm;
	time_t t = ts->tv_sec;

	gmtime_r(&t, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(frac, sizeof frac, ".%09ldZ", ts->tv_nsec);
	return json_pack("s++", buf, frac, "");
}

/* VolumeEntryStat of name in dfd ("": dfd itself), never following it. */
static json_t *
entry_json(int dfd, const char *name, const char *rel)
{
	struct stat st;
	const char *type, *base = strrchr(rel, '/');
	char target[4096];
	ssize_t n;
	json_t *o;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW |
	    (*name ? 0 : AT_EMPTY_PATH)) < 0)
		return NULL;
	type = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ?
	    "directory" : S_ISLNK(st.st_mode) ? "symlink" : "unknown";
	o = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:o,s:o,s:o}",
	    "name", base ? base + 1 : rel, "path", rel, "type", type,
	    "size", (json_int_t)st.st_size,
	    "mode", (json_int_t)(st.st_mode & 07777),
	    "uid", (json_int_t)st.st_uid, "gid", (json_int_t)st.st_gid,
	    "atime", time_json(&st.st_atim), "mtime", time_json(&st.st_mtim),
	    "ctime", time_json(&st.st_ctim));
	if (o && S_ISLNK(st.st_mode) &&
	    (n = readlinkat(dfd, name, target, sizeof target - 1)) >= 0)
		json_object_set_new(o, "target", sbx_json_bytes(target,
		    (size_t)n));
	return o;
}

/* --- GET /dir: the entries, depth levels down ---------------------------- */

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
list_dir(int dfd, const char *rel, int depth, json_t *out)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	char **names = NULL, *p;
	size_t n = 0, i;
	json_t *o;
	int sub;

	if (!d) {
		close(dfd);
		return -1;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			names = sbx_xrealloc(names, (n + 1) * sizeof *names);
			names[n++] = sbx_xstrdup(e->d_name);
		}
	if (n)
		qsort(names, n, sizeof *names, by_name);
	for (i = 0; i < n; i++) {
		p = sbx_xasprintf("%s/%s", strcmp(rel, "/") ? rel : "",
		    names[i]);
		if ((o = entry_json(dirfd(d), names[i], p))) {
			json_array_append_new(out, o);
			if (depth > 1 && !strcmp(sbx_json_str(o, "type"),
			    "directory") && (sub = openat(dirfd(d), names[i],
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC)) >= 0)
				list_dir(sub, p, depth - 1, out);
		}
		free(p);
		free(names[i]);
	}
	free(names);
	closedir(d);
	return 0;
}

/* A number of the query between min and max, or def when absent; -1
 * after answering 400. */
static int
query_num(struct sbxd_req *r, const char *name, uint64_t max, long long def,
    long long *out, enum MHD_Result *ret)
{
	const char *s = sbxd_query(r, name);
	uint64_t v;

	*out = def;
	if (!s || !*s)
		return 0;
	if (sbx_parse_u64(s, 0, max, &v) < 0) {
		*ret = vc_err(r, 400, "%s '%s' is not a number from 0 to "
		    "%llu", name, s, (unsigned long long)max);
		return -1;
	}
	*out = (long long)v;
	return 0;
}

static enum MHD_Result
h_dir_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct vpath p;
	long long depth;
	json_t *out;
	int vfd, dfd;

	if ((vfd = vol_auth(r, &ret)) < 0)
		return ret;
	if (vpath_parse(r, &p, &ret) < 0)
		goto out_vol;
	if (query_num(r, "depth", LIST_DEPTH_MAX, 1, &depth, &ret) < 0)
		goto out;
	if (depth < 1) {
		ret = vc_err(r, 400, "depth must be at least 1");
		goto out;
	}
	if ((dfd = vpath_dir(vfd, &p, p.n, 0)) < 0) {
		ret = vc_errno(r, "cannot list", p.rel);
		goto out;
	}
	out = json_array();
	list_dir(dfd, p.rel, (int)depth, out);
	ret = sbxd_reply_json(r, 200, out);
out:
	vpath_free(&p);
out_vol:
	close(vfd);
	return ret;
}

/* --- uid, gid, mode ------------------------------------------------------ */

struct owner {
	long long uid, gid, mode;   /* -1: not asked */
};

static int
owner_query(struct sbxd_req *r, struct owner *o, long long mode_def,
    enum MHD_Result *ret)
{
	return query_num(r, "uid", 4294967294u, -1, &o->uid, ret) < 0 ||
	    query_num(r, "gid", 4294967294u, -1, &o->gid, ret) < 0 ||
	    query_num(r, "mode", 07777, mode_def, &o->mode, ret) < 0 ? -1 : 0;
}

/* Set on name in dfd ("": dfd itself), never through a symlink (a
 * symlink's mode cannot be set: EOPNOTSUPP). Owner first: a chown
 * clears the set-id bits. */
static int
owner_set(int dfd, const char *name, const struct owner *o)
{
	if ((o->uid >= 0 || o->gid >= 0) && fchownat(dfd, name,
	    (uid_t)o->uid, (gid_t)o->gid, AT_SYMLINK_NOFOLLOW |
	    (*name ? 0 : AT_EMPTY_PATH)) < 0)
		return -1;
	if (o->mode < 0)
		return 0;
	return *name ? fchmodat(dfd, name, (mode_t)o->mode,
	    AT_SYMLINK_NOFOLLOW) : fchmod(dfd, (mode_t)o->mode);
}

/* --- POST /dir ----------------------------------------------------------- */

/* Make component k-1 in the directory of the first k-1; 1 made, 0 there
 * as a directory already, -1 with errno. */
static int
mkdir_one(int vfd, const struct vpath *p, int k, const struct owner *o)
{
	int pfd = vpath_dir(vfd, p, k - 1, 0), rc = -1, e, fd;
	const char *name = p->comps[k - 1];

	if (pfd < 0)
		return -1;
	if (mkdirat(pfd, name, 0700) == 0) {
		rc = owner_set(pfd, name, o) < 0 ? -1 : 1;
		if (rc < 0) {
			e = errno;
			unlinkat(pfd, name, AT_REMOVEDIR);
			errno = e;
		}
	} else if (errno == EEXIST) {
		/* A directory, or a symlink to one inside the volume. */
		if ((fd = vpath_dir(vfd, p, k, 0)) >= 0) {
			close(fd);
			rc = 0;
		} else {
			errno = EEXIST;
		}
	}
	close(pfd);
	return rc;
}

static enum MHD_Result
h_dir_post(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct owner o;
	struct vpath p;
	const char *force = sbxd_query(r, "force");
	int vfd, pfd, k, made = 0, f = force && !strcmp(force, "true");
	json_t *st;

	if ((vfd = vol_auth(r, &ret)) < 0)
		return ret;
	if (vpath_parse(r, &p, &ret) < 0)
		goto out_vol;
	if (owner_query(r, &o, 0755, &ret) < 0)
		goto out;
	if (!p.n) {
		ret = vc_err(r, 409, "path '/' exists: the volume's root");
		goto out;
	}
	/* force: the parents too (each with the same owner and mode). */
	for (k = f ? 1 : p.n; k <= p.n; k++)
		if ((made = mkdir_one(vfd, &p, k, &o)) < 0)
			break;
	if (made < 0) {
		ret = vc_errno(r, "cannot make the directory", p.rel);
		goto out;
	}
	if (!made && !f) {
		ret = vc_err(r, 409, "path '%s' exists already", p.rel);
		goto out;
	}
	if ((pfd = vpath_dir(vfd, &p, p.n - 1, 0)) < 0 ||
	    !(st = entry_json(pfd, p.comps[p.n - 1], p.rel)))
		ret = vc_errno(r, "cannot stat", p.rel);
	else
		ret = sbxd_reply_json(r, made ? 201 : 200, st);
	if (pfd >= 0)
		close(pfd);
out:
	vpath_free(&p);
out_vol:
	close(vfd);
	return ret;
}

/* --- /path: GET, PATCH, DELETE of the entry itself ----------------------- */

/* The volume, the path, and the directory that holds the path's entry
 * (the volume's root: the volume itself, name ""); -1 after
 * answering. */
struct ventry {
	int vfd, pfd;
	struct vpath p;
	const char *name;
};

static int
ventry_open(struct sbxd_req *r, struct ventry *e, enum MHD_Result *ret)
{
	e->pfd = -1;
	if ((e->vfd = vol_auth(r, ret)) < 0)
		return -1;
	if (vpath_parse(r, &e->p, ret) < 0) {
		close(e->vfd);
		return -1;
	}
	if (!e->p.n) {
		e->name = "";
		e->pfd = dup(e->vfd);
	} else {
		e->name = e->p.comps[e->p.n - 1];
		e->pfd = vpath_dir(e->vfd, &e->p, e->p.n - 1, 0);
	}
	if (e->pfd < 0) {
		*ret = vc_errno(r, "no such path", e->p.rel);
		vpath_free(&e->p);
		close(e->vfd);
		return -1;
	}
	return 0;
}

static void
ventry_close(struct ventry *e)
{
	close(e->pfd);
	close(e->vfd);
	vpath_free(&e->p);
}

static enum MHD_Result
entry_reply(struct sbxd_req *r, struct ventry *e, int status)
{
	json_t *st = entry_json(e->pfd, e->name, e->p.rel);

	return st ? sbxd_reply_json(r, status, st) :
	    vc_errno(r, "cannot stat", e->p.rel);
}

static enum MHD_Result
h_path_get(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct ventry e;

	if (ventry_open(r, &e, &ret) < 0)
		return ret;
	ret = entry_reply(r, &e, 200);
	ventry_close(&e);
	return ret;
}

/* A body's uid, gid or mode: absent or null -1, else a number in range;
 * -2 when it is not. */
static long long
body_num(const json_t *j, const char *key, long long max)
{
	json_t *v = json_object_get(j, key);

	if (!v || json_is_null(v))
		return -1;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > max)
		return -2;
	return json_integer_value(v);
}

static enum MHD_Result
h_path_patch(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct ventry e;
	struct owner o;
	json_t *j;

	if (ventry_open(r, &e, &ret) < 0)
		return ret;
	if (!(j = sbxd_body_json(r, &ret)))
		goto out;
	o.uid = body_num(j, "uid", 4294967294u);
	o.gid = body_num(j, "gid", 4294967294u);
	o.mode = body_num(j, "mode", 07777);
	json_decref(j);
	if (o.uid == -2 || o.gid == -2 || o.mode == -2)
		ret = vc_err(r, 400, "uid and gid must be numbers from 0 to "
		    "4294967294, mode from 0 to 4095");
	else if (owner_set(e.pfd, e.name, &o) < 0)
		ret = errno == EOPNOTSUPP ? vc_err(r, 400, "path '%s' is a "
		    "symlink: its mode cannot be set", e.p.rel) :
		    vc_errno(r, "cannot change", e.p.rel);
	else
		ret = entry_reply(r, &e, 200);
out:
	ventry_close(&e);
	return ret;
}

static enum MHD_Result
h_path_delete(struct sbxd_req *r)
{
	enum MHD_Result ret;
	struct ventry e;
	struct stat st;

	if (ventry_open(r, &e, &ret) < 0)
		return ret;
	if (!*e.name)
		ret = vc_err(r, 400, "the volume's root cannot be removed");
	else if (fstatat(e.pfd, e.name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    sbx_rm_at(e.pfd, e.name) < 0)
		ret = vc_errno(r, "cannot remove", e.p.rel);
	else
		ret = sbxd_reply_empty(r, 204);
	ventry_close(&e);
	return ret;
}

/* --- GET /file: the bytes, streamed from the file ------------------------ */

static enum MHD_Result
h_file_get(struct sbxd_req *r)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
	    RESOLVE_NO_XDEV};
	struct MHD_Response *rs;
	enum MHD_Result ret;
	struct stat st;
	struct vpath p;
	char proc[40];
	int vfd, fd = -1, pfd;

	if ((vfd = vol_auth(r, &ret)) < 0)
		return ret;
	if (vpath_parse(r, &p, &ret) < 0) {
		close(vfd);
		return ret;
	}
	/* Symlinks, the last one too, are followed inside the volume;
	 * only a regular file is opened (no FIFO or device of a
	 * sandbox's), through the inode the O_PATH fd holds. */
	pfd = (int)syscall(SYS_openat2, vfd, p.n ? p.rel + 1 : ".", &how,
	    sizeof how);
	if (pfd < 0 || fstat(pfd, &st) < 0) {
		ret = vc_errno(r, "cannot read", p.rel);
	} else if (!S_ISREG(st.st_mode)) {
		ret = vc_err(r, 400, "path '%s' is not a file", p.rel);
	} else if (snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd),
	    (fd = open(proc, O_RDONLY | O_NOCTTY | O_CLOEXEC)) < 0) {
		ret = vc_errno(r, "cannot read", p.rel);
	} else if (!(rs = MHD_create_response_from_fd_at_offset64(
	    (uint64_t)st.st_size, fd, 0))) {
		ret = MHD_NO;
	} else {
		/* MHD closes fd with the response. */
		fd = -1;
		MHD_add_response_header(rs, "Content-Type",
		    "application/octet-stream");
		r->status = 200;
		ret = MHD_queue_response(r->c, 200, rs);
		MHD_destroy_response(rs);
	}
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	vpath_free(&p);
	close(vfd);
	return ret;
}

/* --- PUT /file: the body into a new file, renamed onto the path ---------- */

struct vput {
	struct ventry e;
	int opened;           /* e is open */
	int fd;               /* the temporary file, -1 */
	char tmp[40];
	int force;
	uint64_t total;
	struct owner o;
	int deferring;        /* in put_begin: a failure is put_fail'ed */
	int status;           /* failed: its answer */
	char msg[512];
};

__attribute__((format(printf, 3, 4))) static void
put_fail(struct vput *u, int status, const char *fmt, ...)
{
	va_list ap;

	if (u->status)
		return;
	u->status = status;
	va_start(ap, fmt);
	vsnprintf(u->msg, sizeof u->msg, fmt, ap);
	va_end(ap);
}

static int
put_deferring(struct sbxd_req *r, int status, const char *msg)
{
	struct vput *u = r->up;

	if (!u->deferring)
		return 0;
	put_fail(u, status, "%s", msg);
	return 1;
}

static void
put_free(struct sbxd_req *r)
{
	struct vput *u = r->up;

	if (u->fd >= 0) {
		close(u->fd);
		unlinkat(u->e.pfd, u->tmp, 0);
	}
	if (u->opened)
		ventry_close(&u->e);
	free(u);
	r->up = NULL;
}

/* The checks, and the temporary file; -1 when it failed (answered). */
static int
put_begin(struct sbxd_req *r, struct vput *u)
{
	const char *force = sbxd_query(r, "force");
	enum MHD_Result ret;
	unsigned char rnd[8];
	struct stat st;
	int i;

	u->deferring = 1;
	if (ventry_open(r, &u->e, &ret) < 0) {
		u->deferring = 0;
		return -1;
	}
	u->opened = 1;
	u->force = force && !strcmp(force, "true");
	if (owner_query(r, &u->o, 0644, &ret) < 0) {
		u->deferring = 0;
		return -1;
	}
	u->deferring = 0;
	if (!*u->e.name) {
		put_fail(u, 400, "path '/' is the volume's root");
		return -1;
	}
	if (fstatat(u->e.pfd, u->e.name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode))
			put_fail(u, 400, "path '%s' is a directory", u->e.p.rel);
		else if (!u->force)
			put_fail(u, 409, "path '%s' exists already (force "
			    "overwrites it)", u->e.p.rel);
		if (u->status)
			return -1;
	}
	if (RAND_bytes(rnd, sizeof rnd) != 1) {
		put_fail(u, 500, "no random bytes");
		return -1;
	}
	memcpy(u->tmp, ".sbxd-upload-", 13);
	for (i = 0; i < 8; i++)
		snprintf(u->tmp + 13 + 2 * i, 3, "%02x", rnd[i]);
	if ((u->fd = openat(u->e.pfd, u->tmp, O_WRONLY | O_CREAT | O_EXCL |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		put_fail(u, errno_status(errno), "cannot write '%s': %s",
		    u->e.p.rel, strerror(errno));
		return -1;
	}
	return 0;
}

static struct vput *
put_get(struct sbxd_req *r)
{
	struct vput *u = r->up;

	if (u)
		return u;
	u = sbx_xcalloc(1, sizeof *u);
	u->fd = -1;
	u->e.pfd = u->e.vfd = -1;
	r->up = u;
	r->up_free = put_free;
	return u;
}

static int
h_file_data(struct sbxd_req *r, const char *p, size_t n)
{
	struct vput *u = put_get(r);

	if (u->status)
		return -1;
	if (!u->opened && u->fd < 0 && put_begin(r, u) < 0)
		return -1;
	u->total += n;
	if (sbxd.o.max_upload && u->total > sbxd.o.max_upload) {
		put_fail(u, 413, "the upload is over %llu bytes (--max-upload)",
		    (unsigned long long)sbxd.o.max_upload);
		return -1;
	}
	if (sbx_write_all(u->fd, p, n) < 0) {
		put_fail(u, errno_status(errno), "cannot write '%s': %s",
		    u->e.p.rel, strerror(errno));
		return -1;
	}
	return 0;
}

static enum MHD_Result
h_file_put(struct sbxd_req *r)
{
	struct vput *u = put_get(r);
	struct owner o;
	int rc;

	if (!u->status && !u->opened)
		put_begin(r, u);
	if (u->status)
		return vc_err(r, u->status, "%s", u->msg);
	/* The mode with fchmod: an open fd, not a name a sandbox may
	 * change meanwhile. */
	o = u->o;
	if ((o.uid >= 0 || o.gid >= 0) && fchown(u->fd, (uid_t)o.uid,
	    (gid_t)o.gid) < 0)
		return vc_errno(r, "cannot change the owner of", u->e.p.rel);
	if (fchmod(u->fd, (mode_t)o.mode) < 0)
		return vc_errno(r, "cannot change the mode of", u->e.p.rel);
	rc = u->force ? renameat(u->e.pfd, u->tmp, u->e.pfd, u->e.name) :
	    renameat2(u->e.pfd, u->tmp, u->e.pfd, u->e.name,
	    RENAME_NOREPLACE);
	if (rc < 0)
		return errno == EEXIST ? vc_err(r, 409, "path '%s' exists "
		    "already (force overwrites it)", u->e.p.rel) :
		    vc_errno(r, "cannot write", u->e.p.rel);
	close(u->fd);
	u->fd = -1;
	return entry_reply(r, &u->e, 200);
}

const struct sbxd_route sbxd_volc_routes[] = {
	{"GET", "/volumecontent/*/dir", 0, h_dir_get, NULL},
	{"POST", "/volumecontent/*/dir", 0, h_dir_post, NULL},
	{"GET", "/volumecontent/*/path", 0, h_path_get, NULL},
	{"PATCH", "/volumecontent/*/path", 0, h_path_patch, NULL},
	{"DELETE", "/volumecontent/*/path", 0, h_path_delete, NULL},
	{"GET", "/volumecontent/*/file", 0, h_file_get, NULL},
	{"PUT", "/volumecontent/*/file", 0, h_file_put, h_file_data},
	{NULL, NULL, 0, NULL, NULL},
};
