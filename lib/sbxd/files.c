/* files.c - a helper of sbxd inside a sandbox, for its files.
 *
 * sbxd never opens a sandbox's path itself: a forked child enters the
 * sandbox's user and mount namespaces (the backend's enter) and resolves
 * every path there, against the sandbox's own root, so that "..", an
 * absolute path or a symlink can only ever reach the sandbox's files.
 * It answers requests on a socket, one JSON document each way, and
 * hands back the files it opens as fds. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "sbxd.h"

/* --- messages: one JSON document and maybe some fds (msg.c's frames) --- */

/* A listing of a deep tree is long: sbxd takes more than the agent. */
#define MSG_MAX (256u << 20)
#define MSG_JSON 0

int
sbxd_msg_sendv(int sock, const json_t *j, const int *fds, int nfds)
{
	char *s = json_dumps(j, JSON_COMPACT);
	int rc;

	if (!s)
		return -1;
	rc = sbx_msg_send_max(sock, MSG_MAX, MSG_JSON, s, strlen(s), fds,
	    nfds);
	free(s);
	return rc;
}

int
sbxd_msg_send(int sock, const json_t *j, int fd)
{
	return sbxd_msg_sendv(sock, j, &fd, fd >= 0);
}

json_t *
sbxd_msg_recvv(int sock, int *fds, int *nfds, int max)
{
	struct sbx_msg m;
	json_t *j = NULL;
	int i;

	*nfds = 0;
	if (sbx_msg_recv_max(sock, MSG_MAX, &m) > 0 && m.type == MSG_JSON)
		j = json_loadb(m.data, m.len, 0, NULL);
	/* The fds the caller takes; release closes the rest. */
	for (i = 0; j && i < m.nfds && *nfds < max; i++) {
		fds[(*nfds)++] = m.fds[i];
		m.fds[i] = -1;
	}
	sbx_msg_release(&m);
	return j;
}

json_t *
sbxd_msg_recv(int sock, int *fd)
{
	int f = -1, n;
	json_t *j = sbxd_msg_recvv(sock, &f, &n, fd ? 1 : 0);

	if (fd)
		*fd = n ? f : -1;
	return j;
}

/* --- inside: users, paths, entries ------------------------------------- */

struct user {
	char name[64];
	char home[PATH_MAX];
	uid_t uid;
	gid_t gid;
	int known;            /* in the sandbox's passwd: files are chowned */
};

/* Field i (0 the first) of a colon-separated line. */
static const char *
field(const char *line, int i, size_t *len)
{
	const char *e;

	while (i-- > 0) {
		if (!(line = strchr(line, ':')))
			return NULL;
		line++;
	}
	e = strchr(line, ':');
	*len = e ? (size_t)(e - line) : strcspn(line, "\n");
	return line;
}

/* The name of id in the sandbox's passwd or group file, or the number. */
static void
id_name(const char *file, unsigned id, char *out, size_t n)
{
	FILE *f = fopen(file, "re");
	char line[1024];
	const char *v;
	size_t len;

	snprintf(out, n, "%u", id);
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (!(v = field(line, 2, &len)) || strtoul(v, NULL, 10) != id ||
		    *v == ':')
			continue;
		v = field(line, 0, &len);
		if (len < n) {
			memcpy(out, v, len);
			out[len] = 0;
		}
		break;
	}
	fclose(f);
}

/* A user of the sandbox: its passwd's, else "user" (the template's
 * default user, when its image has no such account: then its processes
 * run as the sandbox's root, in /home/user) or root. */
