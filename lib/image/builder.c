/* builder.c - the local builder's steps: a stage starts from an image of
 * the store (or scratch), each RUN, COPY or ADD runs over an overlay of
 * the stage's layers and its upper directory becomes the next layer (a
 * tar blob with OCI whiteouts, and the directory itself, kept to stack
 * under the next steps), cached by (parent, instruction, files); a commit
 * makes it an image of the store like a pulled one.
 *
 *   ROOT/build/layers/HEX   a step's upper directory (HEX: its tar's)
 *   ROOT/build/cache/KEY    {"digest","size"}: the layer of a step key
 *   ROOT/build/tmp/...      a step being made
 *   ROOT/build/.lock        shared by every stage alive, so that prune
 *                           (exclusive, never waiting) leaves a build's
 *                           blobs, layers and steps alone */
#include <sys/file.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/openat2.h>

#include <archive.h>
#include <archive_entry.h>
#include <nettle/sha2.h>

#include "image/builder.h"
#include "local/local.h"

#define LAYER_TAR "application/vnd.oci.image.layer.v1.tar"
#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:" \
	"/usr/bin:/sbin:/bin"

struct sbx_stage {
	char *root;       /* the store */
	json_t *cfg;      /* the image config blob, whole */
	json_t *layers;   /* the manifest's layer descriptors, bottom first */
	char **lowers;    /* the directories they are, bottom first */
	size_t nlowers;
	char key[65];     /* the cache key of what it is now */
	int quiet;
	const char *step; /* "step 3/7", for the output */
	int lock;         /* ROOT/build/.lock, shared while it lives */
};

extern char **environ;

static void
hex(const unsigned char *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* key := sha256(key, text, extra) */
static void
chain(char key[65], const char *text, const char *extra)
{
	struct sha256_ctx c;
	unsigned char d[SHA256_DIGEST_SIZE];

	sha256_init(&c);
	sha256_update(&c, 64, (const uint8_t *)key);
	sha256_update(&c, strlen(text) + 1, (const uint8_t *)text);
	if (extra)
		sha256_update(&c, strlen(extra) + 1, (const uint8_t *)extra);
	sha256_digest(&c, sizeof d, d);
	hex(d, sizeof d, key);
}

static json_t *
new_config(void)
{
	return json_pack("{s:s,s:s,s:{},s:{s:s,s:[]},s:[]}", "architecture",
	    "amd64", "os", "linux", "config", "rootfs", "type", "layers",
	    "diff_ids", "history");
}

json_t *
sbx_stage_config(struct sbx_stage *st)
{
	json_t *c = json_object_get(st->cfg, "config");

	if (!json_is_object(c)) {
		c = json_object();
		json_object_set_new(st->cfg, "config", c);
	}
	return c;
}

void
sbx_stage_quiet(struct sbx_stage *st, int quiet)
{
	st->quiet = quiet;
}

void
sbx_stage_step(struct sbx_stage *st, const char *step)
{
	st->step = step;
}

void
sbx_stage_history(struct sbx_stage *st, const char *created_by, int empty)
{
	json_t *h = json_object_get(st->cfg, "history");
	char t[32];

	if (!json_is_array(h)) {
		h = json_array();
		json_object_set_new(st->cfg, "history", h);
	}
	sbx_time_fmt(sbx_now(), t, sizeof t);
	json_array_append_new(h, json_pack("{s:s,s:s}", "created", t,
	    "created_by", created_by));
	if (empty)
		json_object_set_new(json_array_get(h, json_array_size(h) - 1),
		    "empty_layer", json_true());
	/* Config steps change what the next steps see: the config as it
	 * now is (after ARG substitution) is part of the key. */
	if (empty) {
		char *c = json_dumps(sbx_stage_config(st), JSON_COMPACT |
		    JSON_SORT_KEYS);

		chain(st->key, created_by, c ? c : "");
		free(c);
	}
}

void
sbx_stage_free(struct sbx_stage *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->nlowers; i++)
		free(st->lowers[i]);
	free(st->lowers);
	json_decref(st->cfg);
	json_decref(st->layers);
	free(st->root);
	if (st->lock >= 0)
		close(st->lock);
	free(st);
}

/* The build lock, shared, on st (-1 when it cannot be had: the build
 * goes on, as unprotected from a prune as before). */
static void
stage_lock(struct sbx_stage *st)
{
	struct sbx_err e = {0};
	char *d = sbx_xasprintf("%s/build", st->root), *p;

	st->lock = -1;
	if (sbx_mkdirs(d, 0755, &e) == 0) {
		p = sbx_xasprintf("%s/.lock", d);
		st->lock = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		free(p);
	}
	free(d);
	while (st->lock >= 0 && flock(st->lock, LOCK_SH) < 0)
		if (errno != EINTR) {
			close(st->lock);
			st->lock = -1;
		}
}

static void
add_lower(struct sbx_stage *st, const char *dir)
{
	st->lowers = sbx_xrealloc(st->lowers, (st->nlowers + 1) *
	    sizeof *st->lowers);
	st->lowers[st->nlowers++] = sbx_xstrdup(dir);
}

struct sbx_stage *
sbx_stage_clone(const struct sbx_stage *from)
{
	struct sbx_stage *st = sbx_xcalloc(1, sizeof *st);

	st->root = sbx_xstrdup(from->root);
	stage_lock(st);
	st->cfg = json_deep_copy(from->cfg);
	st->layers = json_deep_copy(from->layers);
	for (size_t i = 0; i < from->nlowers; i++)
		add_lower(st, from->lowers[i]);
	memcpy(st->key, from->key, sizeof st->key);
	st->quiet = from->quiet;
	return st;
}

