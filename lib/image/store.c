/* store.c - the local image store: content-addressed blobs (each named
 * by its sha256 only once what arrived was checked against it) and an
 * index of the images pulled, name -> manifest, under a lock.
 *
 *   ROOT/blobs/sha256/HEX   manifests, configs, layers (as they came)
 *   ROOT/images.json        {"schema":1,"images":{NAME:{...}}}
 *   ROOT/.lock              held while the index changes */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image.h"
#include "local/local.h"

#define INDEX_SCHEMA 1

char *
sbx_image_root(void)
{
	return sbx_config_dir("image.dir", "image", 0);
}

void
sbx_image_store_close(struct sbx_image_store *s)
{
	if (s->lock >= 0)
		close(s->lock);
	json_decref(s->index);
	free(s->root);
	memset(s, 0, sizeof *s);
	s->lock = -1;
}

/* The store, locked, its index loaded (an empty one when new). */
int
sbx_image_store_open(struct sbx_image_store *s, struct sbx_err *err)
{
	char *p;

	memset(s, 0, sizeof *s);
	s->lock = -1;
	s->root = sbx_image_root();
	p = sbx_xasprintf("%s/blobs/sha256", s->root);
	if (sbx_mkdirs(p, 0755, err) < 0) {
		free(p);
		goto fail;
	}
	free(p);
	p = sbx_xasprintf("%s/.lock", s->root);
	s->lock = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(p);
	if (s->lock < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open the image store's "
		    "lock in '%s':", s->root);
		goto fail;
	}
	while (flock(s->lock, LOCK_EX) < 0)
		if (errno != EINTR) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot lock the image "
			    "store '%s':", s->root);
			goto fail;
		}
	p = sbx_xasprintf("%s/images.json", s->root);
	if (access(p, F_OK) == 0)
		s->index = sbx_json_load_object(p, err);
	else
		s->index = json_pack("{s:i,s:{}}", "schema", INDEX_SCHEMA,
		    "images");
	free(p);
	if (!s->index)
		goto fail;
	if (!json_is_object(json_object_get(s->index, "images")))
		json_object_set_new(s->index, "images", json_object());
	return 0;
fail:
	sbx_image_store_close(s);
	return -1;
}

int
sbx_image_store_save(struct sbx_image_store *s, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/images.json", s->root);
	char *data = json_dumps(s->index, JSON_INDENT(2) | JSON_SORT_KEYS);
	int rc;

	rc = data ? sbx_file_write_atomic(p, data, strlen(data), 0644, 1, err) :
	    sbx_err_set(err, SBX_EX_FAIL, "cannot encode the image index");
	free(data);
	free(p);
	return rc;
}

char *
sbx_image_blob_path(const char *root, const char *digest)
{
	return sbx_xasprintf("%s/blobs/sha256/%s", root, digest + 7);
}

const json_t *
sbx_image_find(const struct sbx_image_store *s, const char *ref, char **name,
    struct sbx_err *err)
{
	struct sbx_imgref r;
	const json_t *images = json_object_get(s->index, "images"), *rec;

	*name = NULL;
	/* A name as the index has it, or a reference read as pull reads it. */
	if ((rec = json_object_get(images, ref))) {
		*name = sbx_xstrdup(ref);
		return rec;
	}
	if (sbx_imgref_parse(ref, &r, err) < 0)
		return NULL;
	*name = sbx_imgref_name(&r);
	sbx_imgref_release(&r);
	if ((rec = json_object_get(images, *name)))
		return rec;
	sbx_err_set(err, SBX_EX_NOSANDBOX, "no image '%s' in the store "
	    "(sbx-image pull %s)", ref, ref);
	free(*name);
	*name = NULL;
	return NULL;
}

/* The config object of the image whose config blob is digest, or NULL. */
static json_t *
image_config(const char *root, const char *digest)
{
	struct sbx_err e = {0};
	char *p;
	json_t *blob, *c;

	if (!digest || !sbx_image_valid_digest(digest))
		return NULL;
	p = sbx_image_blob_path(root, digest);
	blob = sbx_json_load_object(p, &e);
	free(p);
	c = json_incref(json_object_get(blob, "config"));
	json_decref(blob);
	return c;
}

/* The last lookup of this process: sbx-create asks for the image's
 * WorkingDir before the backend asks for its tree, and both must be of
 * the one image the index named, read once. */
static struct {
	char *ref;
	struct sbx_image_use u;
} last;

