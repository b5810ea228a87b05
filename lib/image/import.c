/* import.c - images into the local store from files, and out again: a
 * docker-archive tar (docker save), an OCI image layout tar, or a root
 * filesystem (a directory or a tar) made one layer; export writes the OCI
 * layout with docker's manifest.json beside it, as docker save does since
 * Docker 25, so that docker load of any age and import both read it.
 *
 * What a tar holds is staged under ROOT/rootfs/.tmp-import-XXXXXX (prune
 * removes what a killed import left), each file hashed as it comes; a
 * blob is renamed into the store only once its digest is checked and the
 * whole image resolved. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <nettle/sha2.h>

#include "image/image.h"

#define SMALL_JSON (4 << 20) /* manifest.json, index.json: at most */
#define DIGEST_LEN (7 + 64)
#define OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define OCI_LAYER "application/vnd.oci.image.layer.v1.tar"
#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin" \
    ":/usr/bin:/sbin:/bin"

enum kind { K_ROOTFS, K_DOCKER, K_OCI };

struct imp {
	struct sbx_image_store s;
	const char *src;     /* as the user named it */
	char *stage;         /* ROOT/rootfs/.tmp-import-XXXXXX */
	int nstaged;
	json_t *staged;      /* tar name -> {"digest","size","path"} */
	json_t *docker;      /* manifest.json, or NULL */
	json_t *index;       /* index.json, or NULL */
	int layout;          /* an oci-layout file is there */
};

static void
hex_digest(struct sha256_ctx *c, char out[DIGEST_LEN + 1])
{
	uint8_t d[SHA256_DIGEST_SIZE];
	int i;

	sha256_digest(c, sizeof d, d);
	memcpy(out, "sha256:", 7);
	for (i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

static void
digest_of(const void *p, size_t n, char out[DIGEST_LEN + 1])
{
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, n, p);
	hex_digest(&c, out);
}

/* A member's name as the formats write it: no "./" before it. */
static const char *
member(struct archive_entry *ae)
{
	const char *p = archive_entry_pathname(ae);

	while (p && p[0] == '.' && p[1] == '/')
		p += 2;
	return p ? p : "";
}

static struct archive *
reader(const char *src, int fd, int raw, struct sbx_err *err)
{
	struct archive *a = archive_read_new();

	if (raw) {
		archive_read_support_format_raw(a);
	} else {
		archive_read_support_format_tar(a);
		archive_read_support_format_gnutar(a);
	}
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_bzip2(a);
	if (lseek(fd, 0, SEEK_SET) < 0 ||
	    archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' is not a tar archive: "
		    "%s", src, archive_error_string(a));
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* The data of the current member (or the raw stream) into fd, hashed;
 * fd -1 keeps it in b instead (at most SMALL_JSON). */
static int
copy_data(struct imp *im, struct archive *a, int fd, struct sbx_buf *b,
    char digest[DIGEST_LEN + 1], long long *size, struct sbx_err *err)
{
	static char buf[1 << 16];
	struct sha256_ctx c;
	la_ssize_t n;

	sha256_init(&c);
	*size = 0;
	while ((n = archive_read_data(a, buf, sizeof buf)) > 0) {
		sha256_update(&c, (size_t)n, (const uint8_t *)buf);
		*size += n;
		if (fd < 0 && *size <= SMALL_JSON)
			sbx_buf_add(b, buf, (size_t)n);
		else if (fd >= 0 ? sbx_write_all(fd, buf, (size_t)n) < 0 : 1)
			return sbx_err_set(err, fd >= 0 ? SBX_EX_FAIL :
			    SBX_EX_USAGE, fd >= 0 ? "cannot stage '%s':" :
			    "'%s': a JSON file too big", im->src);
	}
	if (n < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "'%s' is corrupt: %s",
		    im->src, archive_error_string(a));
	hex_digest(&c, digest);
	return 0;
}

/* Pass 1: what the tar is. Reads manifest.json, index.json and
 * oci-layout; a corrupt or truncated tar fails here, before anything is
 * stored. */
static int
scan(struct imp *im, int fd, enum kind *k, struct sbx_err *err)
{
	struct archive *a = reader(im->src, fd, 0, err);
	struct archive_entry *ae;
	struct sbx_buf b = SBX_BUF_INIT;
	char dg[DIGEST_LEN + 1];
	long long size;
	const char *name;
	json_t **to;
	int r, n = 0, rc = -1;

	if (!a)
		return -1;
	while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
		n++;
		name = member(ae);
		if (archive_entry_filetype(ae) != AE_IFREG)
			continue;
		if (!strcmp(name, "oci-layout"))
			im->layout = 1;
		to = !strcmp(name, "manifest.json") ? &im->docker :
		    !strcmp(name, "index.json") ? &im->index : NULL;
		if (!to)
			continue;
		b.len = 0;
		if (copy_data(im, a, -1, &b, dg, &size, err) < 0)
			goto out;
		json_decref(*to);
		*to = json_loadb(b.data, b.len, 0, NULL);
	}
	if (r != ARCHIVE_EOF || n == 0) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' is not a whole tar "
		    "archive: %s", im->src, n ? archive_error_string(a) :
		    "no member");
		goto out;
	}
	if (im->layout && json_is_object(im->index))
		*k = K_OCI;
	else if (json_is_object(json_array_get(im->docker, 0)) &&
	    sbx_json_str(json_array_get(im->docker, 0), "Config"))
		*k = K_DOCKER;
	else
		*k = K_ROOTFS;
	rc = 0;
