/* snapshot.c - snapshots of local sandboxes: the overlay's upper layer
 * copied, while the sandbox is frozen, into the store (ROOT/.snapshots/
 * snp-HEX/tree, a plain tree with the overlay's whiteouts and opaque
 * directories, owners relative to the sandbox's root) beside a meta.json;
 * a sandbox made from one has its tree as a read-only layer (and its
 * parents' below it) over the image: copy-on-write, nothing copied */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

#define SNAP_PREFIX "snp-"
/* A ctime this close to the first pass's start may not show a change
 * made right after (timestamps move by the tick): such a file is copied
 * again, frozen. (A write through a shared mapping moves the ctime only
 * at a page's first write after writeback: hence the syncfs first.) */
#define SNAP_RACY_NS 50000000LL

const char *
sbx_snap_root(void)
{
	static char *root;

	if (!root)
		root = sbx_xasprintf("%s/.snapshots", sbx_local_root());
	return root;
}

int
sbx_snap_valid_id(const char *s)
{
	return !strncmp(s, SNAP_PREFIX, strlen(SNAP_PREFIX)) &&
	    sbx_local_valid_id(s + strlen(SNAP_PREFIX));
}

int
sbx_snap_valid_name(const char *name)
{
	size_t i;

	if (!name[0] || strlen(name) > 63 || sbx_snap_valid_id(name) ||
	    !strncmp(name, SNAP_PREFIX, strlen(SNAP_PREFIX)))
		return 0;
	for (i = 0; name[i]; i++)
		if (!(name[i] >= 'a' && name[i] <= 'z') &&
		    !(name[i] >= 'A' && name[i] <= 'Z') &&
		    !(name[i] >= '0' && name[i] <= '9') &&
		    (!i || !strchr("._-", name[i])))
			return 0;
	return 1;
}

char *
sbx_snap_find_in(const char *root, const char *id_or_name, char **id_out)
{
	char *p, target[64];
	struct stat st;
	ssize_t n;

	if (sbx_snap_valid_id(id_or_name)) {
		snprintf(target, sizeof target, "%s", id_or_name);
	} else if (sbx_snap_valid_name(id_or_name)) {
		p = sbx_xasprintf("%s/.names/%s", root, id_or_name);
		n = readlink(p, target, sizeof target - 1);
		free(p);
		if (n <= 0)
			return NULL;
		target[n] = '\0';
		if (!sbx_snap_valid_id(target))
			return NULL;
	} else
		return NULL;
	p = sbx_xasprintf("%s/%s/meta.json", root, target);
	if (stat(p, &st) < 0) {
		free(p);
		return NULL;
	}
	free(p);
	if (id_out)
		*id_out = sbx_xstrdup(target);
	return sbx_xasprintf("%s/%s", root, target);
}

/* The directory of a snapshot by id or name, NULL when there is none. */
static char *
snap_find(const char *id_or_name, char **id_out)
{
	return sbx_snap_find_in(sbx_snap_root(), id_or_name, id_out);
}

json_t *
sbx_snap_meta_in(const char *dir, const char *id_or_name,
    struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/meta.json", dir);
	json_t *m = json_load_file(p, 0, NULL);

	if (!json_is_object(m)) {
		sbx_err_set(err, SBX_EX_DATA, "snapshot '%s': bad '%s'",
		    id_or_name, p);
		json_decref(m);
		m = NULL;
	}
	free(p);
	return m;
}

json_t *
sbx_snap_get(const char *id_or_name, struct sbx_err *err)
{
	char *dir;
	json_t *m;

	if (!(dir = snap_find(id_or_name, NULL))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'",
		    id_or_name);
		return NULL;
	}
	m = sbx_snap_meta_in(dir, id_or_name, err);
	free(dir);
	return m;
}

int
sbx_snap_list_in(const char *root, int (*fn)(json_t *meta, void *arg),
    void *arg, struct sbx_err *err)
{
	DIR *d = opendir(root);
	struct dirent *e;
	struct sbx_err ignored;
	json_t *m;
	char *p;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : sbx_err_set(err, SBX_EX_FAIL,
		    "cannot open '%s':", root);
	while (!rc && (e = readdir(d))) {
		if (!sbx_snap_valid_id(e->d_name))
			continue;
		/* One being taken or removed has no meta.json. */
		p = sbx_xasprintf("%s/%s", root, e->d_name);
		m = sbx_snap_meta_in(p, e->d_name, &ignored);
		free(p);
		if (m)
			rc = fn(m, arg);
		json_decref(m);
	}
	closedir(d);
	return rc;
}

int
sbx_snap_list(int (*fn)(json_t *meta, void *arg), void *arg,
    struct sbx_err *err)
{
	return sbx_snap_list_in(sbx_snap_root(), fn, arg, err);
}