static void
use_copy(struct sbx_image_use *to, const struct sbx_image_use *from)
{
	to->name = sbx_xstrdup(from->name);
	to->digest = sbx_xstrdup(from->digest);
	to->config_digest = from->config_digest ?
	    sbx_xstrdup(from->config_digest) : NULL;
	to->rootfs = sbx_xstrdup(from->rootfs);
	to->config = json_incref(from->config);
}

/* This boot's id (the kernel's random boot_id), "" when unknown. */
static const char *
boot_id(void)
{
	static char id[64];
	int fd;
	ssize_t n;

	if (!*id && (fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY |
	    O_CLOEXEC)) >= 0) {
		n = read(fd, id, sizeof id - 1);
		close(fd);
		id[n > 0 ? n : 0] = '\0';
		id[strcspn(id, "\n")] = '\0';
	}
	return id;
}

/* ROOT/unsynced/HEX of tree ROOT/rootfs/HEX (malloc'd). */
static char *
mark_of(const char *tree)
{
	const char *b = strrchr(tree, '/'), *r = b;

	while (r > tree && r[-1] != '/')
		r--;
	return sbx_xasprintf("%.*sunsynced%s", (int)(r - tree), tree, b);
}

int
sbx_image_mark_unsynced(const char *tree, struct sbx_err *err)
{
	char *m = mark_of(tree), *dir = sbx_xstrdup(m);
	const char *id = boot_id();
	int rc = 0, fd;

	*strrchr(dir, '/') = '\0';
	if (!*id)
		goto out;
	/* Made once: its own name on the disk too. */
	if (mkdir(dir, 0755) == 0) {
		*strrchr(dir, '/') = '\0';
		if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			fsync(fd);
			close(fd);
		}
	} else if (errno != EEXIST) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", dir);
		goto out;
	}
	rc = sbx_file_write_atomic(m, id, strlen(id), 0644, 1, err);
out:
	free(m);
	free(dir);
	return rc;
}

/* Weak: the tools that make sandboxes of images (sbx-create, sbxd) link
 * the unpack (libarchive); in another, a tree is used as it is. */
extern int sbx_image_unpack(const char *root, const char *digest,
    const json_t *layers, char **path, struct sbx_err *err)
    __attribute__((weak));

/* The tree of image rec (its path) whole: one marked unsynced in an
 * earlier boot may have lost files in a crash, so it is made again from
 * the blobs (under the store's lock), synced, and its mark removed. */
static int
tree_whole(const json_t *rec, const char *tree, struct sbx_err *err)
{
	struct sbx_image_store s;
	char *m = mark_of(tree), *mark, *old = NULL, *path = NULL;
	const char *b = strrchr(m, '/');
	char *dir = sbx_xasprintf("%.*s", (int)(b - m), m);
	int rc = -1, fd;

	mark = sbx_image_unpack ? sbx_local_read_small(dir, b + 1) : NULL;
	if (!mark || !*boot_id() || !strncmp(mark, boot_id(),
	    strlen(boot_id()))) {
		rc = 0;
		goto out;
	}
	if (sbx_image_store_open(&s, err) < 0)
		goto out;
	/* Another command may have made it again meanwhile. */
	if (access(m, F_OK) == 0) {
		/* Beside it, where a prune removes what a killed create
		 * left of it. */
		b = strrchr(tree, '/');
		old = sbx_xasprintf("%.*s/.tmp-%s-old", (int)(b - tree), tree,
		    b + 1);
		sbx_rmtree(old);
		if ((rename(tree, old) < 0 && errno != ENOENT) ||
		    sbx_rmtree(old) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s', "
			    "made before the last boot and maybe torn:", tree);
		} else if (sbx_image_unpack(s.root, sbx_json_str(rec, "digest"),
		    json_object_get(rec, "layers"), &path, err) == 0) {
			if ((fd = open(dir, O_RDONLY | O_DIRECTORY |
			    O_CLOEXEC)) < 0 || syncfs(fd) < 0 ||
			    unlink(m) < 0 || fsync(fd) < 0)
				sbx_err_set(err, SBX_EX_FAIL, "cannot sync "
				    "'%s':", tree);
			else
				rc = 0;
			if (fd >= 0)
				close(fd);
		}
	} else {
		rc = 0;
	}
	sbx_image_store_close(&s);
out:
	free(mark);
	free(m);
	free(dir);
	free(old);
	free(path);
	return rc;
}