out:
	sbx_buf_release(&b);
	archive_read_free(a);
	return rc;
}

/* A new file of the stage (its path: malloc'd). */
static int
stage_open(struct imp *im, char **path, struct sbx_err *err)
{
	int fd;

	*path = sbx_xasprintf("%s/%d", im->stage, im->nstaged++);
	fd = open(*path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot stage '%s':", *path);
		free(*path);
		*path = NULL;
	}
	return fd;
}

static int
wanted(const struct imp *im, const char *name, enum kind k)
{
	const json_t *m = json_array_get(im->docker, 0), *l;
	size_t i;

	if (k == K_OCI)
		return !strncmp(name, "blobs/sha256/", 13) &&
		    strlen(name) == 13 + 64;
	if (sbx_json_str(m, "Config") && !strcmp(sbx_json_str(m, "Config"),
	    name))
		return 1;
	json_array_foreach(json_object_get(m, "Layers"), i, l)
		if (json_is_string(l) && !strcmp(json_string_value(l), name))
			return 1;
	return 0;
}

/* Pass 2: the members an image is made of, staged and hashed; a blob
 * of the OCI layout is checked against its name as it comes. */
static int
stage_members(struct imp *im, int fd, enum kind k, struct sbx_err *err)
{
	struct archive *a = reader(im->src, fd, 0, err);
	struct archive_entry *ae;
	char dg[DIGEST_LEN + 1], *path = NULL;
	long long size;
	const char *name;
	int r, out = -1, rc = -1;

	if (!a)
		return -1;
	while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
		name = member(ae);
		if (archive_entry_filetype(ae) != AE_IFREG ||
		    !wanted(im, name, k) || json_object_get(im->staged, name))
			continue;
		if ((out = stage_open(im, &path, err)) < 0 ||
		    copy_data(im, a, out, NULL, dg, &size, err) < 0)
			goto out;
		if (fsync(out) < 0 || close(out) < 0) {
			out = -1;
			sbx_err_set(err, SBX_EX_FAIL, "cannot stage '%s':",
			    path);
			goto out;
		}
		out = -1;
		if (k == K_OCI && strcmp(dg + 7, name + 13)) {
			sbx_err_set(err, SBX_EX_DATA, "blob sha256:%s of '%s' "
			    "is corrupt: what it holds has digest %s",
			    name + 13, im->src, dg);
			goto out;
		}
		json_object_set_new(im->staged, name, json_pack("{s:s,s:I,s:s}",
		    "digest", dg, "size", (json_int_t)size, "path", path));
		free(path);
		path = NULL;
	}
	if (r != ARCHIVE_EOF) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' is not a whole tar "
		    "archive: %s", im->src, archive_error_string(a));
		goto out;
	}
	rc = 0;
out:
	if (out >= 0)
		close(out);
	free(path);
	archive_read_free(a);
	return rc;
}

/* The staged member of digest (OCI: blobs/sha256/HEX), or NULL with err
 * (bad input: the archive lacks it). */
static const json_t *
staged_blob(struct imp *im, const char *digest, struct sbx_err *err)
{
	char name[32 + DIGEST_LEN];
	const json_t *f;

	if (!digest || !sbx_image_valid_digest(digest)) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' names a blob by no "
		    "sha256 digest", im->src);
		return NULL;
	}
	snprintf(name, sizeof name, "blobs/sha256/%s", digest + 7);
	if (!(f = json_object_get(im->staged, name)))
		sbx_err_set(err, SBX_EX_USAGE, "blob %s is missing from '%s'",
		    digest, im->src);
	return f;
}

/* The staged file into the store as blob digest. */
static int
link_blob(struct imp *im, const json_t *f, const char *digest,
    struct sbx_err *err)
{
	char *to = sbx_image_blob_path(im->s.root, digest);
	int rc = 0;

	if (access(to, F_OK) < 0 && rename(sbx_json_str(f, "path"), to) < 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot store blob %s:",
		    digest);
	free(to);
	return rc;
}