void
sbx_snap_users_in(const char *dir, int (*valid)(const char *),
    const char *id, struct sbx_buf *b)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	json_t *m, *v;
	size_t i;
	char *p;

	while (d && (e = readdir(d))) {
		if (!valid(e->d_name) || !strcmp(e->d_name, id))
			continue;
		p = sbx_xasprintf("%s/%s/meta.json", dir, e->d_name);
		m = json_load_file(p, 0, NULL);
		free(p);
		json_array_foreach(json_object_get(m, "layers"), i, v)
			if (json_is_string(v) && !strcmp(json_string_value(v),
			    id)) {
				if (b->len)
					sbx_buf_add(b, ", ", 2);
				sbx_buf_add(b, e->d_name, strlen(e->d_name));
				break;
			}
		json_decref(m);
	}
	if (d)
		closedir(d);
}

/* The sandboxes, then the snapshots of them, whose layers hold id
 * (comma-separated), or NULL. */
static char *
users_of(const char *id)
{
	struct sbx_buf b;

	memset(&b, 0, sizeof b);
	sbx_snap_users_in(sbx_local_root(), sbx_local_valid_id, id, &b);
	sbx_snap_users_in(sbx_snap_root(), sbx_snap_valid_id, id, &b);
	if (!b.len) {
		sbx_buf_release(&b);
		return NULL;
	}
	sbx_buf_add(&b, "", 1);
	return b.data;
}

int
sbx_snap_claim_name_in(const char *root, const char *name, const char *sid,
    struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/.names", root), *other;
	int rc = 0;

	mkdir(p, 0700);
	free(p);
	p = sbx_xasprintf("%s/.names/%s", root, name);
	if (symlink(sid, p) == 0) {
		/* claimed */
	} else if (errno != EEXIST) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot claim the snapshot "
		    "name '%s':", name);
	} else if ((other = sbx_snap_find_in(root, name, NULL))) {
		free(other);
		rc = sbx_err_set(err, SBX_EX_FAIL, "the snapshot name '%s' is "
		    "in use", name);
	} else if (unlink(p) < 0 || symlink(sid, p) < 0) {
		/* It named a snapshot that is gone: take it over. */
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot claim the snapshot "
		    "name '%s':", name);
	}
	free(p);
	return rc;
}

/* Meta.json of snapshot dir with its "name" set (name) or dropped. */
static int
set_meta_name(const char *dir, const char *name, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/meta.json", dir), *text;
	json_t *m = sbx_json_load_object(p, err);
	int rc = -1;

	if (m) {
		if (name)
			json_object_set_new(m, "name", json_string(name));
		else
			json_object_del(m, "name");
		text = json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER);
		rc = sbx_file_write_atomic(p, text, strlen(text), 0644, 0, err);
		free(text);
		json_decref(m);
	}
	free(p);
	return rc;
}

int
sbx_snap_take_name(const char *id, const char *name, char **was,
    struct sbx_err *err)
{
	char *dir = NULL, *odir = NULL, *oid = NULL, *p = NULL, *tmp = NULL;
	int rc = -1, lk = sbx_local_lock(sbx_snap_root(), 1);

	*was = NULL;
	if (!sbx_snap_valid_name(name)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid snapshot name '%s'",
		    name);
		goto out;
	}
	if (!sbx_snap_valid_id(id) || !(dir = snap_find(id, NULL))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'", id);
		goto out;
	}
	if ((odir = snap_find(name, &oid)) && !strcmp(oid, id)) {
		rc = 0;
		goto out;
	}
	/* The name's link replaced at once, then each meta told. */
	p = sbx_xasprintf("%s/.names", sbx_snap_root());
	mkdir(p, 0700);
	free(p);
	p = sbx_xasprintf("%s/.names/%s", sbx_snap_root(), name);
	tmp = sbx_xasprintf("%s/.names/.%s.%ld", sbx_snap_root(), name,
	    (long)getpid());
	unlink(tmp);
	if (symlink(id, tmp) < 0 || rename(tmp, p) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot name snapshot '%s' '%s':",
		    id, name);
		unlink(tmp);
		goto out;
	}
	if (set_meta_name(dir, name, err) < 0 || (odir && set_meta_name(odir,
	    NULL, err) < 0))
		goto out;
	if (odir) {
		*was = oid;
		oid = NULL;
	}
	rc = 0;
out:
	if (lk >= 0)
		close(lk);
	free(tmp);
	free(p);
	free(oid);
	free(odir);
	free(dir);
	return rc;
}

int
sbx_snap_rm(const char *id_or_name, struct sbx_err *err)
{
	char *id = NULL, *dir, *users = NULL, *p;
	json_t *m;
	int rc = 0, lk = sbx_local_lock(sbx_snap_root(), 1);

	if (!(dir = snap_find(id_or_name, &id))) {
		rc = sbx_err_set(err, SBX_EX_NOSANDBOX, "no snapshot '%s'",
		    id_or_name);
		goto out;
	}
	if ((users = users_of(id))) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "snapshot '%s' is in use "
		    "by %s", id, users);
		goto out;
	}
	/* Gone from listings first: no meta.json, no snapshot. */
	m = sbx_snap_get(id, err);
	p = sbx_xasprintf("%s/meta.json", dir);
	if (unlink(p) < 0) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':", p);
		free(p);
		json_decref(m);
		goto out;
	}
	free(p);
	if (sbx_json_str(m, "name"))
		sbx_local_release_name(sbx_snap_root(), sbx_json_str(m, "name"),
		    id);
	json_decref(m);
	if (sbx_rmtree(dir) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':", dir);
out:
	if (lk >= 0)
		close(lk);
	free(users);
	free(dir);
	free(id);
	return rc;
}