int
sbx_image_lookup(const char *ref, struct sbx_image_use *u,
    struct sbx_err *err)
{
	struct sbx_image_store s = {.lock = -1};
	struct sbx_err e = {0};
	const json_t *rec;
	char *p;
	int rc = -1;

	memset(u, 0, sizeof *u);
	if (last.ref && !strcmp(last.ref, ref)) {
		use_copy(u, &last.u);
		return 0;
	}
	s.root = sbx_image_root();
	/* Written whole (temp, rename): read without the lock. */
	p = sbx_xasprintf("%s/images.json", s.root);
	if (access(p, F_OK) == 0) {
		if (!(s.index = sbx_json_load_object(p, err))) {
			free(p);
			goto out;
		}
	} else {
		s.index = json_pack("{s:{}}", "images");
	}
	free(p);
	if (!(rec = sbx_image_find(&s, ref, &u->name, &e))) {
		if (e.code == SBX_EX_NOSANDBOX) {
			sbx_err_set(err, SBX_EX_USAGE, "image '%s' is neither a "
			    "directory nor an image of the store", ref);
			sbx_err_hint(err, "sbx-image pull %s", ref);
		} else {
			*err = e;
			err->code = SBX_EX_USAGE;
		}
		goto out;
	}
	u->digest = sbx_xstrdup(sbx_json_str(rec, "digest"));
	u->config_digest = sbx_json_str(rec, "config") ?
	    sbx_xstrdup(sbx_json_str(rec, "config")) : NULL;
	u->rootfs = sbx_xasprintf("%s/rootfs/%s", s.root, u->digest + 7);
	if (tree_whole(rec, u->rootfs, err) < 0)
		goto out;
	u->config = image_config(s.root, u->config_digest);
	free(last.ref);
	sbx_image_use_release(&last.u);
	last.ref = sbx_xstrdup(ref);
	use_copy(&last.u, u);
	rc = 0;
out:
	if (rc < 0)
		sbx_image_use_release(u);
	json_decref(s.index);
	free(s.root);
	return rc;
}

int
sbx_image_config_of(const char *config_digest, json_t **config)
{
	char *root;

	/* The image this process looked up already (sbx-create's start
	 * command after its create): its config read once. */
	if (config_digest && last.u.config_digest && last.u.config &&
	    !strcmp(config_digest, last.u.config_digest)) {
		*config = json_incref(last.u.config);
		return 0;
	}
	root = sbx_image_root();
	*config = image_config(root, config_digest);
	free(root);
	return *config ? 0 : -1;
}

void
sbx_image_use_release(struct sbx_image_use *u)
{
	free(u->name);
	free(u->digest);
	free(u->config_digest);
	free(u->rootfs);
	json_decref(u->config);
	memset(u, 0, sizeof *u);
}

/* The manifest digests of images that sandboxes of this machine's local
 * store use, running or stopped (their meta.json): a rootfs they stand
 * on is never removed. */
static json_t *
in_use(void)
{
	json_t *used = json_object(), *meta;
	struct sbx_err e = {0};
	struct dirent *d;
	const char *dg;
	char *p;
	DIR *dir = opendir(sbx_local_root());

	if (!dir)
		return used;
	while ((d = readdir(dir))) {
		if (!sbx_local_valid_id(d->d_name))
			continue;
		p = sbx_xasprintf("%s/%s/meta.json", sbx_local_root(),
		    d->d_name);
		meta = sbx_json_load_object(p, &e);
		free(p);
		/* Its tree, and its config for a start after a stop. */
		if ((dg = sbx_json_str(meta, "image_digest")))
			json_object_set_new(used, dg, json_string(d->d_name));
		if ((dg = sbx_json_str(meta, "image_config")))
			json_object_set_new(used, dg, json_string(d->d_name));
		json_decref(meta);
	}
	closedir(dir);
	return used;
}

/* The bytes a tree holds (its files' blocks), for what prune frees. */
static __thread long long tree_bytes;

static int
tree_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path;
	(void)flag;
	(void)f;
	tree_bytes += (long long)st->st_blocks * 512;
	return 0;
}

/* Remove tree path, adding its size to *freed. */
static int
rm_counted(const char *path, long long *freed, struct sbx_err *err)
{
	tree_bytes = 0;
	nftw(path, tree_one, 32, FTW_PHYS | FTW_MOUNT);
	if (sbx_rmtree(path) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':",
		    path);
	*freed += tree_bytes;
	return 0;
}