static int
put_json(struct imp *im, const char *digest, const char *data,
    struct sbx_err *err)
{
	char *p = sbx_image_blob_path(im->s.root, digest);
	int rc = 0;

	if (access(p, F_OK) < 0)
		rc = sbx_file_write_atomic(p, data, strlen(data), 0644, 1,
		    err);
	free(p);
	return rc;
}

static const char *const layer_types[] = {
	OCI_LAYER,
	OCI_LAYER "+gzip",
	OCI_LAYER "+zstd",
	"application/vnd.docker.image.rootfs.diff.tar",
	"application/vnd.docker.image.rootfs.diff.tar.gzip",
	NULL,
};

/* What the image is: its manifest's bytes and digest, its config's
 * digest, its layers' (as staged members: m["layers"] order). */
struct image {
	char *manifest;      /* its bytes (malloc'd) */
	char digest[DIGEST_LEN + 1];
	json_t *m;           /* parsed */
	char *name;          /* the name the archive gives it, or NULL */
};

static void
image_release(struct image *i)
{
	free(i->manifest);
	json_decref(i->m);
	free(i->name);
	memset(i, 0, sizeof *i);
}

/* A staged JSON file, parsed (an object), or NULL with err. */
static json_t *
staged_json(struct imp *im, const json_t *f, const char *what,
    struct sbx_err *err)
{
	json_t *o = json_load_file(sbx_json_str(f, "path"), 0, NULL);

	if (!json_is_object(o)) {
		json_decref(o);
		sbx_err_set(err, SBX_EX_USAGE, "the %s in '%s' is not a JSON "
		    "object", what, im->src);
		return NULL;
	}
	return o;
}

/* The file's bytes (malloc'd, NUL-terminated), or NULL. */
static char *
slurp(const char *path, size_t *n)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char buf[8192];
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	while ((r = read(fd, buf, sizeof buf)) > 0)
		sbx_buf_add(&b, buf, (size_t)r);
	close(fd);
	sbx_buf_add(&b, "", 1);
	*n = b.len - 1;
	return b.data;
}

static int
platform_is(const json_t *d, const char *os, const char *arch)
{
	const json_t *p = json_object_get(d, "platform");

	return !p || (sbx_json_str(p, "os") && !strcmp(sbx_json_str(p, "os"),
	    os) && sbx_json_str(p, "architecture") &&
	    !strcmp(sbx_json_str(p, "architecture"), arch));
}

/* The OCI layout's image: index.json's first manifest for linux/amd64
 * (an index in it is followed once). */
static int
resolve_oci(struct imp *im, struct image *img, struct sbx_err *err)
{
	const json_t *d = NULL, *f, *x;
	const json_t *idx = im->index;
	json_t *sub = NULL;
	const char *name;
	size_t i, n;
	int depth;

	for (depth = 0; depth < 2; depth++) {
		d = NULL;
		json_array_foreach(json_object_get(idx, "manifests"), i, x)
			if (platform_is(x, "linux", "amd64")) {
				d = x;
				break;
			}
		if (!d) {
			sbx_err_set(err, SBX_EX_USAGE, "'%s' holds no linux/amd64 "
			    "image", im->src);
			goto fail;
		}
		if (!img->name && (name = sbx_json_str(json_object_get(d,
		    "annotations"), "io.containerd.image.name")))
			img->name = sbx_xstrdup(name);
		if (!(f = staged_blob(im, sbx_json_str(d, "digest"), err)))
			goto fail;
		free(img->manifest);
		if (!(img->manifest = slurp(sbx_json_str(f, "path"), &n)))
			return sbx_err_set(err, SBX_EX_FAIL, "cannot read "
			    "'%s':", sbx_json_str(f, "path"));
		json_decref(img->m);
		img->m = json_loadb(img->manifest, n, 0, NULL);
		snprintf(img->digest, sizeof img->digest, "%s",
		    sbx_json_str(d, "digest"));
		if (!json_is_object(img->m)) {
			sbx_err_set(err, SBX_EX_USAGE, "manifest %s in '%s' is "
			    "not a JSON object", img->digest, im->src);
			goto fail;
		}
		if (!json_is_array(json_object_get(img->m, "manifests")))
			break;
		json_decref(sub);
		idx = sub = json_incref(img->m);
	}
	json_decref(sub);
	return 0;
fail:
	json_decref(sub);
	return -1;
}

/* docker save's image: a manifest made for it from manifest.json's first
 * entry, its layers checked against the config's diff_ids. */