struct sbx_stage *
sbx_stage_from(const char *ref, struct sbx_err *err)
{
	struct sbx_stage *st = sbx_xcalloc(1, sizeof *st);
	struct sbx_image_use u;
	struct sbx_err e = {0};
	json_t *m = NULL, *pulled = NULL;
	char *p;

	st->root = sbx_image_root();
	stage_lock(st);
	memset(st->key, '0', 64);
	if (!strcmp(ref, "scratch")) {
		st->cfg = new_config();
		st->layers = json_array();
		chain(st->key, "scratch", NULL);
		return st;
	}
	if (sbx_image_lookup(ref, &u, &e) < 0) {
		if (!sbx_image_pull) {
			sbx_err_set(err, SBX_EX_NOSANDBOX, "no image '%s' in the "
			    "store (sbx-image pull %s)", ref, ref);
			goto fail;
		}
		if (sbx_image_pull(ref, NULL, &pulled, err) < 0)
			goto fail;
		json_decref(pulled);
		if (sbx_image_lookup(ref, &u, err) < 0)
			goto fail;
	}
	p = sbx_image_blob_path(st->root, u.digest);
	m = sbx_json_load_object(p, err);
	free(p);
	if (m) {
		p = sbx_image_blob_path(st->root, u.config_digest ?
		    u.config_digest : u.digest);
		st->cfg = sbx_json_load_object(p, err);
		free(p);
	}
	st->layers = json_incref(json_object_get(m, "layers"));
	if (!m || !st->cfg || !json_is_array(st->layers)) {
		if (m && st->cfg)
			sbx_err_set(err, SBX_EX_DATA, "image '%s' of the store "
			    "has no layers", ref);
		sbx_image_use_release(&u);
		goto fail;
	}
	if (access(u.rootfs, F_OK) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "image '%s' has no root "
		    "filesystem in the store (pull it again):", ref);
		sbx_image_use_release(&u);
		goto fail;
	}
	add_lower(st, u.rootfs);
	chain(st->key, u.digest, NULL);
	if (!json_is_object(json_object_get(st->cfg, "rootfs")))
		json_object_set_new(st->cfg, "rootfs", json_pack("{s:s,s:[]}",
		    "type", "layers", "diff_ids"));
	sbx_image_use_release(&u);
	json_decref(m);
	return st;
fail:
	if (err->code == SBX_EX_USAGE)
		err->code = SBX_EX_NOSANDBOX;
	json_decref(m);
	sbx_stage_free(st);
	return NULL;
}

/* --- a step's directories and its overlay -------------------------- */

struct step {
	char *tmp;    /* ROOT/build/tmp/XXXXXX: upper/ work/ merged/ src/ */
	char *upper;
	char *opts;   /* the overlay's mount options */
};

static void
step_release(struct step *s)
{
	if (s->tmp)
		sbx_rmtree(s->tmp);
	free(s->tmp);
	free(s->upper);
	free(s->opts);
	memset(s, 0, sizeof *s);
}

/* lowerdir=TOP:...:BOTTOM of st (an empty directory for scratch). */
static char *
lowerdirs(const struct sbx_stage *st, const char *empty)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char *s;

	sbx_buf_add(&b, "lowerdir=", 9);
	for (size_t i = st->nlowers; i-- > 0;) {
		sbx_buf_add(&b, st->lowers[i], strlen(st->lowers[i]));
		if (i)
			sbx_buf_add(&b, ":", 1);
	}
	if (!st->nlowers)
		sbx_buf_add(&b, empty, strlen(empty));
	sbx_buf_add(&b, "", 1);
	s = sbx_xstrdup(b.data);
	sbx_buf_release(&b);
	return s;
}

static int
step_init(struct step *s, const struct sbx_stage *st, struct sbx_err *err)
{
	char *d = sbx_xasprintf("%s/build/tmp", st->root), *low;
	static const char *const sub[] = {"upper", "work", "merged", "src",
	    "empty"};
	int rc;

	memset(s, 0, sizeof *s);
	if (geteuid() != 0) {
		free(d);
		return sbx_err_set(err, SBX_EX_FAIL, "the local builder needs "
		    "root (overlay mounts)");
	}
	rc = sbx_mkdirs(d, 0700, err);
	s->tmp = sbx_xasprintf("%s/XXXXXX", d);
	free(d);
	if (rc < 0)
		return -1;
	if (!mkdtemp(s->tmp)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", s->tmp);
		free(s->tmp);
		s->tmp = NULL;
		return -1;
	}
	for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
		d = sbx_xasprintf("%s/%s", s->tmp, sub[i]);
		rc = mkdir(d, 0755);
		free(d);
		if (rc < 0)
			return sbx_err_set(err, SBX_EX_FAIL, "cannot create a "
			    "directory in '%s':", s->tmp);
	}
	s->upper = sbx_xasprintf("%s/upper", s->tmp);
	d = sbx_xasprintf("%s/empty", s->tmp);
	low = lowerdirs(st, d);
	free(d);
	s->opts = sbx_xasprintf("%s,upperdir=%s,workdir=%s/work,"
	    "redirect_dir=off,index=off,metacopy=off", low, s->upper, s->tmp);
	free(low);
	if (strlen(s->opts) >= 4000)
		return sbx_err_set(err, SBX_EX_FAIL, "too many layers for an "
		    "overlay (%zu)", st->nlowers);
	return 0;
}

/* In a child: a mount namespace of its own, the step's overlay mounted
 * at tmp/merged; a message on fd msg and exit 125 on failure. */
static void
child_fail(int msg, const char *what)
{
	char b[512];
	int n = snprintf(b, sizeof b, "%s: %s", what, strerror(errno));

	if (n > 0 && write(msg, b, (size_t)n < sizeof b ? (size_t)n :
	    sizeof b - 1) < 0)
		_exit(125);
	_exit(125);
}