/* The builder's part (ROOT/build): a cache entry whose blob or layer is
 * gone, a layer no entry names, what a killed build left in tmp; with
 * all, the whole cache and its layers. The blobs of the entries kept go
 * in keep. */
static int
prune_build(struct sbx_image_store *s, int all, json_t *keep, json_t *sum,
    long long *freed, struct sbx_err *err)
{
	json_t *layers = json_object(), *c;
	struct sbx_err e = {0};
	const char *dg;
	struct dirent *d;
	char *dir, *p, *q;
	DIR *dp;
	int rc = 0, ncache = 0, nlayers = 0, ok;

	dir = sbx_xasprintf("%s/build/cache", s->root);
	if ((dp = opendir(dir))) {
		while ((d = readdir(dp))) {
			if (d->d_name[0] == '.')
				continue;
			p = sbx_xasprintf("%s/%s", dir, d->d_name);
			memset(&e, 0, sizeof e);
			c = sbx_json_load_object(p, &e);
			dg = sbx_json_str(c, "digest");
			ok = !all && dg && sbx_image_valid_digest(dg);
			if (ok) {
				char *b = sbx_image_blob_path(s->root, dg);

				q = sbx_xasprintf("%s/build/layers/%s",
				    s->root, dg + 7);
				ok = access(b, F_OK) == 0 && access(q, F_OK) == 0;
				free(b);
				free(q);
			}
			if (ok) {
				json_object_set_new(keep, dg, json_true());
				json_object_set_new(layers, dg + 7, json_true());
			} else {
				struct stat st;

				if (lstat(p, &st) == 0)
					*freed += (long long)st.st_blocks * 512;
				if (unlink(p) < 0 && errno != ENOENT)
					rc = sbx_err_set(err, SBX_EX_FAIL,
					    "cannot remove '%s':", p);
				else
					ncache++;
			}
			json_decref(c);
			free(p);
		}
		closedir(dp);
	}
	free(dir);
	/* A layer of an image stays with the image's blob, not here: the
	 * image's rootfs is its own tree. */
	dir = sbx_xasprintf("%s/build/layers", s->root);
	if ((dp = opendir(dir))) {
		while ((d = readdir(dp))) {
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
			    json_object_get(layers, d->d_name))
				continue;
			p = sbx_xasprintf("%s/%s", dir, d->d_name);
			if (rm_counted(p, freed, err) < 0)
				rc = -1;
			else
				nlayers++;
			free(p);
		}
		closedir(dp);
	}
	free(dir);
	dir = sbx_xasprintf("%s/build/tmp", s->root);
	if ((dp = opendir(dir))) {
		while ((d = readdir(dp))) {
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
				continue;
			p = sbx_xasprintf("%s/%s", dir, d->d_name);
			if (rm_counted(p, freed, err) < 0)
				rc = -1;
			free(p);
		}
		closedir(dp);
	}
	free(dir);
	json_object_set_new(sum, "cache", json_integer(ncache));
	json_object_set_new(sum, "layers", json_integer(nlayers));
	json_decref(layers);
	return rc;
}

/* Remove what no image of the index names, no sandbox uses and the build
 * cache does not need (with all: the build cache too): rootfs trees,
 * build layers and steps, then blobs. sum gets what went: "freed" (bytes),
 * "blobs", "rootfs", "cache", "layers"; "build_running" when a build
 * holds the builder's lock: then no blob nor build file goes (a build's
 * new blobs are named by nothing yet). */