static int
resolve_docker(struct imp *im, struct image *img, struct sbx_err *err)
{
	const json_t *e = json_array_get(im->docker, 0), *f, *l;
	json_t *cfg = NULL, *layers = json_array(), *diffs;
	const char *cname = sbx_json_str(e, "Config"), *base, *want;
	char hex[65];
	size_t i;
	int rc = -1;

	if (!(f = json_object_get(im->staged, cname))) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' lacks the config '%s' its "
		    "manifest.json names", im->src, cname);
		goto out;
	}
	/* Named by its digest (HEX.json, blobs/sha256/HEX): checked. */
	base = strrchr(cname, '/') ? strrchr(cname, '/') + 1 : cname;
	if (sscanf(base, "%64[0-9a-f]", hex) == 1 && strlen(hex) == 64 &&
	    strcmp(hex, sbx_json_str(f, "digest") + 7)) {
		sbx_err_set(err, SBX_EX_DATA, "config %s of '%s' is corrupt: "
		    "what it holds has digest %s", cname, im->src,
		    sbx_json_str(f, "digest"));
		goto out;
	}
	if (!(cfg = staged_json(im, f, "config", err)))
		goto out;
	diffs = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
	if (json_array_size(diffs) != json_array_size(json_object_get(e,
	    "Layers"))) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s': its config and "
		    "manifest.json name different layers", im->src);
		goto out;
	}
	json_array_foreach(json_object_get(e, "Layers"), i, l) {
		if (!(f = json_object_get(im->staged, json_string_value(l)))) {
			sbx_err_set(err, SBX_EX_USAGE, "layer '%s' is missing "
			    "from '%s'", json_string_value(l), im->src);
			goto out;
		}
		want = json_string_value(json_array_get(diffs, i));
		if (!want || strcmp(want, sbx_json_str(f, "digest"))) {
			sbx_err_set(err, SBX_EX_DATA, "layer '%s' of '%s' is "
			    "corrupt: what it holds has digest %s, not %s",
			    json_string_value(l), im->src, sbx_json_str(f,
			    "digest"), want ? want : "none");
			goto out;
		}
		json_array_append_new(layers, json_pack("{s:s,s:s,s:O}",
		    "mediaType", OCI_LAYER, "digest", want, "size",
		    json_object_get(f, "size")));
	}
	f = json_object_get(im->staged, cname);
	img->m = json_pack("{s:i,s:s,s:{s:s,s:s,s:O},s:O}", "schemaVersion", 2,
	    "mediaType", OCI_MANIFEST, "config", "mediaType", OCI_CONFIG,
	    "digest", sbx_json_str(f, "digest"), "size",
	    json_object_get(f, "size"), "layers", layers);
	img->manifest = json_dumps(img->m, JSON_COMPACT | JSON_SORT_KEYS);
	digest_of(img->manifest, strlen(img->manifest), img->digest);
	/* Its name: the first of RepoTags. */
	if (json_string_value(json_array_get(json_object_get(e, "RepoTags"),
	    0)))
		img->name = sbx_xstrdup(json_string_value(json_array_get(
		    json_object_get(e, "RepoTags"), 0)));
	/* The config is found again by its digest. */
	{
		char key[32 + DIGEST_LEN];

		snprintf(key, sizeof key, "blobs/sha256/%s",
		    sbx_json_str(f, "digest") + 7);
		json_object_set(im->staged, key, (json_t *)f);
		json_array_foreach(json_object_get(e, "Layers"), i, l) {
			snprintf(key, sizeof key, "blobs/sha256/%s",
			    json_string_value(json_array_get(diffs, i)) + 7);
			json_object_set(im->staged, key, json_object_get(
			    im->staged, json_string_value(l)));
		}
	}
	rc = 0;
out:
	json_decref(cfg);
	json_decref(layers);
	return rc;
}

/* --- a root filesystem: one layer, a minimal config ---------------- */

struct hashed {
	int fd;
	struct sha256_ctx c;
	long long size;
};

static la_ssize_t
hashed_write(struct archive *a, void *arg, const void *buf, size_t n)
{
	struct hashed *h = arg;

	(void)a;
	if (sbx_write_all(h->fd, buf, n) < 0)
		return -1;
	sha256_update(&h->c, n, buf);
	h->size += (long long)n;
	return (la_ssize_t)n;
}

/* The tree at dir as a tar into h (names "./...", owners and modes as
 * they are, no mount below it entered). */