static int
user_find(const char *name, struct user *u)
{
	FILE *f = fopen("/etc/passwd", "re");
	char line[1024];
	const char *v;
	size_t len, nlen = strlen(name);

	memset(u, 0, sizeof u[0]);
	if (!nlen || nlen >= sizeof u->name)
		return -1;
	memcpy(u->name, name, nlen + 1);
	while (f && fgets(line, sizeof line, f)) {
		v = field(line, 0, &len);
		if (len != nlen || memcmp(v, name, len))
			continue;
		if (!(v = field(line, 2, &len)))
			break;
		u->uid = (uid_t)strtoul(v, NULL, 10);
		if (!(v = field(line, 3, &len)))
			break;
		u->gid = (gid_t)strtoul(v, NULL, 10);
		if (!(v = field(line, 5, &len)) || !len ||
		    len >= sizeof u->home)
			break;
		memcpy(u->home, v, len);
		u->home[len] = 0;
		u->known = 1;
		fclose(f);
		return 0;
	}
	if (f)
		fclose(f);
	if (!strcmp(name, "user")) {
		snprintf(u->home, sizeof u->home, "/home/user");
		return 0;
	}
	if (!strcmp(name, "root")) {
		snprintf(u->home, sizeof u->home, "/root");
		return 0;
	}
	return -1;
}

/* "a/../b//c" against dir, made absolute and clean, as Go's
 * filepath.Join does. NULL when it is too long. */
static char *
path_clean(const char *home, const char *p)
{
	char *s, *out, *seg, *save = NULL;
	size_t n = 0;

	if (!strcmp(p, "~"))
		s = sbx_xstrdup(home);
	else if (!strncmp(p, "~/", 2))
		s = sbx_xasprintf("%s/%s", home, p + 2);
	else if (*p != '/')
		s = sbx_xasprintf("%s/%s", home, p);
	else
		s = sbx_xstrdup(p);
	out = sbx_xmalloc(strlen(s) + 2);
	out[0] = 0;
	for (seg = strtok_r(s, "/", &save); seg; seg = strtok_r(NULL, "/",
	    &save)) {
		if (!strcmp(seg, "."))
			continue;
		if (!strcmp(seg, "..")) {
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
			out[n] = 0;
			continue;
		}
		out[n++] = '/';
		memcpy(out + n, seg, strlen(seg) + 1);
		n += strlen(seg);
	}
	if (!n) {
		out[0] = '/';
		out[1] = 0;
	}
	free(s);
	if (strlen(out) >= PATH_MAX) {
		free(out);
		return NULL;
	}
	return out;
}

static const char *
errno_code(int e)
{
	switch (e) {
	case ENOENT: return "not_found";
	case EEXIST: case ENOTEMPTY: return "already_exists";
	case EACCES: case EPERM: case EROFS: return "permission_denied";
	case ENOTDIR: case EISDIR: case EINVAL: case ENAMETOOLONG:
	case ELOOP: case EXDEV:
		return "invalid_argument";
	case ENOSPC: case EDQUOT: return "resource_exhausted";
	default: return "internal";
	}
}