static void
child_mount(const struct step *s, int msg, char **merged)
{
	if (unshare(CLONE_NEWNS) < 0)
		child_fail(msg, "cannot make a mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(msg, "cannot make the mounts private");
	*merged = sbx_xasprintf("%s/merged", s->tmp);
	if (mount("overlay", *merged, "overlay", 0, s->opts) < 0)
		child_fail(msg, "cannot mount the step's overlay");
}

/* Wait for child pid; what it said on msg (its setup failed) is err. */
static int
child_wait(pid_t pid, int msg, int *status, struct sbx_err *err)
{
	char b[512];
	ssize_t n;
	size_t got = 0;
	int st;

	while (got < sizeof b - 1 && (n = read(msg, b + got, sizeof b - 1 -
	    got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	b[got] = '\0';
	close(msg);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return sbx_err_set(err, SBX_EX_FAIL, "cannot wait for "
			    "the step:");
	if (got)
		return sbx_err_set(err, SBX_EX_FAIL, "%s", b);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

/* --- the layer: the upper directory as a tar with OCI whiteouts ----- */

struct packer {
	struct archive *a;
	struct archive_entry_linkresolver *lr;
	int fail;
	char msg[300];
};

static void
pack_write(struct packer *p, struct archive_entry *e, int dfd,
    const char *name)
{
	char buf[65536];
	ssize_t n;
	int fd;

	if (archive_write_header(p->a, e) != ARCHIVE_OK) {
		snprintf(p->msg, sizeof p->msg, "%s", archive_error_string(p->a));
		p->fail = 1;
		return;
	}
	if (archive_entry_filetype(e) != AE_IFREG || archive_entry_size(e) == 0)
		return;
	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		snprintf(p->msg, sizeof p->msg, "cannot read '%s': %s", name,
		    strerror(errno));
		p->fail = 1;
		return;
	}
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (archive_write_data(p->a, buf, (size_t)n) != n) {
			p->fail = 1;
			snprintf(p->msg, sizeof p->msg, "%s",
			    archive_error_string(p->a));
			break;
		}
	close(fd);
}

static int
cmp_names(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int
no_dots(const struct dirent *d)
{
	return strcmp(d->d_name, ".") && strcmp(d->d_name, "..");
}

/* Directory rel (dfd) of the upper into the tar, sorted. */
static void
pack_dir(struct packer *p, int dfd, const char *rel)
{
	struct dirent **ents = NULL;
	struct archive_entry *e, *spare;
	struct stat st;
	char *path, link[4096], x[8];
	int n, i, sub;

	n = scandirat(dfd, ".", &ents, no_dots, cmp_names);
	if (n < 0) {
		snprintf(p->msg, sizeof p->msg, "cannot read '%s': %s", rel,
		    strerror(errno));
		p->fail = 1;
		return;
	}
	for (i = 0; i < n && !p->fail; i++) {
		const char *name = ents[i]->d_name;

		path = *rel ? sbx_xasprintf("%s/%s", rel, name) :
		    sbx_xstrdup(name);
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			free(path);
			continue;
		}
		e = archive_entry_new();
		if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
			/* overlayfs's whiteout: OCI's ".wh.NAME". */
			char *wh = *rel ? sbx_xasprintf("%s/.wh.%s", rel, name) :
			    sbx_xasprintf(".wh.%s", name);

			archive_entry_copy_pathname(e, wh);
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, 0644);
			archive_entry_set_size(e, 0);
			archive_entry_set_mtime(e, st.st_mtim.tv_sec, 0);
			free(wh);
			pack_write(p, e, dfd, name);
			archive_entry_free(e);
			free(path);
			continue;
		}
		archive_entry_copy_pathname(e, path);
		archive_entry_copy_stat(e, &st);
		if (S_ISLNK(st.st_mode)) {
			ssize_t l = readlinkat(dfd, name, link, sizeof link - 1);

			link[l < 0 ? 0 : l] = '\0';
			archive_entry_copy_symlink(e, link);
		}
		if (!S_ISREG(st.st_mode))
			archive_entry_set_size(e, 0);
		spare = NULL;
		if (!S_ISDIR(st.st_mode))
			archive_entry_linkify(p->lr, &e, &spare);
		if (e)
			pack_write(p, e, dfd, name);
		if (spare) {
			pack_write(p, spare, dfd, name);
			archive_entry_free(spare);
		}
		archive_entry_free(e);
		if (S_ISDIR(st.st_mode) && !p->fail) {
			char *op;

			sub = openat(dfd, name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
			op = sbx_xasprintf("/proc/self/fd/%d", sub);
			/* overlayfs's opaque directory: OCI's marker. */
			if (sub >= 0 && getxattr(op, "trusted.overlay.opaque",
			    x, sizeof x) == 1 && x[0] == 'y') {
				char *o = sbx_xasprintf("%s/.wh..wh..opq", path);

				e = archive_entry_new();
				archive_entry_copy_pathname(e, o);
				archive_entry_set_filetype(e, AE_IFREG);
				archive_entry_set_perm(e, 0644);
				archive_entry_set_size(e, 0);
				pack_write(p, e, sub, o);
				archive_entry_free(e);
				free(o);
			}
			free(op);
			if (sub >= 0) {
				pack_dir(p, sub, path);
				close(sub);
			}
		}
		free(path);
	}
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
}

/* Blob from fd (read from its start) into the store: *digest. */
static int
blob_link(const char *root, int fd, char digest[72], long long *size,
    struct sbx_err *err)
{
	unsigned char d[32];
	char fdp[64], *path;
	struct stat st;

	if (lseek(fd, 0, SEEK_SET) < 0 || sbx_sha256_fd(fd, d) < 0 ||
	    fstat(fd, &st) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read a layer:");
	memcpy(digest, "sha256:", 7);
	hex(d, sizeof d, digest + 7);
	*size = st.st_size;
	path = sbx_image_blob_path(root, digest);
	snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
	if (access(path, F_OK) < 0 && (fsync(fd) < 0 || (linkat(AT_FDCWD,
	    fdp, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST))) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot store blob %s:", digest);
		free(path);
		return -1;
	}
	free(path);
	return 0;
}

static int
blob_put(const char *root, const char *data, size_t n, char digest[72],
    long long *size, struct sbx_err *err)
{
	char *dir = sbx_xasprintf("%s/blobs/sha256", root);
	int fd, rc;

	rc = sbx_mkdirs(dir, 0755, err);
	fd = rc < 0 ? -1 : open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
	free(dir);
	if (rc < 0)
		return -1;
	if (fd < 0 || sbx_write_all(fd, data, n) < 0) {
		if (fd >= 0)
			close(fd);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot store a blob in "
		    "'%s':", root);
	}
	rc = blob_link(root, fd, digest, size, err);
	close(fd);
	return rc;
}

/* The step's upper directory as a layer: its tar into the store, the
 * directory kept as ROOT/build/layers/HEX. */
static int
commit_layer(struct sbx_stage *st, struct step *s, const char *text,
    const char *key, struct sbx_err *err)
{
	struct packer p = {0};
	char digest[72], *dir, *final, *cache, *rec;
	long long size = 0;
	int fd = -1, dfd = -1, rc = -1;

	dir = sbx_xasprintf("%s/blobs/sha256", st->root);
	if (sbx_mkdirs(dir, 0755, err) < 0) {
		free(dir);
		return -1;
	}
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
	free(dir);
	if (fd < 0 || (dfd = open(s->upper, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make a layer in '%s':",
		    st->root);
		goto out;
	}
	p.a = archive_write_new();
	archive_write_set_format_pax_restricted(p.a);
	archive_write_set_bytes_in_last_block(p.a, 1);
	p.lr = archive_entry_linkresolver_new();
	archive_entry_linkresolver_set_strategy(p.lr,
	    ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
	if (archive_write_open_fd(p.a, fd) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write a layer: %s",
		    archive_error_string(p.a));
		goto pack_out;
	}
	pack_dir(&p, dfd, "");
	if (!p.fail && archive_write_close(p.a) != ARCHIVE_OK) {
		p.fail = 1;
		snprintf(p.msg, sizeof p.msg, "%s", archive_error_string(p.a));
	}
	if (p.fail)
		sbx_err_set(err, SBX_EX_FAIL, "cannot make the layer of '%s': "
		    "%s", text, p.msg);
pack_out:
	archive_entry_linkresolver_free(p.lr);
	archive_write_free(p.a);
	if (p.fail || blob_link(st->root, fd, digest, &size, err) < 0)
		goto out;
	dir = sbx_xasprintf("%s/build/layers", st->root);
	final = sbx_xasprintf("%s/%s", dir, digest + 7);
	if (sbx_mkdirs(dir, 0755, err) < 0 || (rename(s->upper, final) < 0 &&
	    errno != EEXIST && errno != ENOTEMPTY)) {
		if (!err->msg[0])
			sbx_err_set(err, SBX_EX_FAIL, "cannot keep the layer "
			    "'%s':", final);
		free(dir);
		free(final);
		goto out;
	}
	free(dir);
	add_lower(st, final);
	free(final);
	json_array_append_new(st->layers, json_pack("{s:s,s:s,s:I}",
	    "mediaType", LAYER_TAR, "digest", digest, "size",
	    (json_int_t)size));
	json_array_append_new(json_object_get(json_object_get(st->cfg,
	    "rootfs"), "diff_ids"), json_string(digest));
	sbx_stage_history(st, text, 0);
	memcpy(st->key, key, 65);
	/* The cache: this key is this layer. */
	dir = sbx_xasprintf("%s/build/cache", st->root);
	cache = sbx_xasprintf("%s/%s", dir, key);
	rec = sbx_xasprintf("{\"digest\":\"%s\",\"size\":%lld}\n", digest,
	    size);
	if (sbx_mkdirs(dir, 0755, err) < 0 || sbx_file_write_atomic(cache,
	    rec, strlen(rec), 0644, 0, err) < 0)
		sbx_warn("%s", err->msg);
	memset(err, 0, sizeof *err);
	free(rec);
	free(cache);
	free(dir);
	rc = 0;
out:
	if (dfd >= 0)
		close(dfd);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A step of key already made: its layer on st, 1; not there: 0. */
static int
cache_take(struct sbx_stage *st, const char *key, const char *text)
{
	struct sbx_err e = {0};
	char *p = sbx_xasprintf("%s/build/cache/%s", st->root, key), *blob,
	    *dir;
	json_t *c = sbx_json_load_object(p, &e);
	const char *dg = sbx_json_str(c, "digest");
	int hit = 0;

	free(p);
	if (dg && sbx_image_valid_digest(dg)) {
		blob = sbx_image_blob_path(st->root, dg);
		dir = sbx_xasprintf("%s/build/layers/%s", st->root, dg + 7);
		if (access(blob, F_OK) == 0 && access(dir, F_OK) == 0) {
			add_lower(st, dir);
			json_array_append_new(st->layers, json_pack(
			    "{s:s,s:s,s:I}", "mediaType", LAYER_TAR, "digest",
			    dg, "size", (json_int_t)sbx_json_int(c, "size", 0)));
			json_array_append_new(json_object_get(json_object_get(
			    st->cfg, "rootfs"), "diff_ids"), json_string(dg));
			sbx_stage_history(st, text, 0);
			memcpy(st->key, key, 65);
			hit = 1;
		}
		free(blob);
		free(dir);
	}
	json_decref(c);
	return hit;
}

static void
say(const struct sbx_stage *st, const char *text, int cached)
{
	if (!st->quiet)
		fprintf(stderr, "%s%s%s%s\n", st->step ? st->step : "",
		    st->step ? ": " : "", text, cached ? " (cached)" : "");
}

/* --- RUN ------------------------------------------------------------ */

/* Docker's default capabilities: a build step is root in its files, not
 * in the machine. */
static const int keep_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FSETID, CAP_FOWNER, CAP_MKNOD,
	CAP_NET_RAW, CAP_SETGID, CAP_SETUID, CAP_SETFCAP, CAP_SETPCAP,
	CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_KILL, CAP_AUDIT_WRITE,
};

static void
drop_caps(int msg)
{
	for (int c = 0; prctl(PR_CAPBSET_READ, c) >= 0; c++) {
		size_t i;

		for (i = 0; i < sizeof keep_caps / sizeof keep_caps[0]; i++)
			if (keep_caps[i] == c)
				break;
		if (i == sizeof keep_caps / sizeof keep_caps[0] &&
		    prctl(PR_CAPBSET_DROP, c) < 0)
			child_fail(msg, "cannot drop a capability");
	}
}

/* "user[:group]" as the tree's /etc/passwd and /etc/group say (read
 * as files: no NSS module of the image is loaded). */
static int
resolve_user(const char *spec, uid_t *uid, gid_t *gid, int *has_group)
{
	char u[256], *g, *end;
	struct passwd *pw;
	struct group *gr;
	FILE *f;
	long v;

	snprintf(u, sizeof u, "%s", spec);
	if ((g = strchr(u, ':')))
		*g++ = '\0';
	*has_group = g != NULL;
	*gid = 0;
	errno = 0;
	v = strtol(u, &end, 10);
	if (*u && !*end && v >= 0) {
		*uid = (uid_t)v;
		if ((f = fopen("/etc/passwd", "re"))) {
			while ((pw = fgetpwent(f)))
				if (pw->pw_uid == *uid) {
					*gid = pw->pw_gid;
					break;
				}
			fclose(f);
		}
	} else {
		int found = 0;

		if ((f = fopen("/etc/passwd", "re"))) {
			while ((pw = fgetpwent(f)))
				if (!strcmp(pw->pw_name, u)) {
					*uid = pw->pw_uid;
					*gid = pw->pw_gid;
					found = 1;
					break;
				}
			fclose(f);
		}
		if (!found)
			return -1;
	}
	if (!g)
		return 0;
	v = strtol(g, &end, 10);
	if (*g && !*end && v >= 0) {
		*gid = (gid_t)v;
		return 0;
	}
	if ((f = fopen("/etc/group", "re"))) {
		while ((gr = fgetgrent(f)))
			if (!strcmp(gr->gr_name, g)) {
				*gid = gr->gr_gid;
				fclose(f);
				return 0;
			}
		fclose(f);
	}
	return -1;
}

struct runspec {
	char *const *argv;
	char **env;
	const char *user;
	const char *workdir;
	int quiet;
};

/* pid 1 of the step's namespaces: its root, /proc, /dev, then argv. */
static void
run_init(const struct step *s, const struct runspec *r, int msg)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} devs[] = {
		{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7},
		{"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
	};
	char *merged, *p;
	uid_t uid = 0;
	gid_t gid = 0;
	int hg, fd;

	child_mount(s, msg, &merged);
	if (chdir(merged) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		child_fail(msg, "cannot enter the step's root");
	mkdir("/proc", 0555);
	mkdir("/dev", 0755);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) < 0)
		child_fail(msg, "cannot mount /proc");
	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
	    "mode=755,size=65536k") < 0)
		child_fail(msg, "cannot mount /dev");
	for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
		p = sbx_xasprintf("/dev/%s", devs[i].name);
		if (mknod(p, S_IFCHR | 0666, makedev(devs[i].maj,
		    devs[i].min)) < 0 || chmod(p, 0666) < 0)
			child_fail(msg, "cannot make /dev");
		free(p);
	}
	mkdir("/dev/shm", 01777);
	mkdir("/dev/pts", 0755);
	if (symlink("/proc/self/fd", "/dev/fd") < 0 ||
	    symlink("/proc/self/fd/0", "/dev/stdin") < 0 ||
	    symlink("/proc/self/fd/1", "/dev/stdout") < 0 ||
	    symlink("/proc/self/fd/2", "/dev/stderr") < 0)
		child_fail(msg, "cannot make /dev");
	if (sethostname("sbx-build", 9) < 0)
		child_fail(msg, "cannot set the host name");
	if (r->user && *r->user && resolve_user(r->user, &uid, &gid,
	    &hg) < 0) {
		errno = ENOENT;
		child_fail(msg, "unknown user (USER)");
	}
	if (r->workdir && *r->workdir) {
		struct sbx_err e = {0};

		if (sbx_mkdirs(r->workdir, 0755, &e) < 0 ||
		    chdir(r->workdir) < 0)
			child_fail(msg, "cannot enter the WORKDIR");
	}
	if ((fd = open("/dev/null", O_RDWR)) < 0 || dup2(fd, 0) < 0 ||
	    (r->quiet && (dup2(fd, 1) < 0 || dup2(fd, 2) < 0)) ||
	    (!r->quiet && dup2(2, 1) < 0))
		child_fail(msg, "cannot set up the standard streams");
	drop_caps(msg);
	/* A sandbox's seccomp denylist: a step may do what a sandbox of
	 * the image may, no more. Installed as root, CAP_SYS_ADMIN still
	 * effective (exec drops it), so without no_new_privs: a setuid
	 * program of the image still works, as in docker build. */
	if (sbx_local_seccomp() < 0)
		child_fail(msg, "cannot install the seccomp filter");
	if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
		child_fail(msg, "cannot become the USER");
	environ = r->env;
	execvp(r->argv[0], r->argv);
	{
		char b[300];
		int n = snprintf(b, sizeof b, "cannot run '%s': %s",
		    r->argv[0], strerror(errno));

		if (write(msg, b, (size_t)n < sizeof b ? (size_t)n :
		    sizeof b - 1) < 0)
			_exit(127);
	}
	_exit(127);
}