void
sbx_snap_spec(const json_t *snap, struct sbx_spec *spec, unsigned *given,
    int image_given, int workdir_given)
{
	const json_t *lim = json_object_get(snap, "limits");
	const char *k;
	json_t *v;

	spec->from = sbx_json_str(snap, "snapshot");
	if (!image_given)
		spec->image = sbx_json_str(snap, "image");
	if (!workdir_given)
		spec->workdir = sbx_json_str(snap, "workdir");
	/* Its labels under those of -l. */
	json_object_foreach((json_t *)json_object_get(snap, "labels"), k, v)
		if (spec->labels && !json_object_get(spec->labels, k))
			json_object_set(spec->labels, k, v);
	if (!(*given & SBX_CAP_MEMORY) && json_object_get(lim, "memory")) {
		spec->memory = (uint64_t)sbx_json_int(lim, "memory", 0);
		*given |= SBX_CAP_MEMORY;
	}
	if (!(*given & SBX_CAP_CPUS) && json_object_get(lim, "cpus_milli")) {
		spec->cpus_milli = (uint64_t)sbx_json_int(lim, "cpus_milli", 0);
		*given |= SBX_CAP_CPUS;
	}
	if (!(*given & SBX_CAP_PIDS) && json_object_get(lim, "pids")) {
		spec->pids = (uint64_t)sbx_json_int(lim, "pids", 0);
		*given |= SBX_CAP_PIDS;
	}
	if (!spec->timeout)
		spec->timeout = (uint64_t)sbx_json_int(lim, "timeout", 0);
	/* A docker snapshot's runtime (gVisor's stays gVisor's). */
	if (!spec->runtime)
		spec->runtime = sbx_json_str(snap, "runtime");
}

/* --- taking one ------------------------------------------------------- */

struct copy {
	int root;          /* the tree's directory */
	uid_t base;        /* the sandbox root's host uid; shift: */
	int shift;         /* stored relative to it (0: as they are) */
	uint64_t bytes, files;
	struct link {
		dev_t dev;
		ino_t ino;
		char *path;   /* relative to root */
		int pass;     /* that made it */
	} *links;
	size_t nlinks;
	/* What the first pass saw of each inode (its ctime, which only the
	 * kernel sets), for the second to recopy what changed since. */
	struct seen {
		ino_t ino;
		long long ctime; /* ns; 0: unknown */
	} *seen;
	size_t nseen, capseen;
	long long racy;      /* ctimes from here on may change unseen */
	int pass;            /* 1: running, 2: frozen */
	int noclone;         /* FICLONE failed: not tried again */
	int root_user;       /* we are root: owners are set */
	const char *tree;    /* the tree's path */
	struct sbx_err *err;
};

static size_t
seen_slot(const struct copy *c, ino_t ino)
{
	size_t i = (size_t)(ino * 0x9e3779b97f4a7c15ull) & (c->capseen - 1);

	while (c->seen[i].ino && c->seen[i].ino != ino)
		i = (i + 1) & (c->capseen - 1);
	return i;
}

static void
seen_put(struct copy *c, const struct stat *st)
{
	long long ct = (long long)st->st_ctim.tv_sec * 1000000000 +
	    st->st_ctim.tv_nsec;
	struct seen *old = c->seen;
	size_t i, n = c->capseen;

	if ((c->nseen + 1) * 2 > c->capseen) {
		c->capseen = n ? n * 2 : 1024;
		c->seen = sbx_xcalloc(c->capseen, sizeof *c->seen);
		c->nseen = 0;
		for (i = 0; i < n; i++)
			if (old[i].ino) {
				c->seen[seen_slot(c, old[i].ino)] = old[i];
				c->nseen++;
			}
		free(old);
	}
	i = seen_slot(c, st->st_ino);
	c->nseen += !c->seen[i].ino;
	c->seen[i].ino = st->st_ino;
	/* Changed within a tick or so of the copy: not to be trusted. */
	c->seen[i].ctime = ct >= c->racy ? 0 : ct;
}

/* Whether the first pass copied this inode as it is now. */
static int
seen_same(const struct copy *c, const struct stat *st)
{
	long long ct = (long long)st->st_ctim.tv_sec * 1000000000 +
	    st->st_ctim.tv_nsec;
	size_t i;

	if (!c->capseen || !st->st_ino)
		return 0;
	i = seen_slot(c, st->st_ino);
	return c->seen[i].ino == st->st_ino && c->seen[i].ctime &&
	    c->seen[i].ctime == ct;
}

/* The overlay's own attributes are its bookkeeping of the upper layer,
 * meaningless in a lower one: all go but the opaque mark. ACLs and file
 * capabilities hold host ids of the source's range: they go too. */