static json_t *
fail(const char *code, int e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static json_t *
fail(const char *code, int e, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return json_pack("{s:s,s:s,s:i}", "error", code ? code : errno_code(e),
	    "message", msg, "errno", e);
}

/* Go's FileMode.String(): "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx". */
static void
mode_string(mode_t m, char *out)
{
	static const char rwx[] = "rwxrwxrwx";
	int i, n = 0;

	if (S_ISDIR(m))
		out[n++] = 'd';
	if (S_ISLNK(m))
		out[n++] = 'L';
	if (S_ISBLK(m))
		out[n++] = 'D';
	if (S_ISCHR(m)) {
		out[n++] = 'D';
		out[n++] = 'c';
	}
	if (S_ISFIFO(m))
		out[n++] = 'p';
	if (S_ISSOCK(m))
		out[n++] = 'S';
	if (m & S_ISUID)
		out[n++] = 'u';
	if (m & S_ISGID)
		out[n++] = 'g';
	if (m & S_ISVTX)
		out[n++] = 't';
	if (!n)
		out[n++] = '-';
	for (i = 0; i < 9; i++)
		out[n++] = m & (1 << (8 - i)) ? rwx[i] : '-';
	out[n] = 0;
}

/* Its metadata: the user.e2b.* extended attributes, as envd keeps
 * the X-Metadata-* of an upload. */
static void
entry_metadata(json_t *e, const char *path)
{
	char names[8192], val[4097], *n;
	ssize_t len, vl;
	json_t *m = NULL;

	len = llistxattr(path, names, sizeof names);
	for (n = names; len > 0 && n < names + len; n += strlen(n) + 1) {
		if (strncmp(n, SBXD_META_XATTR, strlen(SBXD_META_XATTR)))
			continue;
		vl = lgetxattr(path, n, val, sizeof val - 1);
		if (vl < 0)
			continue;
		val[vl] = 0;
		if (!m)
			m = json_object();
		json_object_set_new(m, n + strlen(SBXD_META_XATTR),
		    sbx_json_bytes(val, (size_t)vl));
	}
	if (m)
		json_object_set_new(e, "metadata", m);
}

/* EntryInfo of path (lstat), as protojson writes it: zero values left
 * out, int64 as a string, the time in RFC 3339 with nanoseconds. */
static json_t *
entry_info(const char *path, const struct stat *st)
{
	json_t *e = json_object();
	const char *slash = strrchr(path, '/');
	char buf[PATH_MAX], t[64];
	struct tm tm;
	time_t sec = st->st_mtim.tv_sec;
	long ns = st->st_mtim.tv_nsec;

	json_object_set_new(e, "name", json_string(slash && slash[1] ?
	    slash + 1 : "/"));
	json_object_set_new(e, "type", json_string(S_ISDIR(st->st_mode) ?
	    "FILE_TYPE_DIRECTORY" : S_ISLNK(st->st_mode) ? "FILE_TYPE_SYMLINK" :
	    S_ISREG(st->st_mode) ? "FILE_TYPE_FILE" : "FILE_TYPE_UNSPECIFIED"));
	json_object_set_new(e, "path", json_string(path));
	if (st->st_size) {
		snprintf(t, sizeof t, "%lld", (long long)st->st_size);
		json_object_set_new(e, "size", json_string(t));
	}
	/* Go's FileMode.Perm(): the permission bits alone. */
	if (st->st_mode & 0777)
		json_object_set_new(e, "mode",
		    json_integer(st->st_mode & 0777));
	mode_string(st->st_mode, buf);
	json_object_set_new(e, "permissions", json_string(buf));
	id_name("/etc/passwd", st->st_uid, buf, sizeof buf);
	json_object_set_new(e, "owner", json_string(buf));
	id_name("/etc/group", st->st_gid, buf, sizeof buf);
	json_object_set_new(e, "group", json_string(buf));
	gmtime_r(&sec, &tm);
	strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
	if (ns % 1000000 == 0 && ns)
		snprintf(buf, sizeof buf, "%s.%03ldZ", t, ns / 1000000);
	else if (ns % 1000 == 0 && ns)
		snprintf(buf, sizeof buf, "%s.%06ldZ", t, ns / 1000);
	else if (ns)
		snprintf(buf, sizeof buf, "%s.%09ldZ", t, ns);
	else
		snprintf(buf, sizeof buf, "%sZ", t);
	json_object_set_new(e, "modifiedTime", json_string(buf));
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
		entry_metadata(e, path);
	if (S_ISLNK(st->st_mode)) {
		char *real = realpath(path, NULL);

		if (real) {
			json_object_set_new(e, "symlinkTarget",
			    json_string(real));
			free(real);
		} else {
			ssize_t n = readlink(path, buf, sizeof buf - 1);

			buf[n > 0 ? n : 0] = 0;
			json_object_set_new(e, "symlinkTarget",
			    json_string(buf));
		}
	}
	return e;
}

static json_t *
entry_of(const char *path, int *e)
{
	*e = 0;
	struct stat st;

	if (lstat(path, &st) < 0) {
		*e = errno;
		return NULL;
	}
	return entry_info(path, &st);
}

/* mkdir -p, each new directory given to the user. */
static int
mkdirs(const char *path, const struct user *u)
{
	char *p = sbx_xstrdup(path), *s;
	struct stat st;
	int rc = 0;

	for (s = p + 1; rc == 0; s++) {
		if (*s && *s != '/')
			continue;
		int end = !*s;

		*s = 0;
		if (mkdir(p, 0755) == 0) {
			if (u->known && lchown(p, u->uid, u->gid) < 0)
				rc = -1;
		} else if (errno != EEXIST || stat(p, &st) < 0 ||
		    !S_ISDIR(st.st_mode)) {
			if (errno == EEXIST)
				errno = ENOTDIR;
			rc = -1;
		}
		if (end)
			break;
		*s = '/';
	}
	free(p);
	return rc;
}

/* --- inside: the operations -------------------------------------------- */

/* The entries of directory real (shown as path) into arr, name-sorted
 * (strcmp, as Go's filepath.WalkDir that envd walks with), each
 * directory followed by its own entries while level < depth: envd's
 * depth-first walk. Symbolic links are listed, never followed. */
static void
list_walk(json_t *arr, const char *real, const char *path, int level,
    int depth)
{
	struct dirent **names;
	struct stat st;
	int n = scandir(real, &names, NULL, alphasort), i;

	for (i = 0; i < n; i++) {
		const char *nm = names[i]->d_name;

		if (strcmp(nm, ".") && strcmp(nm, "..")) {
			char *rp = sbx_xasprintf("%s/%s", real, nm);
			char *p = sbx_xasprintf("%s/%s",
			    strcmp(path, "/") ? path : "", nm);

			if (lstat(rp, &st) == 0) {
				json_array_append_new(arr, entry_info(p, &st));
				if (S_ISDIR(st.st_mode) && level < depth)
					list_walk(arr, rp, p, level + 1,
					    depth);
			}
			free(rp);
			free(p);
		}
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

static json_t *
op_list(const char *path, int depth)
{
	struct stat st;
	json_t *arr;
	char *real;

	if (stat(path, &st) < 0)
		return fail(errno == ENOENT ? "not_found" : NULL, errno,
		    "directory not found: %s", path);
	if (!S_ISDIR(st.st_mode))
		return fail("invalid_argument", ENOTDIR,
		    "path is not a directory: %s", path);
	if (!(real = realpath(path, NULL)))
		return fail(NULL, errno, "cannot resolve '%s': %s", path,
		    strerror(errno));
	arr = json_array();
	list_walk(arr, real, path, 1,
	    depth < 1 ? 1 : depth);
	free(real);
	return json_pack("{s:o}", "entries", arr);
}

static json_t *
op_stat(const char *path)
{
	int e;
	json_t *j = entry_of(path, &e);

	if (!j)
		return fail(e == ENOENT ? "not_found" : NULL, e,
		    "file not found: %s", path);
	return json_pack("{s:o}", "entry", j);
}

static json_t *
op_mkdir(const char *path, const struct user *u)
{
	struct stat st;
	json_t *j;
	int e;

	if (lstat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return fail("already_exists", EEXIST,
			    "directory already exists: %s", path);
		return fail("invalid_argument", EEXIST, "path already exists "
		    "but it is not a directory: %s", path);
	}
	if (mkdirs(path, u) < 0)
		return fail(NULL, errno, "error creating directory: %s: %s",
		    path, strerror(errno));
	if (!(j = entry_of(path, &e)))
		return fail(NULL, e, "cannot stat '%s'", path);
	return json_pack("{s:o}", "entry", j);
}

static json_t *
op_move(const char *src, const char *dst, const struct user *u)
{
	struct stat st;
	char *dir;
	json_t *j;
	int e;

	if (lstat(src, &st) < 0)
		return fail(errno == ENOENT ? "not_found" : NULL, errno,
		    "source file not found: %s", src);
	dir = sbx_xstrdup(dst);
	*strrchr(dir, '/') = 0;
	if (*dir && mkdirs(dir, u) < 0) {
		e = errno;
		free(dir);
		return fail(NULL, e, "error creating destination directory: "
		    "%s", strerror(e));
	}
	free(dir);
	if (rename(src, dst) < 0)
		return fail(NULL, errno, "error renaming: %s", strerror(errno));
	if (!(j = entry_of(dst, &e)))
		return fail(NULL, e, "cannot stat '%s'", dst);
	return json_pack("{s:o}", "entry", j);
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if ((flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

static json_t *
op_remove(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return json_object();
		return fail(NULL, errno, "error removing '%s': %s", path,
		    strerror(errno));
	}
	if (!strcmp(path, "/"))
		return fail("invalid_argument", EINVAL, "cannot remove /");
	if (S_ISDIR(st.st_mode) ?
	    /* Not sbx_rmtree: on an overlay a file's st_dev is not its
	     * directory's, and FTW_MOUNT would leave it. */
	    nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS) != 0 :
	    unlink(path) < 0)
		return fail(NULL, errno, "error removing '%s': %s", path,
		    strerror(errno));
	return json_object();
}

/* A regular file to read: the fd goes back. */
static json_t *
op_open(const char *path, int *fd)
{
	struct stat st;
	int f;

	if ((f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
		return fail(errno == ENOENT ? "not_found" : NULL, errno,
		    errno == ENOENT ? "path '%s' does not exist" :
		    "cannot open '%s'", path);
	if (fstat(f, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(f);
		return fail("invalid_argument", EISDIR, S_ISDIR(st.st_mode) ?
		    "path '%s' is a directory" : "path '%s' is not a regular "
		    "file", path);
	}
	fcntl(f, F_SETFL, 0);
	*fd = f;
	return json_pack("{s:o}", "entry", entry_info(path, &st));
}

/* path opened for writing in place, as envd writes an upload: created
 * (0644 less the umask) or truncated, then given to the user. A
 * watcher sees envd's events: CREATE for a new file or WRITE for the
 * truncation of an old one, CHMOD for the chown, WRITE for the data.
 * "created" says whether it was new, for an abort to remove it. */
static json_t *
op_create(const char *path, const struct user *u, int *fd)
{
	struct stat st;
	char *dir;
	int f, e, existed;

	if (!strcmp(path, "/") || (stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode)))
		return fail("invalid_argument", EISDIR,
		    "path '%s' is a directory", path);
	existed = stat(path, &st) == 0;
	if (existed && !S_ISREG(st.st_mode))
		return fail("invalid_argument", EINVAL,
		    "path '%s' is not a regular file", path);
	dir = sbx_xstrdup(path);
	*strrchr(dir, '/') = 0;
	if (*dir && mkdirs(dir, u) < 0) {
		e = errno;
		free(dir);
		return fail(NULL, e, "error creating directory: %s",
		    strerror(e));
	}
	free(dir);
	if ((f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
	    O_NONBLOCK, 0644)) < 0) {
		e = errno;
		if (e == EISDIR)
			return fail("invalid_argument", e,
			    "path '%s' is a directory", path);
		return fail(NULL, e, "error opening file: %s", strerror(e));
	}
	if (u->known && fchown(f, u->uid, u->gid) < 0) {
		e = errno;
		close(f);
		if (!existed)
			unlink(path);
		return fail(NULL, e, "error changing ownership: %s",
		    strerror(e));
	}
	fcntl(f, F_SETFL, 0);
	*fd = f;
	return json_pack("{s:s,s:b}", "path", path, "created", !existed);
}

/* The upload of path is done; the answer is what envd's upload says of
 * a file. */
static json_t *
op_commit(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return fail("invalid_argument", EINVAL, "bad path");
	return json_pack("{s:s,s:s,s:s}", "path", path, "name", slash[1] ?
	    slash + 1 : "/", "type", "file");
}

/* --- inside: watching a directory ------------------------------------ */

struct watch {
	int ifd;
	char **dirs;          /* by watch descriptor */
	size_t ndirs;
	char *root;           /* as asked, clean */
	size_t rootlen;       /* of the resolved root; 0 for "/" */
	int recursive, entries;
};

/* dir/name, or /name when dir is "/". */
static char *
join(const char *dir, const char *name)
{
	return sbx_xasprintf("%s/%s", strcmp(dir, "/") ? dir : "", name);
}

static void
watch_add(struct watch *w, const char *dir)
{
	int wd = inotify_add_watch(w->ifd, dir, IN_CREATE | IN_MODIFY |
	    IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
	    IN_DONT_FOLLOW | IN_ONLYDIR);
	DIR *d;
	struct dirent *e;

	if (wd < 0)
		return;
	if ((size_t)wd >= w->ndirs) {
		size_t n = (size_t)wd + 16;

		w->dirs = sbx_xrealloc(w->dirs, n * sizeof *w->dirs);
		memset(w->dirs + w->ndirs, 0, (n - w->ndirs) *
		    sizeof *w->dirs);
		w->ndirs = n;
	}
	free(w->dirs[wd]);
	w->dirs[wd] = sbx_xstrdup(dir);
	if (!w->recursive || !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") &&
		    strcmp(e->d_name, "..")) {
			char *sub = join(dir, e->d_name);

			watch_add(w, sub);
			free(sub);
		}
	}
	closedir(d);
}

static const char *
event_type(uint32_t mask)
{
	if (mask & (IN_CREATE | IN_MOVED_TO))
		return "EVENT_TYPE_CREATE";
	if (mask & IN_MODIFY)
		return "EVENT_TYPE_WRITE";
	if (mask & IN_DELETE)
		return "EVENT_TYPE_REMOVE";
	if (mask & IN_MOVED_FROM)
		return "EVENT_TYPE_RENAME";
	if (mask & IN_ATTRIB)
		return "EVENT_TYPE_CHMOD";
	return NULL;
}

static int send_event(int sock, struct watch *w, const char *full,
    const char *type, int entry);

/* What a new directory already holds when its watch begins: made
 * before the watch, it has no events of its own, so they are sent as
 * creations (one may come twice, none goes missing). */
static int
watch_scan(int sock, struct watch *w, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *full;
	int rc = 0;

	while (d && rc == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		full = join(dir, e->d_name);
		rc = send_event(sock, w, full, "EVENT_TYPE_CREATE", 1);
		if (rc == 0 && e->d_type == DT_DIR)
			rc = watch_scan(sock, w, full);
		free(full);
	}
	if (d)
		closedir(d);
	return rc;
}

static int
send_event(int sock, struct watch *w, const char *full, const char *type,
    int entry)
{
	const char *name = full + w->rootlen + 1;
	json_t *msg;
	struct stat st;
	char *shown;
	int rc;

	msg = json_pack("{s:s,s:s}", "name", name, "type", type);
	if (msg && w->entries && entry && lstat(full, &st) == 0) {
		shown = join(w->root, name);
		json_object_set_new(msg, "entry", entry_info(shown, &st));
		free(shown);
	}
	rc = msg ? sbxd_msg_send(sock, msg, -1) : 0;
	json_decref(msg);
	return rc;
}

/* One event to sbxd; -1 when it is gone. */
static int
watch_event(int sock, struct watch *w, const struct inotify_event *ev)
{
	const char *type = event_type(ev->mask), *dir;
	char *full;
	int rc;

	if (ev->wd < 0 || (size_t)ev->wd >= w->ndirs ||
	    !(dir = w->dirs[ev->wd]) || !ev->len || !type)
		return 0;
	full = join(dir, ev->name);
	rc = send_event(sock, w, full, type,
	    !(ev->mask & (IN_DELETE | IN_MOVED_FROM)));
	if (rc == 0 && w->recursive && (ev->mask & IN_ISDIR) &&
	    (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
		watch_add(w, full);
		rc = watch_scan(sock, w, full);
	}
	free(full);
	return rc;
}

/* Events until sbxd hangs up. */
static void
watch_loop(int sock, struct watch *w)
{
	char buf[64 * 1024] __attribute__((aligned(8)));
	const struct inotify_event *ev;
	ssize_t n;
	char *p;

	for (;;) {
		struct pollfd f[2] = {{w->ifd, POLLIN, 0}, {sock, POLLIN, 0}};

		if (poll(f, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		/* Nothing more comes from sbxd: input or a hangup ends it. */
		if (f[1].revents)
			return;
		if (!(f[0].revents & POLLIN))
			continue;
		if ((n = read(w->ifd, buf, sizeof buf)) <= 0)
			continue;
		for (p = buf; p < buf + n; p += sizeof *ev + ev->len) {
			ev = (const struct inotify_event *)p;
			if (watch_event(sock, w, ev) < 0)
				return;
		}
	}
}

static json_t *
op_watch(const char *path, int recursive, int entries, struct watch *w)
{
	struct stat st;
	char *real;

	if (stat(path, &st) < 0)
		return fail(errno == ENOENT ? "not_found" : NULL, errno,
		    "path %s not found", path);
	if (!S_ISDIR(st.st_mode))
		return fail("invalid_argument", ENOTDIR,
		    "path %s not a directory", path);
	if (!(real = realpath(path, NULL)))
		return fail(NULL, errno, "cannot resolve '%s'", path);
	memset(w, 0, sizeof *w);
	w->root = sbx_xstrdup(path);
	w->rootlen = strcmp(real, "/") ? strlen(real) : 0;
	w->recursive = recursive;
	w->entries = entries;
	if ((w->ifd = inotify_init1(IN_CLOEXEC)) < 0) {
		int e = errno;

		free(real);
		/* The kernel's inotify limits are the sandbox's. */
		return fail(e == EMFILE || e == ENFILE || e == ENOSPC ?
		    "resource_exhausted" : "internal", e,
		    "cannot watch: %s", strerror(e));
	}
	watch_add(w, real);
	free(real);
	if (!w->ndirs)
		return fail("internal", errno, "cannot watch '%s': %s", path,
		    strerror(errno));
	return json_object();
}

/* --- inside: the loop ------------------------------------------------- */

static json_t *
serve_one(const json_t *q, int *fd, struct watch *w, int *watching)
{
	const char *op = sbx_json_str(q, "op");
	const char *uname = sbx_json_str(q, "user");
	const char *p1 = sbx_json_str(q, "path");
	const char *p2 = sbx_json_str(q, "to");
	struct user u;
	char *a = NULL, *b = NULL;
	json_t *r;

	if (!op)
		return fail("invalid_argument", EINVAL, "no op");
	if (!uname || !*uname)
		uname = "user";
	if (user_find(uname, &u) < 0)
		return fail("unauthenticated", EINVAL, "invalid username: "
		    "'%s'", uname);
	/* Who a process runs as (proc.c): known, its home. */
	if (!strcmp(op, "user"))
		return json_pack("{s:b,s:s}", "known", u.known, "home",
		    u.home);
	if (!strcmp(op, "commit"))
		return op_commit(p1 ? p1 : "");
	/* A failed upload: a file it made goes (one it truncated stays
	 * so, as with envd). */
	if (!strcmp(op, "abort")) {
		if (p1 && *p1 == '/')
			unlink(p1);
		return json_object();
	}
	if (!p1 || !(a = path_clean(u.home, p1)) ||
	    (p2 && !(b = path_clean(u.home, p2))))
		r = fail("invalid_argument", EINVAL, "bad path");
	else if (!strcmp(op, "stat"))
		r = op_stat(a);
	else if (!strcmp(op, "list"))
		r = op_list(a, (int)sbx_json_int(q, "depth", 1));
	else if (!strcmp(op, "mkdir"))
		r = op_mkdir(a, &u);
	else if (!strcmp(op, "move") && b)
		r = op_move(a, b, &u);
	else if (!strcmp(op, "remove"))
		r = op_remove(a);
	else if (!strcmp(op, "open"))
		r = op_open(a, fd);
	else if (!strcmp(op, "create"))
		r = op_create(a, &u, fd);
	else if (!strcmp(op, "watch")) {
		r = op_watch(a, json_is_true(json_object_get(q, "recursive")),
		    json_is_true(json_object_get(q, "entries")), w);
		*watching = !json_object_get(r, "error");
	} else
		r = fail("invalid_argument", EINVAL, "unknown op '%s'", op);
	free(a);
	free(b);
	return r ? r : fail("internal", EINVAL, "out of memory");
}

static void __attribute__((noreturn))
serve(int sock)
{
	struct watch w = {.ifd = -1};
	json_t *q, *r;
	int fd, watching = 0;

	umask(022);
	while ((q = sbxd_msg_recv(sock, NULL))) {
		fd = -1;
		r = serve_one(q, &fd, &w, &watching);
		json_decref(q);
		if (sbxd_msg_send(sock, r, fd) < 0)
			_exit(1);
		json_decref(r);
		if (fd >= 0)
			close(fd);
		if (watching)
			watch_loop(sock, &w);
		if (watching)
			break;
	}
	_exit(0);
}

/* --- outside ---------------------------------------------------------- */

/* The spawner's child for a helper (args: ref), on the socket fds[0]:
 * the backend's enter runs in it, single-threaded (the local backend is
 * not thread-safe, and setns into a user namespace wants one thread),
 * and the helper is its child, killed with it. */
void
sbxd_inbox_child(json_t *args, int *fds, int nfds)
{
	const json_t *ref = json_object_get(args, "ref");
	const struct sbx_files *files;
	struct sbx_job job;
	struct sbx_err cerr = {0};
	pid_t me = getpid(), g;
	int s;

	if (nfds != 1)
		_exit(125);
	/* Only the socket: no fd of sbxd's goes into a sandbox. */
	if ((s = fcntl(fds[0], F_DUPFD, 10)) < 0 || dup2(s, 3) < 0)
		_exit(125);
	close_range(4, ~0U, 0);
	if ((s = open("/dev/null", O_RDWR)) >= 0) {
		dup2(s, 0);
		dup2(s, 1);
		if (s > 3)
			close(s);
	}
	g = -1;
	if ((files = sbx_files_of(ref, &cerr)) && files->enter)
		g = files->enter(ref, &job, &cerr);
	if (g == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != me)
			_exit(125);
		close(job.errfd);
		serve(3);
	}
	if (g > 0 && sbx_job_wait(&job, &cerr) == 0)
		_exit(0);
	{
		json_t *j = fail("unavailable", EIO, "cannot reach the "
		    "sandbox's files: %s", cerr.msg);

		sbxd_msg_send(3, j, -1);
		json_decref(j);
	}
	_exit(1);
}

int
sbxd_inbox_start(struct sbxd_box *b, struct sbxd_inbox *ib,
    struct sbx_err *err)
{
	const struct sbx_files *files = sbx_files_of(b->ref, err);
	json_t *args;
	int sv[2], rc;

	ib->ch.pid = -1;
	ib->ch.pidfd = ib->ch.statfd = -1;
	ib->sock = -1;
	if (!files)
		return -1;
	if (!files->enter)
		return sbx_err_set(err, SBX_EX_USAGE, "the %s backend cannot "
		    "reach a sandbox's files", sbxd.be->name);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "socketpair:");
	args = json_pack("{s:O}", "ref", b->ref);
	rc = sbxd_spawn("inbox", args, &sv[1], 1, &ib->ch, err);
	json_decref(args);
	close(sv[1]);
	if (rc < 0) {
		close(sv[0]);
		return -1;
	}
	ib->sock = sv[0];
	return 0;
}

json_t *
sbxd_inbox_call(struct sbxd_inbox *ib, json_t *q, int *fd)
{
	json_t *r = NULL;

	if (fd)
		*fd = -1;
	if (sbxd_msg_send(ib->sock, q, -1) == 0)
		r = sbxd_msg_recv(ib->sock, fd);
	json_decref(q);
	if (!r)
		r = fail("unavailable", EIO, "the sandbox's files helper "
		    "went away");
	return r;
}

void
sbxd_inbox_end(struct sbxd_inbox *ib, int kill_it)
{
	if (ib->sock >= 0)
		close(ib->sock);
	ib->sock = -1;
	if (ib->ch.pid > 0 && kill_it)
		sbxd_child_kill(&ib->ch, SIGKILL);
	sbxd_child_release(&ib->ch);
}

json_t *
sbxd_inbox_do(struct sbxd_box *b, json_t *q, int *fd)
{
	struct sbxd_inbox ib;
	struct sbx_err err;
	json_t *r;

	if (sbxd_inbox_start(b, &ib, &err) < 0) {
		json_decref(q);
		return fail("unimplemented", ENOSYS, "%s", err.msg);
	}
	r = sbxd_inbox_call(&ib, q, fd);
	sbxd_inbox_end(&ib, 0);
	return r;
}