int
sbx_stage_run(struct sbx_stage *st, const char *text, char *const *argv,
    const json_t *extra, int *cached, struct sbx_err *err)
{
	struct step s;
	struct runspec r = {0};
	const json_t *env = json_object_get(sbx_stage_config(st), "Env"), *v;
	char key[65], **envp;
	size_t i, n = 0;
	int pipefd[2], status = 0, rc = -1, path = 0;
	pid_t pid;

	*cached = 0;
	memcpy(key, st->key, 65);
	chain(key, text, NULL);
	json_array_foreach(extra, i, v)
		if (json_is_string(v))
			chain(key, json_string_value(v), NULL);
	if (cache_take(st, key, text)) {
		*cached = 1;
		say(st, text, 1);
		return 0;
	}
	say(st, text, 0);
	envp = sbx_xcalloc(json_array_size(env) + json_array_size(extra) + 2,
	    sizeof *envp);
	json_array_foreach(env, i, v)
		if (json_is_string(v)) {
			envp[n++] = (char *)json_string_value(v);
			path |= !strncmp(envp[n - 1], "PATH=", 5);
		}
	json_array_foreach(extra, i, v)
		if (json_is_string(v))
			envp[n++] = (char *)json_string_value(v);
	if (!path)
		envp[n++] = DEFAULT_PATH;
	r.argv = argv;
	r.env = envp;
	r.user = sbx_json_str(sbx_stage_config(st), "User");
	r.workdir = sbx_json_str(sbx_stage_config(st), "WorkingDir");
	r.quiet = st->quiet;
	if (step_init(&s, st, err) < 0)
		goto out;
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make a pipe:");
		goto out;
	}
	fflush(stderr);
	if ((pid = fork()) < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
		goto out;
	}
	if (pid == 0) {
		pid_t init;
		int ws;

		close(pipefd[0]);
		/* No network: a namespace with only its own loopback. */
		if (unshare(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
		    CLONE_NEWUTS) < 0)
			child_fail(pipefd[1], "cannot make the step's "
			    "namespaces");
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if ((init = fork()) < 0)
			child_fail(pipefd[1], "cannot fork");
		if (init == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			run_init(&s, &r, pipefd[1]);
		}
		close(pipefd[1]);
		while (waitpid(init, &ws, 0) < 0)
			if (errno != EINTR)
				_exit(125);
		_exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
	}
	close(pipefd[1]);
	if (child_wait(pid, pipefd[0], &status, err) < 0)
		goto out;
	if (status != 0) {
		sbx_err_set(err, SBX_EX_FAIL, "%s%s'%s' failed: exit status %d",
		    st->step ? st->step : "", st->step ? ": " : "", text,
		    status);
		goto out;
	}
	/* What the step made only to run in (/proc, /dev) is not its. */
	for (i = 0; i < 2; i++) {
		char *d = sbx_xasprintf("%s/%s", s.upper, i ? "dev" : "proc");

		rmdir(d);
		free(d);
	}
	rc = commit_layer(st, &s, text, key, err);