static int
keep_xattr(const char *name)
{
	const char *o;

	if (!strncmp(name, "trusted.overlay.", 16))
		o = name + 16;
	else if (!strncmp(name, "user.overlay.", 13))
		o = name + 13;
	else
		return strncmp(name, "system.posix_acl_", 17) &&
		    strcmp(name, "security.capability");
	return !strcmp(o, "opaque");
}

static int
copy_xattrs(int sdir, int ddir, const char *name, struct copy *c)
{
	char sp[64 + NAME_MAX], dp[64 + NAME_MAX], list[4096], val[4096];
	ssize_t n, vn, i;

	snprintf(sp, sizeof sp, "/proc/self/fd/%d/%s", sdir, name);
	snprintf(dp, sizeof dp, "/proc/self/fd/%d/%s", ddir, name);
	if ((n = llistxattr(sp, list, sizeof list)) < 0)
		return errno == ENOTSUP ? 0 : sbx_err_set(c->err, SBX_EX_FAIL,
		    "cannot list the attributes of '%s':", name);
	for (i = 0; i < n; i += (ssize_t)strlen(list + i) + 1) {
		if (!keep_xattr(list + i))
			continue;
		if ((vn = lgetxattr(sp, list + i, val, sizeof val)) < 0 ||
		    lsetxattr(dp, list + i, val, (size_t)vn, 0) < 0)
			return sbx_err_set(c->err, SBX_EX_FAIL, "cannot copy "
			    "the attribute '%s' of '%s':", list + i, name);
	}
	return 0;
}

/* Owner, mode, attributes and times of name in ddir as st says. */
static int
set_attrs(int sdir, int ddir, const char *name, const struct stat *st,
    struct copy *c)
{
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	uid_t uid = st->st_uid;
	gid_t gid = st->st_gid;