static int
tar_dir(const char *dir, struct hashed *h, struct sbx_err *err)
{
	static char buf[1 << 16];
	struct archive *disk = archive_read_disk_new();
	struct archive *w = archive_write_new();
	struct archive_entry *ae = archive_entry_new();
	size_t n = strlen(dir);
	const char *name;
	char *rel;
	la_ssize_t got;
	int r, rc = -1;

	archive_write_set_format_pax_restricted(w);
	archive_write_set_bytes_in_last_block(w, 1);
	archive_read_disk_set_symlink_physical(disk);
	archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS
	    | ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
	    ARCHIVE_READDISK_NO_FFLAGS | ARCHIVE_READDISK_NO_SPARSE);
	if (archive_write_open2(w, h, NULL, hashed_write, NULL, NULL) !=
	    ARCHIVE_OK || archive_read_disk_open(disk, dir) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s': %s", dir,
		    archive_error_string(disk));
		goto out;
	}
	while ((r = archive_read_next_header2(disk, ae)) != ARCHIVE_EOF) {
		if (r < ARCHIVE_WARN) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s': %s",
			    dir, archive_error_string(disk));
			goto out;
		}
		archive_read_disk_descend(disk);
		name = archive_entry_pathname(ae);
		if (archive_entry_filetype(ae) == AE_IFSOCK ||
		    strncmp(name, dir, n))
			continue;
		for (name += n; *name == '/'; name++)
			;
		rel = sbx_xasprintf("./%s", name);
		archive_entry_copy_pathname(ae, rel);
		free(rel);
		archive_entry_unset_atime(ae);
		archive_entry_unset_ctime(ae);
		archive_entry_unset_birthtime(ae);
		archive_entry_set_uname(ae, NULL);
		archive_entry_set_gname(ae, NULL);
		if (archive_write_header(w, ae) < ARCHIVE_WARN)
			goto werr;
		if (archive_entry_filetype(ae) != AE_IFREG)
			continue;
		while ((got = archive_read_data(disk, buf, sizeof buf)) > 0)
			if (archive_write_data(w, buf, (size_t)got) != got)
				goto werr;
		if (got < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s': %s",
			    dir, archive_error_string(disk));
			goto out;
		}
	}
	if (archive_write_close(w) != ARCHIVE_OK)
		goto werr;
	rc = 0;
	goto out;
werr:
	sbx_err_set(err, SBX_EX_FAIL, "cannot stage '%s': %s", dir,
	    archive_error_string(w));
out:
	archive_entry_free(ae);
	archive_write_free(w);
	archive_read_free(disk);
	return rc;
}

/* The root filesystem (a directory, or the tar on fd, decompressed) as
 * a layer, its config and a manifest. */
static int
resolve_rootfs(struct imp *im, int fd, struct image *img,
    struct sbx_err *err)
{
	struct hashed h = {.fd = -1};
	struct archive *a = NULL;
	struct archive_entry *ae;
	char ldig[DIGEST_LEN + 1], cdig[DIGEST_LEN + 1], *path = NULL;
	char *cfg = NULL, key[32 + DIGEST_LEN];
	json_t *c = NULL;
	int rc = -1;

	if ((h.fd = stage_open(im, &path, err)) < 0)
		return -1;
	sha256_init(&h.c);
	if (fd < 0) {
		if (tar_dir(im->src, &h, err) < 0)
			goto out;
		hex_digest(&h.c, ldig);
	} else {
		if (!(a = reader(im->src, fd, 1, err)) ||
		    archive_read_next_header(a, &ae) != ARCHIVE_OK) {
			sbx_err_set(err, SBX_EX_USAGE, "'%s' is not a tar "
			    "archive", im->src);
			goto out;
		}
		if (copy_data(im, a, h.fd, NULL, ldig, &h.size, err) < 0)
			goto out;
	}
	if (fsync(h.fd) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot stage '%s':", path);
		goto out;
	}
	snprintf(key, sizeof key, "blobs/sha256/%s", ldig + 7);
	json_object_set_new(im->staged, key, json_pack("{s:s,s:I,s:s}",
	    "digest", ldig, "size", (json_int_t)h.size, "path", path));
	/* What a local sandbox's commands find too. */
	c = json_pack("{s:s,s:s,s:{s:[s]},s:{s:s,s:[s]}}", "architecture",
	    "amd64", "os", "linux", "config", "Env", DEFAULT_PATH, "rootfs",
	    "type", "layers", "diff_ids", ldig);
	cfg = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	digest_of(cfg, strlen(cfg), cdig);
	free(path);
	path = NULL;
	close(h.fd);
	/* The config as a staged blob, as the other kinds have it. */
	if ((h.fd = stage_open(im, &path, err)) < 0)
		goto out;
	if (sbx_write_all(h.fd, cfg, strlen(cfg)) < 0 || fsync(h.fd) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot stage '%s':", path);
		goto out;
	}
	snprintf(key, sizeof key, "blobs/sha256/%s", cdig + 7);
	json_object_set_new(im->staged, key, json_pack("{s:s,s:I,s:s}",
	    "digest", cdig, "size", (json_int_t)strlen(cfg), "path", path));
	img->m = json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:[{s:s,s:s,s:I}]}",
	    "schemaVersion", 2, "mediaType", OCI_MANIFEST, "config",
	    "mediaType", OCI_CONFIG, "digest", cdig, "size",
	    (json_int_t)strlen(cfg), "layers", "mediaType", OCI_LAYER,
	    "digest", ldig, "size", (json_int_t)h.size);
	img->manifest = json_dumps(img->m, JSON_COMPACT | JSON_SORT_KEYS);
	digest_of(img->manifest, strlen(img->manifest), img->digest);
	rc = 0;