out:
	step_release(&s);
	free(envp);
	return rc;
}

/* --- COPY and ADD ---------------------------------------------------- */

/* mkdir -p path (absolute, in the current root), each one made owned
 * uid:gid when chown. */
static int
mkdirs_owned(const char *path, int chown_, uid_t uid, gid_t gid)
{
	char *p = sbx_xstrdup(path), *s;
	int rc = 0;

	for (s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, 0755) == 0) {
			if (chown_ && lchown(p, uid, gid) < 0)
				rc = -1;
		} else if (errno != EEXIST) {
			rc = -1;
		}
		*s = c;
		if (!c || rc < 0)
			break;
	}
	free(p);
	return rc;
}

struct copyspec {
	const struct sbx_copy *c;
	uid_t uid;
	gid_t gid;
	int chown_;
};

static int copy_tree(int sfd, const char *rel, const char *dest,
    const struct copyspec *cs);

/* One thing, rel below sfd, to path dest of the root we are in. */
static int
copy_one(int sfd, const char *rel, const char *dest, const struct copyspec *cs)
{
	struct stat st;
	char link[4096], buf[65536];
	int in, out, rc = 0;
	ssize_t n;

	if (fstatat(sfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if (S_ISDIR(st.st_mode)) {
		if (mkdirs_owned(dest, cs->chown_, cs->uid, cs->gid) < 0)
			return -1;
		return copy_tree(sfd, rel, dest, cs);
	}
	unlink(dest);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(sfd, rel, link, sizeof link - 1);
		if (n < 0)
			return -1;
		link[n] = '\0';
		if (symlink(link, dest) < 0)
			return -1;
	} else if (S_ISREG(st.st_mode)) {
		if ((in = openat(sfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC))
		    < 0)
			return -1;
		if ((out = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
		    O_CLOEXEC, 0600)) < 0) {
			close(in);
			return -1;
		}
		while ((n = read(in, buf, sizeof buf)) > 0)
			if (sbx_write_all(out, buf, (size_t)n) < 0) {
				rc = -1;
				break;
			}
		if (n < 0)
			rc = -1;
		if (fchmod(out, cs->c->chmod >= 0 ? (mode_t)cs->c->chmod :
		    st.st_mode & 07777) < 0)
			rc = -1;
		close(in);
		if (close(out) < 0)
			rc = -1;
	} else {
		return 0;
	}
	if (lchown(dest, cs->chown_ ? cs->uid : st.st_uid, cs->chown_ ?
	    cs->gid : st.st_gid) < 0)
		rc = -1;
	return rc;
}