static int
prune(struct sbx_image_store *s, int all, json_t *sum, struct sbx_err *err)
{
	json_t *keep = json_object(), *used = in_use(), *rec, *l;
	const char *name, *dg;
	struct dirent *d;
	struct stat st;
	char *p, key[300];
	size_t i;
	DIR *dir;
	int rc = 0, bl, nblobs = 0, ntrees = 0;
	long long freed = 0;

	json_object_foreach(json_object_get(s->index, "images"), name, rec) {
		json_object_set_new(keep, sbx_json_str(rec, "digest") ?
		    sbx_json_str(rec, "digest") : "", json_true());
		if ((dg = sbx_json_str(rec, "config")))
			json_object_set_new(keep, dg, json_true());
		json_array_foreach(json_object_get(rec, "layers"), i, l)
			if (json_is_string(l))
				json_object_set_new(keep, json_string_value(l),
				    json_true());
	}
	/* A sandbox's image stays whole: its manifest and rootfs. */
	json_object_foreach(used, dg, rec)
		json_object_set_new(keep, dg, json_true());
	/* The builder's lock, exclusive and not waited for: a build that
	 * runs keeps the build directory and every blob. */
	p = sbx_xasprintf("%s/build/.lock", s->root);
	bl = open(p, O_RDWR | O_CLOEXEC);
	free(p);
	if (bl >= 0 && flock(bl, LOCK_EX | LOCK_NB) < 0) {
		json_object_set_new(sum, "build_running", json_true());
		close(bl);
		bl = -2;
	}
	if (bl != -2 && prune_build(s, all, keep, sum, &freed, err) < 0)
		rc = -1;
	p = sbx_xasprintf("%s/rootfs", s->root);
	if ((dir = opendir(p))) {
		while ((d = readdir(dir))) {
			if (d->d_name[0] == '.' && strncmp(d->d_name, ".tmp-", 5))
				continue;
			snprintf(key, sizeof key, "sha256:%s", d->d_name);
			if (d->d_name[0] != '.' && json_object_get(keep, key))
				continue;
			/* A .tmp- tree is one being made, or left by a
			 * killed pull: ours to remove under the lock. */
			free(p);
			p = sbx_xasprintf("%s/rootfs/%s", s->root, d->d_name);
			if (rm_counted(p, &freed, err) < 0)
				rc = -1;
			else
				ntrees++;
		}
		closedir(dir);
	}
	free(p);
	/* The marks of trees gone (sbx_image_mark_unsynced). */
	p = sbx_xasprintf("%s/unsynced", s->root);
	if ((dir = opendir(p))) {
		while ((d = readdir(dir))) {
			snprintf(key, sizeof key, "sha256:%s", d->d_name);
			if (d->d_name[0] != '.' && !json_object_get(keep, key))
				unlinkat(dirfd(dir), d->d_name, 0);
		}
		closedir(dir);
	}
	free(p);
	/* The qemu backend's disks of images gone (lib/qemu/vm.c). */
	{
		int ndisks = 0;

		if (sbx_qemu_disks_prune(keep, &freed, &ndisks, err) < 0)
			rc = -1;
		json_object_set_new(sum, "disks", json_integer(ndisks));
	}
	p = sbx_xasprintf("%s/blobs/sha256", s->root);
	if (bl != -2 && (dir = opendir(p))) {
		int dfd = dirfd(dir);

		while ((d = readdir(dir))) {
			if (d->d_name[0] == '.')
				continue;
			snprintf(key, sizeof key, "sha256:%s", d->d_name);
			if (json_object_get(keep, key))
				continue;
			if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW)
			    == 0)
				freed += st.st_size;
			if (unlinkat(dfd, d->d_name, 0) < 0 && errno != ENOENT)
				rc = sbx_err_set(err, SBX_EX_FAIL, "cannot "
				    "remove blob %s:", key);
			else
				nblobs++;
		}
		closedir(dir);
	}
	free(p);
	if (bl >= 0)
		close(bl);
	json_object_set_new(sum, "freed", json_integer(freed));
	json_object_set_new(sum, "blobs", json_integer(nblobs));
	json_object_set_new(sum, "rootfs", json_integer(ntrees));
	json_decref(keep);
	json_decref(used);
	return rc;
}

/* The index's record as ls prints it. */
static json_t *
listed(const char *name, const json_t *rec)
{
	json_t *o = json_object();
	char t[32];

	json_object_set_new(o, "image", json_string(name));
	json_object_set(o, "digest", json_object_get(rec, "digest"));
	json_object_set(o, "platform", json_object_get(rec, "platform"));
	json_object_set(o, "size", json_object_get(rec, "size"));
	json_object_set_new(o, "layers", json_integer((json_int_t)
	    json_array_size(json_object_get(rec, "layers"))));
	sbx_time_fmt(sbx_json_int(rec, "pulled_at", 0), t, sizeof t);
	json_object_set_new(o, "pulled_at", json_string(t));
	return o;
}

int
sbx_image_list(json_t **out, struct sbx_err *err)
{
	struct sbx_image_store s;
	const char *name;
	json_t *rec;

	*out = NULL;
	if (sbx_image_store_open(&s, err) < 0)
		return -1;
	*out = json_array();
	json_object_foreach(json_object_get(s.index, "images"), name, rec)
		json_array_append_new(*out, listed(name, rec));
	sbx_image_store_close(&s);
	return 0;
}

static int
remove_image(const char *ref, int quiet_missing, json_t **out,
    struct sbx_err *err)
{
	struct sbx_image_store s;
	const json_t *rec;
	json_t *used, *sum;
	char *name = NULL, *sb = NULL;
	int rc = -1;