out:
	if (h.fd >= 0)
		close(h.fd);
	if (a)
		archive_read_free(a);
	json_decref(c);
	free(cfg);
	free(path);
	return rc;
}

/* The image resolved and its staged blobs checked: into the store, its
 * layers applied, named. */
static int
store_image(struct imp *im, struct image *img, const char *name,
    json_t **out, struct sbx_err *err)
{
	const char *cfg = sbx_json_str(json_object_get(img->m, "config"),
	    "digest"), *lt;
	const json_t *l, *f;
	json_t *ldig = json_array(), *rec;
	char *rootfs = NULL;
	long long size = 0;
	size_t k;
	int i, rc = -1;

	if (!cfg || !json_is_array(json_object_get(img->m, "layers"))) {
		sbx_err_set(err, SBX_EX_USAGE, "the manifest in '%s' names no "
		    "config or no layers", im->src);
		goto out;
	}
	if (!(f = staged_blob(im, cfg, err)))
		goto out;
	json_array_foreach(json_object_get(img->m, "layers"), k, l) {
		lt = sbx_json_str(l, "mediaType");
		for (i = 0; lt && layer_types[i]; i++)
			if (!strcmp(lt, layer_types[i]))
				break;
		if (!lt || !layer_types[i]) {
			sbx_err_set(err, SBX_EX_USAGE, "layer %zu of '%s' is of "
			    "a type sbx cannot unpack ('%s')", k, im->src,
			    lt ? lt : "none");
			goto out;
		}
		if (!staged_blob(im, sbx_json_str(l, "digest"), err))
			goto out;
		size += sbx_json_int(l, "size", 0);
		json_array_append_new(ldig, json_string(sbx_json_str(l,
		    "digest")));
	}
	/* All there and checked: only now into the store. */
	if (link_blob(im, f, cfg, err) < 0)
		goto out;
	json_array_foreach(ldig, k, l)
		if (link_blob(im, staged_blob(im, json_string_value(l), err),
		    json_string_value(l), err) < 0)
			goto out;
	if (put_json(im, img->digest, img->manifest, err) < 0 ||
	    sbx_image_unpack(im->s.root, img->digest, ldig, &rootfs, err) < 0)
		goto out;
	rec = json_pack("{s:s,s:s,s:O,s:I,s:s,s:I}", "digest", img->digest,
	    "config", cfg, "layers", ldig, "size", (json_int_t)size,
	    "platform", "linux/amd64", "pulled_at", (json_int_t)sbx_now());
	json_object_set_new(json_object_get(im->s.index, "images"), name, rec);
	if (sbx_image_store_save(&im->s, err) < 0)
		goto out;
	*out = json_deep_copy(rec);
	json_object_set_new(*out, "image", json_string(name));
	json_object_set_new(*out, "rootfs", json_string(rootfs));
	rc = 0;
out:
	free(rootfs);
	json_decref(ldig);
	return rc;
}

/* The store's name of the image: -t's, else the archive's; a reference
 * with a tag (latest when none), no digest. */
static char *
store_name(const char *given, const char *own, const char *src,
    struct sbx_err *err)
{
	struct sbx_imgref r;
	const char *n = given ? given : own;
	char *name;

	if (!n) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' names no image: give it "
		    "one with -t NAME", src);
		return NULL;
	}
	if (strchr(n, '@') || sbx_imgref_parse(n, &r, err) < 0) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid image name '%s' (a "
		    "reference with no digest)", n);
		return NULL;
	}
	name = sbx_imgref_name(&r);
	sbx_imgref_release(&r);
	return name;
}

/* stdin into an unnamed file of the store (nothing left if killed),
 * read twice from there; before the store's lock, which the writer of
 * the pipe (sbx-image export) may hold. */