static int
copy_tree(int sfd, const char *rel, const char *dest, const struct copyspec *cs)
{
	struct dirent **ents = NULL;
	int n, rc = 0, dfd;
	char *r, *d;

	if ((dfd = openat(sfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return -1;
	n = scandirat(dfd, ".", &ents, no_dots, cmp_names);
	close(dfd);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		r = sbx_xasprintf("%s/%s", rel, ents[i]->d_name);
		d = sbx_xasprintf("%s/%s", strcmp(dest, "/") ? dest : "",
		    ents[i]->d_name);
		if (copy_one(sfd, r, d, cs) < 0)
			rc = -1;
		free(r);
		free(d);
		free(ents[i]);
	}
	free(ents);
	return rc;
}

/* ADD of a local tar: unpacked at dest (1), or not a tar (0). */
static int
extract_tar(int sfd, const char *rel, const char *dest, int msg)
{
	struct archive *a = archive_read_new(), *w;
	struct archive_entry *e;
	int fd, r, cwd;

	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_zstd(a);
	if ((fd = openat(sfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		archive_read_free(a);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (mkdirs_owned(dest, 0, 0, 0) < 0 || (cwd = open(".", O_PATH |
	    O_CLOEXEC)) < 0 || chdir(dest) < 0)
		child_fail(msg, "cannot make the ADD's destination");
	w = archive_write_disk_new();
	archive_write_disk_set_options(w, ARCHIVE_EXTRACT_TIME |
	    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_OWNER |
	    ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
	    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_UNLINK);
	do {
		switch (archive_entry_filetype(e)) {
		case AE_IFCHR:
		case AE_IFBLK:
			continue;
		}
		if (archive_read_extract2(a, e, w) != ARCHIVE_OK) {
			char b[400];
			int n = snprintf(b, sizeof b, "cannot unpack '%s': %s",
			    rel, archive_error_string(a));

			if (write(msg, b, (size_t)n < sizeof b ? (size_t)n :
			    sizeof b - 1) < 0)
				_exit(125);
			_exit(125);
		}
	} while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK);
	if (r != ARCHIVE_EOF) {
		errno = EINVAL;
		child_fail(msg, "a bad tar in ADD");
	}
	archive_write_free(w);
	archive_read_free(a);
	close(fd);
	if (fchdir(cwd) < 0)
		child_fail(msg, "cannot go back");
	close(cwd);
	return 1;
}

/* In the child: the copies, in the root of the step's overlay. */
static void
copy_in(const struct step *s, const struct sbx_copy *c,
    const struct sbx_stage *from, const char *wd, int msg)
{
	struct copyspec cs = {c, 0, 0, 0};
	char *merged, *src, *dest, *d;
	struct stat st;
	int sfd, hg, dir, nsrc;

	child_mount(s, msg, &merged);
	if (from) {
		char *low, *e = sbx_xasprintf("%s/empty", s->tmp);

		low = lowerdirs(from, e);
		src = sbx_xasprintf("%s/src", s->tmp);
		/* Two lowers at least for a read-only overlay. */
		d = sbx_xasprintf("%s:%s", low, e);
		if (mount("overlay", src, "overlay", MS_RDONLY, d) < 0)
			child_fail(msg, "cannot mount the --from stage");
		free(d);
		free(low);
		free(e);
	} else {
		src = sbx_xstrdup(c->root);
	}
	if ((sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		child_fail(msg, "cannot open the COPY's source");
	if (chroot(merged) < 0 || chdir("/") < 0)
		child_fail(msg, "cannot enter the step's root");
	if (c->chown) {
		if (resolve_user(c->chown, &cs.uid, &cs.gid, &hg) < 0) {
			errno = ENOENT;
			child_fail(msg, "--chown: unknown user or group");
		}
		if (!hg && strchr(c->chown, ':') == NULL)
			cs.gid = cs.gid ? cs.gid : cs.uid;
		cs.chown_ = 1;
	}
	for (nsrc = 0; c->src[nsrc]; nsrc++)
		;
	dest = c->dest[0] == '/' ? sbx_xstrdup(c->dest) :
	    sbx_xasprintf("%s/%s", wd && *wd ? wd : "", c->dest);
	dir = dest[strlen(dest) - 1] == '/' || nsrc > 1;
	while (strlen(dest) > 1 && dest[strlen(dest) - 1] == '/')
		dest[strlen(dest) - 1] = '\0';
	for (int i = 0; i < nsrc; i++) {
		const char *rel = c->src[i];
		char *to, *parent;

		while (*rel == '/')
			rel++;
		if (!*rel)
			rel = ".";
		if (c->to) {
			free(dest);
			dest = c->to[i][0] == '/' ? sbx_xstrdup(c->to[i]) :
			    sbx_xasprintf("%s/%s", wd && *wd ? wd : "",
			    c->to[i]);
			dir = 0;
		}
		{
			struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			    .resolve = from ? RESOLVE_IN_ROOT :
			    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
			int t = (int)syscall(SYS_openat2, sfd, rel, &how,
			    sizeof how);

			if (t < 0) {
				char b[400];
				int n = snprintf(b, sizeof b, "COPY: no '%s' "
				    "in the %s", c->src[i], from ? "stage" :
				    "context");

				if (write(msg, b, (size_t)n) < 0)
					_exit(125);
				_exit(125);
			}
			close(t);
		}
		if (fstatat(sfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
			child_fail(msg, "cannot read the COPY's source");
		if (c->extract && S_ISREG(st.st_mode)) {
			/* A tar goes into the directory it was going to. */
			const char *b = strrchr(rel, '/') ? strrchr(rel, '/') +
			    1 : rel;
			size_t dl = strlen(dest), bl = strlen(b);
			char *into = sbx_xstrdup(dest);

			if (c->to && dl > bl + 1 && !strcmp(dest + dl - bl, b) &&
			    dest[dl - bl - 1] == '/')
				into[dl - bl - 1] = '\0';
			if (!*into) {
				free(into);
				into = sbx_xstrdup("/");
			}
			if (extract_tar(sfd, rel, into, msg)) {
				free(into);
				continue;
			}
			free(into);
		}
		if (S_ISDIR(st.st_mode)) {
			if (mkdirs_owned(dest, 0, 0, 0) < 0 ||
			    copy_tree(sfd, rel, dest, &cs) < 0)
				child_fail(msg, "cannot copy a directory");
			continue;
		}
		to = dir ? sbx_xasprintf("%s/%s", strcmp(dest, "/") ? dest :
		    "", strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel) :
		    sbx_xstrdup(dest);
		parent = sbx_xstrdup(to);
		*strrchr(parent, '/') = '\0';
		if ((*parent && mkdirs_owned(parent, 0, 0, 0) < 0) ||
		    copy_one(sfd, rel, to, &cs) < 0)
			child_fail(msg, "cannot copy a file");
		free(parent);
		free(to);
	}
	free(dest);
	_exit(0);
}

/* The digest of what a COPY takes from the context: names, modes and
 * contents, so that an edited file is a new step. */
static void
files_digest(const struct sbx_copy *c, char out[65])
{
	struct sha256_ctx h;
	unsigned char d[32];
	struct stat st;
	char b[64];
	int fd;

	sha256_init(&h);
	for (size_t i = 0; c->root && c->src[i]; i++) {
		char *p = sbx_xasprintf("%s/%s", c->root, c->src[i]);

		sha256_update(&h, strlen(c->src[i]) + 1,
		    (const uint8_t *)c->src[i]);
		if (c->to)
			sha256_update(&h, strlen(c->to[i]) + 1,
			    (const uint8_t *)c->to[i]);
		if (lstat(p, &st) == 0) {
			snprintf(b, sizeof b, "%o", st.st_mode);
			sha256_update(&h, strlen(b) + 1, (const uint8_t *)b);
			if (S_ISREG(st.st_mode) && (fd = open(p, O_RDONLY |
			    O_CLOEXEC)) >= 0) {
				if (sbx_sha256_fd(fd, d) == 0)
					sha256_update(&h, sizeof d, d);
				close(fd);
			} else if (S_ISLNK(st.st_mode)) {
				ssize_t n = readlink(p, b, sizeof b);

				if (n > 0)
					sha256_update(&h, (size_t)n,
					    (const uint8_t *)b);
			}
		}
		free(p);
	}
	sha256_digest(&h, sizeof d, d);
	hex(d, sizeof d, out);
}

int
sbx_stage_copy(struct sbx_stage *st, const char *text, const struct sbx_copy *c,
    int *cached, struct sbx_err *err)
{
	struct step s;
	char key[65], fd_[65];
	int pipefd[2], status = 0, rc = -1;
	pid_t pid;

	*cached = 0;
	memcpy(key, st->key, 65);
	files_digest(c, fd_);
	chain(key, text, c->from ? c->from->key : fd_);
	if (cache_take(st, key, text)) {
		*cached = 1;
		say(st, text, 1);
		return 0;
	}
	say(st, text, 0);
	if (step_init(&s, st, err) < 0)
		goto out;
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make a pipe:");
		goto out;
	}
	if ((pid = fork()) < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		sbx_err_set(err, SBX_EX_FAIL, "cannot fork:");
		goto out;
	}
	if (pid == 0) {
		close(pipefd[0]);
		copy_in(&s, c, c->from, sbx_json_str(sbx_stage_config(st),
		    "WorkingDir"), pipefd[1]);
	}
	close(pipefd[1]);
	if (child_wait(pid, pipefd[0], &status, err) < 0)
		goto out;
	if (status != 0) {
		sbx_err_set(err, SBX_EX_FAIL, "%s%s'%s' failed", st->step ?
		    st->step : "", st->step ? ": " : "", text);
		goto out;
	}
	rc = commit_layer(st, &s, text, key, err);
out:
	step_release(&s);
	return rc;
}

/* --- commit ------------------------------------------------------------ */

int
sbx_stage_commit(struct sbx_stage *st, const char *name, json_t **out,
    struct sbx_err *err)
{
	struct sbx_image_store s = {.lock = -1};
	char cdig[72], mdig[72], t[32], *data = NULL, *rootfs = NULL;
	long long csize, msize, size = 0;
	json_t *m = NULL, *ldig = json_array(), *l, *rec;
	size_t i;
	int rc = -1;

	*out = NULL;
	sbx_time_fmt(sbx_now(), t, sizeof t);
	json_object_set_new(st->cfg, "created", json_string(t));
	data = json_dumps(st->cfg, JSON_COMPACT | JSON_SORT_KEYS);
	if (!data || blob_put(st->root, data, strlen(data), cdig, &csize,
	    err) < 0)
		goto out;
	free(data);
	json_array_foreach(st->layers, i, l) {
		json_array_append_new(ldig, json_string(sbx_json_str(l,
		    "digest")));
		size += sbx_json_int(l, "size", 0);
	}
	m = json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:O}", "schemaVersion", 2,
	    "mediaType", "application/vnd.oci.image.manifest.v1+json",
	    "config", "mediaType", "application/vnd.oci.image.config.v1+json",
	    "digest", cdig, "size", (json_int_t)csize, "layers", st->layers);
	data = json_dumps(m, JSON_COMPACT);
	if (!data || blob_put(st->root, data, strlen(data), mdig, &msize,
	    err) < 0)
		goto out;
	if (sbx_image_store_open(&s, err) < 0 ||
	    sbx_image_unpack(s.root, mdig, ldig, &rootfs, err) < 0)
		goto out;
	rec = json_pack("{s:s,s:s,s:O,s:I,s:s,s:I,s:b}", "digest", mdig,
	    "config", cdig, "layers", ldig, "size", (json_int_t)size,
	    "platform", "linux/amd64", "pulled_at", (json_int_t)sbx_now(),
	    "built", 1);
	json_object_set_new(json_object_get(s.index, "images"), name, rec);
	if (sbx_image_store_save(&s, err) < 0)
		goto out;
	*out = json_deep_copy(rec);
	json_object_set_new(*out, "image", json_string(name));
	json_object_set_new(*out, "rootfs", json_string(rootfs));
	rc = 0;
out:
	sbx_image_store_close(&s);
	free(data);
	free(rootfs);
	json_decref(m);
	json_decref(ldig);
	return rc;
}