	*out = NULL;
	if (sbx_image_store_open(&s, err) < 0)
		return -1;
	if (!(rec = sbx_image_find(&s, ref, &name, err))) {
		if (quiet_missing && err->code == SBX_EX_NOSANDBOX) {
			*out = json_pack("{s:s,s:b}", "image", ref, "removed",
			    0);
			rc = 0;
		}
		goto out;
	}
	used = in_use();
	if (sbx_json_str(used, sbx_json_str(rec, "digest")))
		sb = sbx_xstrdup(sbx_json_str(used, sbx_json_str(rec,
		    "digest")));
	json_decref(used);
	*out = json_pack("{s:s,s:O,s:b}", "image", name, "digest",
	    json_object_get(rec, "digest"), "removed", 1);
	json_object_del(json_object_get(s.index, "images"), name);
	if (sbx_image_store_save(&s, err) < 0) {
		json_decref(*out);
		*out = NULL;
		goto out;
	}
	/* The name goes; the files go once nothing uses them (the build
	 * cache's are kept for it: prune --all drops them). */
	sum = json_object();
	if (prune(&s, 0, sum, err) < 0)
		sbx_warn("%s", err->msg);
	json_object_set(*out, "freed", json_object_get(sum, "freed"));
	json_decref(sum);
	if (sb)
		json_object_set_new(*out, "in_use_by", json_string(sb));
	rc = 0;
out:
	free(sb);
	free(name);
	sbx_image_store_close(&s);
	return rc;
}

int
sbx_image_remove(const char *ref, json_t **out, struct sbx_err *err)
{
	return remove_image(ref, 0, out, err);
}

int
sbx_image_drop(const char *ref, json_t **out, struct sbx_err *err)
{
	return remove_image(ref, 1, out, err);
}

int
sbx_image_prune(int all, json_t **out, struct sbx_err *err)
{
	struct sbx_image_store s;
	int rc;

	*out = NULL;
	if (sbx_image_store_open(&s, err) < 0)
		return -1;
	*out = json_object();
	rc = prune(&s, all, *out, err);
	sbx_image_store_close(&s);
	return rc;
}

int
sbx_image_inspect(const char *ref, json_t **out, struct sbx_err *err)
{
	struct sbx_image_store s;
	struct sbx_err e = {0};
	const json_t *rec;
	char *name = NULL, *p;
	json_t *m;
	int rc = -1;

	*out = NULL;
	if (sbx_image_store_open(&s, err) < 0)
		return -1;
	if (!(rec = sbx_image_find(&s, ref, &name, err)))
		goto out;
	*out = listed(name, rec);
	json_object_set(*out, "layers", json_object_get(rec, "layers"));
	json_object_set(*out, "config_digest", json_object_get(rec, "config"));
	p = sbx_image_blob_path(s.root, sbx_json_str(rec, "config"));
	m = sbx_json_load_object(p, &e);
	free(p);
	json_object_set_new(*out, "config", m ? json_incref(json_object_get(m,
	    "config")) : json_null());
	json_object_set(*out, "os", json_object_get(m, "os"));
	json_object_set(*out, "architecture", json_object_get(m,
	    "architecture"));
	json_decref(m);
	p = sbx_xasprintf("%s/rootfs/%s", s.root,
	    sbx_json_str(rec, "digest") + 7);
	json_object_set_new(*out, "rootfs", json_string(p));
	free(p);
	rc = 0;
out:
	free(name);
	sbx_image_store_close(&s);
	return rc;
}

int
sbx_image_is_path(const char *image)
{
	struct stat st;
	size_t n = strlen(image);

	return image[0] == '/' || image[0] == '.' || (n && image[n - 1] ==
	    '/') || lstat(image, &st) == 0;
}

char *
sbx_image_workdir(const char *image)
{
	struct sbx_image_use u;
	struct sbx_err e = {0};
	const char *wd;
	char *out = NULL;

	if (!image || !strcmp(image, "host") || sbx_image_is_path(image) ||
	    sbx_image_lookup(image, &u, &e) < 0)
		return NULL;
	if ((wd = sbx_json_str(u.config, "WorkingDir")) && *wd) {
		out = sbx_xstrdup(wd);
		/* "/app/" is "/app", as -w takes it. */
		sbx_path_trim(out);
	}
	sbx_image_use_release(&u);
	return out;
}