static int
spool(struct sbx_err *err)
{
	char buf[1 << 16], *root = sbx_image_root();
	ssize_t n;
	int fd = -1;

	if (sbx_mkdirs(root, 0755, err) < 0)
		goto out;
	if ((fd = open(root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot stage stdin in '%s':",
		    root);
		goto out;
	}
	while ((n = read(0, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || sbx_write_all(fd, buf, (size_t)n) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot stage stdin:");
			close(fd);
			fd = -1;
			goto out;
		}
	}
out:
	free(root);
	return fd;
}

int
sbx_image_import(const char *src, const char *tag, json_t **out,
    struct sbx_err *err)
{
	struct imp im = {.src = src, .s = {.lock = -1}};
	struct image img = {0};
	struct stat st;
	enum kind k = K_ROOTFS;
	char *name = NULL, *name_dir;
	int fd = -1, rc = -1, isdir;

	*out = NULL;
	if (strcmp(src, "-") && stat(src, &st) < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "cannot open '%s':", src);
	isdir = strcmp(src, "-") && S_ISDIR(st.st_mode);
	if (isdir && !tag)
		return sbx_err_set(err, SBX_EX_USAGE, "'%s' names no image: "
		    "give it one with -t NAME", src);
	if (tag && !(name = store_name(tag, NULL, src, err)))
		return -1;
	if (!strcmp(src, "-")) {
		im.src = "stdin";
		if ((fd = spool(err)) < 0)
			goto out;
	}
	if (sbx_image_store_open(&im.s, err) < 0)
		goto out;
	im.stage = sbx_xasprintf("%s/rootfs/.tmp-import-XXXXXX", im.s.root);
	name_dir = sbx_xasprintf("%s/rootfs", im.s.root);
	rc = sbx_mkdirs(name_dir, 0755, err);
	free(name_dir);
	if (rc < 0)
		goto out;
	rc = -1;
	if (!mkdtemp(im.stage)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make '%s':", im.stage);
		free(im.stage);
		im.stage = NULL;
		goto out;
	}
	im.staged = json_object();
	if (!isdir) {
		if (fd < 0 && (fd = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
			sbx_err_set(err, SBX_EX_USAGE, "cannot open '%s':",
			    src);
			goto out;
		}
		if (scan(&im, fd, &k, err) < 0)
			goto out;
	}
	if (k == K_ROOTFS && !name) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' names no image: give it "
		    "one with -t NAME", im.src);
		goto out;
	}
	if (k != K_ROOTFS && stage_members(&im, fd, k, err) < 0)
		goto out;
	if ((k == K_OCI ? resolve_oci(&im, &img, err) : k == K_DOCKER ?
	    resolve_docker(&im, &img, err) : resolve_rootfs(&im, isdir ? -1 :
	    fd, &img, err)) < 0)
		goto out;
	if (!name && !(name = store_name(NULL, img.name, im.src, err)))
		goto out;
	rc = store_image(&im, &img, name, out, err);
	if (rc == 0)
		json_object_set_new(*out, "format", json_string(k == K_OCI ?
		    "oci" : k == K_DOCKER ? "docker" : "rootfs"));
out:
	if (fd >= 0)
		close(fd);
	if (im.stage)
		sbx_rmtree(im.stage);
	free(im.stage);
	json_decref(im.staged);
	json_decref(im.docker);
	json_decref(im.index);
	image_release(&img);
	free(name);
	sbx_image_store_close(&im.s);
	return rc;
}

/* --- export -------------------------------------------------------- */

static int
add_bytes(struct archive *w, const char *name, const char *data, size_t n)
{
	struct archive_entry *ae = archive_entry_new();
	int rc = 0;

	archive_entry_set_pathname(ae, name);
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, 0644);
	archive_entry_set_size(ae, (la_int64_t)n);
	if (archive_write_header(w, ae) != ARCHIVE_OK ||
	    archive_write_data(w, data, n) != (la_ssize_t)n)
		rc = -1;
	archive_entry_free(ae);
	return rc;
}

static int
add_json(struct archive *w, const char *name, const json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);
	int rc = s ? add_bytes(w, name, s, strlen(s)) : -1;

	free(s);
	return rc;
}

/* Blob digest (open on fd) as blobs/sha256/HEX. */
static int
add_blob(struct archive *w, int fd, const char *digest, struct sbx_err *err)
{
	static char buf[1 << 16];
	struct archive_entry *ae;
	struct stat st;
	char name[32 + DIGEST_LEN];
	ssize_t n = 0;
	int rc;

	if (fstat(fd, &st) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read blob %s:",
		    digest);
	snprintf(name, sizeof name, "blobs/sha256/%s", digest + 7);
	ae = archive_entry_new();
	archive_entry_set_pathname(ae, name);
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, 0644);
	archive_entry_set_size(ae, st.st_size);
	rc = archive_write_header(w, ae) == ARCHIVE_OK ? 0 : -1;
	archive_entry_free(ae);
	while (rc == 0 && (n = read(fd, buf, sizeof buf)) > 0)
		if (archive_write_data(w, buf, (size_t)n) != n)
			rc = -1;
	if (rc < 0 || n < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot write the tar: %s",
		    n < 0 ? strerror(errno) : archive_error_string(w));
	return 0;
}