	if (c->shift && uid >= c->base && uid - c->base < SBX_UID_RANGE)
		uid -= c->base;
	if (c->shift && gid >= c->base && gid - c->base < SBX_UID_RANGE)
		gid -= c->base;
	if (c->root_user && fchownat(ddir, name, uid, gid,
	    AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_set(c->err, SBX_EX_FAIL, "cannot set the owner "
		    "of '%s':", name);
	if (!S_ISLNK(st->st_mode) && fchmodat(ddir, name, st->st_mode &
	    07777, 0) < 0)
		return sbx_err_set(c->err, SBX_EX_FAIL, "cannot set the mode "
		    "of '%s':", name);
	if (copy_xattrs(sdir, ddir, name, c) < 0)
		return -1;
	if (utimensat(ddir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_set(c->err, SBX_EX_FAIL, "cannot set the times "
		    "of '%s':", name);
	return 0;
}

/* set_attrs for a regular file, on its open fds: fewer calls, no path
 * walks (the umask is 0 meanwhile: out has its mode from its creation). */
static int
reg_attrs(int in, int out, const struct stat *st, struct copy *c)
{
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	char list[4096], val[4096];
	uid_t uid = st->st_uid;
	gid_t gid = st->st_gid;
	ssize_t n, vn, i;

	if (c->shift && uid >= c->base && uid - c->base < SBX_UID_RANGE)
		uid -= c->base;
	if (c->shift && gid >= c->base && gid - c->base < SBX_UID_RANGE)
		gid -= c->base;
	/* Made by root: 0:0 already, but under a setgid directory. */
	if (c->root_user && (uid || gid || c->pass == 2) &&
	    fchown(out, uid, gid) < 0)
		return -1;
	/* A chown drops the set-id bits. */
	if ((st->st_mode & 07000) && fchmod(out, st->st_mode & 07777) < 0)
		return -1;
	if ((n = flistxattr(in, list, sizeof list)) < 0 && errno != ENOTSUP)
		return -1;
	for (i = 0; i < n; i += (ssize_t)strlen(list + i) + 1) {
		if (!keep_xattr(list + i))
			continue;
		if ((vn = fgetxattr(in, list + i, val, sizeof val)) < 0 ||
		    fsetxattr(out, list + i, val, (size_t)vn, 0) < 0)
			return -1;
	}
	return futimens(out, ts);
}

/* Data: shared blocks where the filesystem can (btrfs, xfs), else a
 * copy whose holes stay holes; a small file at once. */
static int
copy_data(int in, int out, off_t size, struct copy *c)
{
	char buf[16384];
	ssize_t n;

	if (!c->noclone) {
		if (ioctl(out, FICLONE, in) == 0)
			return 0;
		c->noclone = errno == EOPNOTSUPP || errno == EXDEV ||
		    errno == EINVAL || errno == ENOTTY;
	}
	if (size <= (off_t)sizeof buf) {
		if ((n = read(in, buf, sizeof buf)) < 0 || (n > 0 &&
		    write(out, buf, (size_t)n) != n))
			return -1;
		return n == size ? 0 : sbx_local_copy_sparse(in, out);
	}
	if (ftruncate(out, size) < 0)
		return -1;
	return sbx_local_copy_sparse(in, out);
}

static int copy_dir(int sdir, int ddir, char *path, size_t plen,
    struct copy *c);

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
copy_entry(int sdir, int ddir, const char *name, const struct stat *stp,
    char *path, size_t plen, struct copy *c)
{
	char target[4096];
	struct stat st;
	size_t i, nlen = strlen(name);
	ssize_t n;
	int in, out, rc;

	if (!stp && fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_set(c->err, SBX_EX_FAIL, "cannot stat '%s':",
		    name);
	if (stp)
		st = *stp;
	if (!S_ISDIR(st.st_mode))
		seen_put(c, &st);
	if (plen + nlen + 2 > PATH_MAX)
		return sbx_err_set(c->err, SBX_EX_FAIL, "path too long under "
		    "'%s'", path);
	path[plen] = plen ? '/' : '\0';
	memcpy(path + plen + !!plen, name, nlen + 1);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		/* The second name of an inode: a link to the first. */
		for (i = 0; i < c->nlinks; i++)
			if (c->links[i].dev == st.st_dev &&
			    c->links[i].ino == st.st_ino)
				break;
		/* (A name copied by this pass: the second pass makes every
		 * name of a changed inode anew.) */
		if (i < c->nlinks && c->links[i].pass == c->pass) {
			rc = linkat(c->root, c->links[i].path, ddir, name, 0);
			path[plen] = '\0';
			return rc < 0 ? sbx_err_set(c->err, SBX_EX_FAIL,
			    "cannot link '%s/%s':", path, name) : 0;
		}
		if (i == c->nlinks) {
			c->links = sbx_xrealloc(c->links, (c->nlinks + 1) *
			    sizeof *c->links);
			c->nlinks++;
		} else
			free(c->links[i].path);
		c->links[i] = (struct link){st.st_dev, st.st_ino,
		    sbx_xstrdup(path), c->pass};
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR:
		if (mkdirat(ddir, name, 0700) < 0)
			return sbx_err_set(c->err, SBX_EX_FAIL, "cannot create "
			    "'%s':", path);
		in = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		out = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		rc = in < 0 || out < 0 ? sbx_err_set(c->err, SBX_EX_FAIL,
		    "cannot open '%s':", path) : copy_dir(in, out, path,
		    plen + !!plen + nlen, c);
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
		path[plen] = '\0';
		if (rc < 0)
			return -1;
		break;
	case S_IFREG:
		in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777);
		rc = in < 0 || out < 0 || copy_data(in, out, st.st_size, c) <
		    0 || reg_attrs(in, out, &st, c) < 0;
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
		path[plen] = '\0';
		if (rc)
			return sbx_err_set(c->err, SBX_EX_FAIL, "cannot copy "
			    "'%s%s%s':", path, plen ? "/" : "", name);
		c->bytes += (uint64_t)st.st_size;
		c->files++;
		return 0;
	case S_IFLNK:
		n = readlinkat(sdir, name, target, sizeof target - 1);
		if (n < 0)
			return sbx_err_set(c->err, SBX_EX_FAIL, "cannot read "
			    "'%s':", path);
		target[n] = '\0';
		if (symlinkat(target, ddir, name) < 0)
			return sbx_err_set(c->err, SBX_EX_FAIL, "cannot create "
			    "'%s':", path);
		break;
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
		/* Whiteouts (0/0 character devices) among them. */
		if (mknodat(ddir, name, st.st_mode & (S_IFMT | 0600),
		    st.st_rdev) < 0)
			return sbx_err_set(c->err, SBX_EX_FAIL, "cannot create "
			    "'%s':", path);
		break;
	default:
		/* A socket is of a process, not of the files. */
		return 0;
	}
	c->files++;
	path[plen] = '\0';
	return set_attrs(sdir, ddir, name, &st, c);
}

static int
copy_dir(int sdir, int ddir, char *path, size_t plen, struct copy *c)
{
	int fd = dup(sdir), rc = 0;
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return sbx_err_set(c->err, SBX_EX_FAIL, "cannot read '%s':",
		    path);
	}
	rewinddir(d);
	while (!rc && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = copy_entry(sdir, ddir, e->d_name, NULL, path, plen,
			    c);
	closedir(d);
	return rc;
}

/* The names in dir, sorted; -1 when it cannot be read. */
static int
names_of(int dir, char ***names, size_t *n)
{
	int fd = dup(dir);
	struct dirent *e;
	size_t cap = 0;
	DIR *d;

	*names = NULL;
	*n = 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* The fd's offset is dir's: where its last reader left it. */
	rewinddir(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			*names = sbx_xrealloc(*names, cap * sizeof **names);
		}
		(*names)[(*n)++] = sbx_xstrdup(e->d_name);
	}
	closedir(d);
	if (*n)
		qsort(*names, *n, sizeof **names, cmp_name);
	return 0;
}

static void
free_names(char **names, size_t n)
{
	while (n)
		free(names[--n]);
	free(names);
}

/* Remove name (any type) from the tree's directory ddir at path. */
static int
drop(int ddir, const char *name, const char *path, struct copy *c)
{
	char *p;
	int rc;

	if (unlinkat(ddir, name, 0) == 0 || errno == ENOENT)
		return 0;
	p = sbx_xasprintf("%s/%s%s%s", c->tree, path, *path ? "/" : "",
	    name);
	rc = sbx_rmtree(p);
	free(p);
	return rc < 0 ? sbx_err_set(c->err, SBX_EX_FAIL, "cannot remove "
	    "'%s/%s':", path, name) : 0;
}

/* The second pass, frozen: the tree made what sdir is now, recopying
 * only what changed since the first (directories are walked again). */
static int
sync_dir(int sdir, int ddir, char *path, size_t plen, struct copy *c)
{
	char **sn, **dn;
	size_t ns, nd, i = 0, j = 0, nlen;
	struct stat st, dt;
	int rc = 0, in, out, k;

	if (names_of(sdir, &sn, &ns) < 0 || names_of(ddir, &dn, &nd) < 0)
		return sbx_err_set(c->err, SBX_EX_FAIL, "cannot read '%s':",
		    path);
	while (!rc && (i < ns || j < nd)) {
		k = i == ns ? 1 : j == nd ? -1 : strcmp(sn[i], dn[j]);
		if (k > 0) {
			/* Gone from the sandbox since. */
			rc = drop(ddir, dn[j++], path, c);
			continue;
		}
		if (fstatat(sdir, sn[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = sbx_err_set(c->err, SBX_EX_FAIL, "cannot "
				    "stat '%s':", sn[i]);
			i++;
			j += !k;
			continue;
		}
		if (S_ISDIR(st.st_mode) && !k && fstatat(ddir, dn[j], &dt,
		    AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(dt.st_mode)) {
			nlen = strlen(sn[i]);
			if (plen + nlen + 2 > PATH_MAX) {
				rc = sbx_err_set(c->err, SBX_EX_FAIL, "path too "
				    "long under '%s'", path);
				break;
			}
			path[plen] = plen ? '/' : '\0';
			memcpy(path + plen + !!plen, sn[i], nlen + 1);
			in = openat(sdir, sn[i], O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			out = openat(ddir, dn[j], O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			rc = in < 0 || out < 0 ? sbx_err_set(c->err,
			    SBX_EX_FAIL, "cannot open '%s':", path) :
			    sync_dir(in, out, path, plen + !!plen + nlen, c);
			if (in >= 0)
				close(in);
			if (out >= 0)
				close(out);
			path[plen] = '\0';
			c->files++;
			if (!rc)
				rc = set_attrs(sdir, ddir, sn[i], &st, c);
		} else if (!k && !S_ISDIR(st.st_mode) && seen_same(c, &st)) {
			/* As the first pass copied it. */
			c->files++;
			c->bytes += S_ISREG(st.st_mode) ? (uint64_t)st.st_size :
			    0;
		} else if (!k && (rc = drop(ddir, dn[j], path, c)) < 0) {
			break;
		} else
			rc = copy_entry(sdir, ddir, sn[i], &st, path, plen, c);
		i++;
		j += !k;
	}
	free_names(sn, ns);
	free_names(dn, nd);
	return rc;
}

static long long
mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* What every backend's snapshot meta says first (sbx-snapshot(1)'s
 * OUTPUT): the ids, when, the source's image, workdir, the names of its
 * -e (under env_key of its meta), labels and limits. */
json_t *
sbx_snap_meta_new(const char *backend, const char *sid, const char *id,
    const char *name, const json_t *sm, const char *env_key)
{
	char created[64];
	json_t *m = json_object(), *lim = json_object();
	long long now = sbx_now();

	sbx_time_fmt(now, created, sizeof created);
	json_object_set_new(m, "snapshot", json_string(sid));
	json_object_set_new(m, "name", name ? json_string(name) :
	    json_null());
	json_object_set_new(m, "created", json_string(created));
	json_object_set_new(m, "created_epoch", json_integer(now));
	json_object_set_new(m, "backend", json_string(backend));
	json_object_set_new(m, "source", json_string(id));
	/* As sbx-create was given it: what --from makes a sandbox of. */
	json_object_set(m, "image", json_is_string(json_object_get(sm,
	    "image_ref")) ? json_object_get(sm, "image_ref") :
	    json_object_get(sm, "image") ? json_object_get(sm, "image") :
	    json_string("host"));
	json_object_set(m, "image_digest", json_object_get(sm,
	    "image_digest") ? json_object_get(sm, "image_digest") :
	    json_null());
	json_object_set(m, "workdir", json_object_get(sm, "workdir"));
	/* The values of -e are never written down: their names only. */
	json_object_set(m, "env_names", json_is_array(json_object_get(sm,
	    env_key)) ? json_object_get(sm, env_key) : json_array());
	json_object_set(m, "labels", json_is_object(json_object_get(sm,
	    "labels")) ? json_object_get(sm, "labels") : json_object());
	if (sbx_json_int(sm, "memory", 0))
		json_object_set(lim, "memory", json_object_get(sm, "memory"));
	if (sbx_json_int(sm, "cpus_milli", 0))
		json_object_set(lim, "cpus_milli", json_object_get(sm,
		    "cpus_milli"));
	if (sbx_json_int(sm, "pids_max", 0))
		json_object_set(lim, "pids", json_object_get(sm, "pids_max"));
	if (sbx_json_int(sm, "disk", 0))
		json_object_set(lim, "disk", json_object_get(sm, "disk"));
	if (sbx_json_int(sm, "timeout", 0))
		json_object_set(lim, "timeout", json_object_get(sm,
		    "timeout"));
	json_object_set_new(m, "limits", lim);
	return m;
}

/* The meta.json of a new snapshot of the sandbox whose meta is sm. */
static json_t *
snap_meta(const char *sid, const char *id, const char *name, json_t *sm,
    json_t *layers, const struct copy *c, long long pause_us)
{
	json_t *m = sbx_snap_meta_new("local", sid, id, name, sm,
	    "env_names");

	json_object_set_new(m, "size", json_integer((json_int_t)c->bytes));
	json_object_set_new(m, "files", json_integer((json_int_t)c->files));
	json_object_set_new(m, "memory", json_false());
	json_object_set_new(m, "pause_ms", json_real((double)pause_us /
	    1000.0));
	/* This tree over its parents', over the image. */
	json_object_set(m, "layers", layers);
	json_object_set_new(m, "owners", json_string(c->shift ? "sandbox" :
	    "host"));
	return m;
}

/* What a killed sbx-snapshot (or rm) left in the store at root: a
 * snapshot's directory with no meta.json. Only while no take is at work
 * (each holds the store's lock shared): the lock is tried exclusive,
 * never waited for. */
void
sbx_snap_clean_stale(const char *root)
{
	char *p = sbx_xasprintf("%s/.lock", root);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct dirent *e;
	DIR *d;

	free(p);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 || !(d = opendir(root))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		if (!sbx_snap_valid_id(e->d_name))
			continue;
		p = sbx_xasprintf("%s/%s/meta.json", root, e->d_name);
		if (access(p, F_OK) < 0 && errno == ENOENT) {
			*strrchr(p, '/') = '\0';
			sbx_rmtree(p);
		}
		free(p);
	}
	closedir(d);
	close(fd);
}

/* A process that thaws the sandbox of cg (dir its directory) should we
 * die while it is frozen for the copy (^C, a kill), unless the user has
 * paused it meanwhile. */
static pid_t
thaw_guard(const struct sbx_cgroups *cg, const char *dir, int *wfd)
{
	char *paused;
	int done;
	pid_t pid = sbx_guard_start(wfd, &done);

	if (pid == 0) {
		paused = sbx_xasprintf("%s/" SBX_PAUSED_FILE, dir);
		if (!done && access(paused, F_OK) < 0)
			sbx_cg_freeze(cg, 0, 5000);
		_exit(0);
	}
	return pid;
}

json_t *
sbx_local_snapshot(const json_t *ref, const char *name, struct sbx_err *err)
{
	const char *want = sbx_json_str(ref, "id");
	char sid[sizeof SNAP_PREFIX + SBX_ID_LEN], hex[SBX_ID_LEN + 1];
	char *id = NULL, *dir = NULL, *sdir = NULL, *p, *text, path[PATH_MAX];
	struct copy c = {.root = -1, .err = err};
	struct sbx_cgroups cg = {0};
	int src = -1, mfd = -1, froze = 0, named = 0, made = 0, i, lk = -1;
	int gw = -1;
	pid_t guard = -1;
	mode_t mask = (mode_t)-1;
	long long t0 = 0, t1 = 0;
	json_t *sm = NULL, *layers = NULL, *out = NULL, *parent;
	struct stat st;

	if (!want || !(dir = sbx_local_find(want, &id))) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    want ? want : "?");
		return NULL;
	}
	if (name && !sbx_snap_valid_name(name)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid snapshot name '%s'",
		    name);
		goto out;
	}
	/* Its parents (a sandbox made --from) stay until this one's
	 * meta.json names them. */
	sbx_snap_clean_stale(sbx_snap_root());
	lk = sbx_local_lock(sbx_snap_root(), 0);
	p = sbx_xasprintf("%s/meta.json", dir);
	sm = json_load_file(p, 0, NULL);
	free(p);
	if (!json_is_object(sm)) {
		sbx_err_set(err, SBX_EX_FAIL, "sandbox '%s' is not made yet",
		    id);
		goto out;
	}
	layers = json_array();
	if (sbx_json_str(sm, "snapshot")) {
		/* Made from one: its tree and its parents' stay below. */
		if (!(parent = sbx_snap_get(sbx_json_str(sm, "snapshot"),
		    err)))
			goto out;
		json_array_extend(layers, json_object_get(parent, "layers"));
		json_decref(parent);
		if (json_array_size(layers) >= SBX_SNAP_DEPTH) {
			sbx_err_set(err, SBX_EX_USAGE, "sandbox '%s' is %d "
			    "snapshots deep: no more fit (take one of a "
			    "sandbox made otherwise)", id, SBX_SNAP_DEPTH);
			goto out;
		}
	}
	if (sbx_mkdirs(sbx_snap_root(), 0711, err) < 0)
		goto out;
	for (i = 0; i < 16 && !made; i++) {
		sbx_local_new_id(hex);
		snprintf(sid, sizeof sid, SNAP_PREFIX "%s", hex);
		free(sdir);
		sdir = sbx_xasprintf("%s/%s", sbx_snap_root(), sid);
		if (mkdir(sdir, 0711) == 0)
			made = 1;
		else if (errno != EEXIST)
			break;
	}
	if (!made) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", sdir);
		goto out;
	}
	json_array_insert_new(layers, 0, json_string(sid));
	if (name && sbx_snap_claim_name_in(sbx_snap_root(), name, sid,
	    err) < 0)
		goto out;
	named = name != NULL;
	p = sbx_xasprintf("%s/tree", sdir);
	if (mkdir(p, 0755) < 0 || (c.root = open(p, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", p);
		free(p);
		goto out;
	}
	free(p);
	/* The upper: on its disk (mounted once more, out of sight) or in
	 * its directory. Found before the freeze, which it does not need. */
	if ((mfd = sbx_local_disk_open(dir, err)) == -1)
		goto out;
	if (mfd >= 0)
		src = openat(mfd, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else {
		p = sbx_xasprintf("%s/upper", dir);
		src = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		free(p);
	}
	if (src < 0 || fstat(src, &st) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open the upper layer of "
		    "'%s':", id);
		goto out;
	}
	c.base = (uid_t)sbx_json_int(sm, "uid_base", (long long)geteuid());
	c.shift = c.root_user = geteuid() == 0;
	/* Files are made with their modes (reg_attrs). */
	mask = umask(0);
	sbx_cg_find(&cg, id);
	/* First pass, while it runs: everything. */
	c.tree = p = sbx_xasprintf("%s/tree", sdir);
	c.pass = 1;
	{
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		c.racy = (long long)now.tv_sec * 1000000000 + now.tv_nsec -
		    SNAP_RACY_NS;
	}
	/* Written back, a file's pages are write-protected again: a write
	 * through a shared mapping from now on faults, and moves its ctime
	 * past the cutoff. */
	syncfs(src);
	path[0] = '\0';
	i = copy_dir(src, c.root, path, 0, &c);
	if (i < 0)
		goto out;
	c.pass = 2;
	c.bytes = c.files = 0;
	t0 = mono_us();
	/* A paused or stopped one stays as it is; a running one is frozen
	 * for the copy, so that it is of one moment. */
	p = sbx_xasprintf("%s/" SBX_PAUSED_FILE, dir);
	if (access(p, F_OK) < 0 && (cg.unified || cg.freezer)) {
		guard = thaw_guard(&cg, dir, &gw);
		if (sbx_cg_freeze(&cg, 1, 5000) < 0) {
			sbx_cg_freeze(&cg, 0, 1000);
			sbx_err_set(err, SBX_EX_FAIL, "cannot freeze '%s':", id);
			free(p);
			goto out;
		}
		froze = 1;
	}
	free(p);
	path[0] = '\0';
	/* Second pass, frozen: what changed meanwhile. */
	i = sync_dir(src, c.root, path, 0, &c);
	if (!i) {
		struct stat rst = st;

		/* The root of the tree as the upper's root. */
		i = set_attrs(src, c.root, ".", &rst, &c);
	}
	if (froze && sbx_cg_freeze(&cg, 0, 5000) < 0 && !i)
		i = sbx_err_set(err, SBX_EX_FAIL, "cannot thaw '%s':", id);
	t1 = mono_us();
	if (i < 0)
		goto out;
	out = snap_meta(sid, id, name, sm, layers, &c, t1 - t0);
	text = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
	p = sbx_xasprintf("%s/meta.json", sdir);
	i = sbx_file_write_atomic(p, text, strlen(text), 0644, 0, err);
	free(p);
	free(text);
	if (i < 0) {
		json_decref(out);
		out = NULL;
	}
out:
	if (mask != (mode_t)-1)
		umask(mask);
	if (!out && froze && t1 == 0)
		sbx_cg_freeze(&cg, 0, 5000);
	sbx_guard_end(guard, gw, 1);
	if (!out && named)
		sbx_local_release_name(sbx_snap_root(), name, sid);
	if (!out && made)
		sbx_rmtree(sdir);
	for (i = 0; i < (int)c.nlinks; i++)
		free(c.links[i].path);
	free(c.links);
	if (c.root >= 0)
		close(c.root);
	free((char *)c.tree);
	free(c.seen);
	if (src >= 0)
		close(src);
	if (mfd >= 0)
		close(mfd);
	if (lk >= 0)
		close(lk);
	sbx_cg_release(&cg);
	json_decref(layers);
	json_decref(sm);
	free(sdir);
	free(dir);
	free(id);
	return out;
}

char *
sbx_snap_tree(const char *sid)
{
	char *dir = snap_find(sid, NULL), *p;

	if (!dir)
		return NULL;
	p = sbx_xasprintf("%s/tree", dir);
	free(dir);
	return p;
}