/* The name as docker writes it in RepoTags: no docker.io/library/. */
static char *
docker_tag(const char *name)
{
	if (strchr(name, '@'))
		return NULL;
	if (!strncmp(name, "docker.io/library/", 18))
		return sbx_xstrdup(name + 18);
	if (!strncmp(name, "docker.io/", 10))
		return sbx_xstrdup(name + 10);
	return sbx_xstrdup(name);
}

int
sbx_image_export(const char *ref, int fd, struct sbx_err *err)
{
	struct sbx_image_store s;
	struct archive *w = NULL;
	const json_t *rec, *l;
	json_t *idx = NULL, *dm = NULL, *m = NULL, *layers, *blobs;
	char *name = NULL, *p = NULL, *tag = NULL, *bytes = NULL, key[300];
	const char *dg, *cfg;
	size_t i, n, nb = 0;
	int *fds = NULL, rc = -1;

	if (sbx_image_store_open(&s, err) < 0)
		return -1;
	if (!(rec = sbx_image_find(&s, ref, &name, err)))
		goto out;
	dg = sbx_json_str(rec, "digest");
	cfg = sbx_json_str(rec, "config");
	p = dg ? sbx_image_blob_path(s.root, dg) : NULL;
	if (!p || !cfg || !(bytes = slurp(p, &n)) ||
	    !(m = json_loadb(bytes, n, 0, NULL))) {
		sbx_err_set(err, SBX_EX_FAIL, "the manifest of '%s' is not in "
		    "the store", name);
		goto out;
	}
	/* Its blobs held open: the lock goes before the tar is written (a
	 * reader of the pipe may be sbx-image import, which takes it). */
	blobs = json_pack("[s,s]", dg, cfg);
	json_array_extend(blobs, json_object_get(rec, "layers"));
	fds = sbx_xcalloc(json_array_size(blobs), sizeof *fds);
	json_array_foreach(blobs, nb, l) {
		free(p);
		p = sbx_image_blob_path(s.root, json_string_value(l));
		if ((fds[nb] = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot open blob '%s':",
			    p);
			json_decref(blobs);
			goto out;
		}
	}
	tag = docker_tag(name);
	idx = json_pack("{s:i,s:s,s:[{s:s,s:s,s:I,s:{s:s}}]}",
	    "schemaVersion", 2, "mediaType", OCI_INDEX, "manifests",
	    "mediaType", sbx_json_str(m, "mediaType") ?
	    sbx_json_str(m, "mediaType") : OCI_MANIFEST, "digest", dg, "size",
	    (json_int_t)n, "annotations", "io.containerd.image.name", name);
	if (tag && strrchr(name, ':') > strrchr(name, '/'))
		json_object_set_new(json_object_get(json_array_get(
		    json_object_get(idx, "manifests"), 0), "annotations"),
		    "org.opencontainers.image.ref.name",
		    json_string(strrchr(name, ':') + 1));
	layers = json_array();
	json_array_foreach(json_object_get(rec, "layers"), i, l) {
		snprintf(key, sizeof key, "blobs/sha256/%s",
		    json_string_value(l) + 7);
		json_array_append_new(layers, json_string(key));
	}
	snprintf(key, sizeof key, "blobs/sha256/%s", cfg + 7);
	dm = json_pack("[{s:s,s:[],s:o}]", "Config", key, "RepoTags",
	    "Layers", layers);
	if (tag)
		json_array_append_new(json_object_get(json_array_get(dm, 0),
		    "RepoTags"), json_string(tag));
	sbx_image_store_close(&s);
	w = archive_write_new();
	archive_write_set_format_pax_restricted(w);
	if (archive_write_open_fd(w, fd) != ARCHIVE_OK ||
	    add_bytes(w, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}",
	    30) < 0 || add_json(w, "index.json", idx) < 0 ||
	    add_json(w, "manifest.json", dm) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write the tar: %s",
		    archive_error_string(w));
		json_decref(blobs);
		goto out;
	}
	json_array_foreach(blobs, i, l)
		if (add_blob(w, fds[i], json_string_value(l), err) < 0) {
			json_decref(blobs);
			goto out;
		}
	json_decref(blobs);
	if (archive_write_close(w) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write the tar: %s",
		    archive_error_string(w));
		goto out;
	}
	rc = 0;
out:
	while (nb-- > 0)
		if (fds[nb] >= 0)
			close(fds[nb]);
	free(fds);
	if (w)
		archive_write_free(w);
	json_decref(idx);
	json_decref(dm);
	json_decref(m);
	free(bytes);
	free(tag);
	free(p);
	free(name);
	sbx_image_store_close(&s);
	return rc;
}
