/* pull.c - an image from its registry into the local store: the
 * manifest (an index's entry for the platform asked), the config and the
 * layers, each checked against its digest before it is named, then the
 * layers applied once into the image's root filesystem. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/image.h"

/* Blob digest into the store from g, unless it is there; *fetched
 * counts the ones that came. Nothing is named before it is checked. */
static int
fetch_blob(struct sbx_image_store *s, struct sbx_registry *g, const char *digest,
    int *fetched, struct sbx_err *err)
{
	char *path = sbx_image_blob_path(s->root, digest), *dir, fdp[64];
	int fd = -1, rc = -1;

	if (access(path, F_OK) == 0) {
		rc = 0;
		goto out;
	}
	dir = sbx_xasprintf("%s/blobs/sha256", s->root);
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
	free(dir);
	if (fd < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot store a blob in '%s':",
		    s->root);
		goto out;
	}
	if (sbx_registry_blob(g, digest, fd, err) < 0)
		goto out;
	snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
	if (fsync(fd) < 0 || (linkat(AT_FDCWD, fdp, AT_FDCWD, path,
	    AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot store blob %s:", digest);
		goto out;
	}
	(*fetched)++;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}

/* Bytes already checked against digest (a manifest) into the store. */
static int
put_blob(struct sbx_image_store *s, const char *digest, const struct sbx_buf *b,
    struct sbx_err *err)
{
	char *path = sbx_image_blob_path(s->root, digest);
	int rc = 0;

	if (access(path, F_OK) < 0)
		rc = sbx_file_write_atomic(path, b->data, b->len, 0644, 1, err);
	free(path);
	return rc;
}

static int
is_index(const char *type, const json_t *m)
{
	const char *mt = sbx_json_str(m, "mediaType");

	if (!mt || !*mt)
		mt = type;
	return (mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
	    !strcmp(mt, "application/vnd.docker.distribution.manifest.list."
	    "v2+json"))) || (!sbx_json_str(m, "config") &&
	    json_is_array(json_object_get(m, "manifests")));
}

/* The digest of the manifest for platform (os/arch[/variant]) in an
 * index, or NULL with err. */
static const char *
pick_platform(const json_t *idx, const char *platform, const char *name,
    struct sbx_err *err)
{
	char os[64], arch[64], variant[64] = "";
	const json_t *m, *p;
	size_t i;
	int n;

	n = sscanf(platform, "%63[^/]/%63[^/]/%63s", os, arch, variant);
	if (n < 2) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid platform '%s' (want "
		    "os/arch[/variant], e.g. linux/amd64)", platform);
		return NULL;
	}
	json_array_foreach(json_object_get(idx, "manifests"), i, m) {
		p = json_object_get(m, "platform");
		if (!sbx_json_str(p, "os") || strcmp(sbx_json_str(p, "os"), os) ||
		    !sbx_json_str(p, "architecture") ||
		    strcmp(sbx_json_str(p, "architecture"), arch))
			continue;
		if (*variant && (!sbx_json_str(p, "variant") ||
		    strcmp(sbx_json_str(p, "variant"), variant)))
			continue;
		if (sbx_json_str(m, "digest"))
			return sbx_json_str(m, "digest");
	}
	sbx_err_set(err, SBX_EX_NOSANDBOX, "image '%s' has no %s variant",
	    name, platform);
	return NULL;
}

static const char *const layer_types[] = {
	"application/vnd.oci.image.layer.v1.tar",
	"application/vnd.oci.image.layer.v1.tar+gzip",
	"application/vnd.oci.image.layer.v1.tar+zstd",
	"application/vnd.docker.image.rootfs.diff.tar.gzip",
	NULL,
};

int
sbx_image_pull(const char *refstr, const struct sbx_registry_opts *o,
    json_t **out, struct sbx_err *err)
{
	struct sbx_imgref r;
	struct sbx_registry *g = NULL;
	struct sbx_buf body = SBX_BUF_INIT;
	struct sbx_image_store s = {.lock = -1};
	json_t *m = NULL, *layers, *l, *rec, *ldig;
	char *type = NULL, *digest = NULL, *name = NULL, *rootfs = NULL;
	const char *platform = o && o->platform ? o->platform : "linux/amd64";
	const char *cfg, *pick, *lt;
	long long size = 0;
	int fetched = 0, rc = -1, i;
	size_t k;

	*out = NULL;
	if (sbx_imgref_parse(refstr, &r, err) < 0)
		return -1;
	ldig = json_array();
	name = sbx_imgref_name(&r);
	if (!(g = sbx_registry_open(&r, o, err)) ||
	    sbx_registry_manifest(g, r.digest ? r.digest : r.tag, &body,
	    &type, &digest, err) < 0)
		goto out;
	if (!(m = json_loadb(body.data, body.len, 0, NULL)) ||
	    !json_is_object(m)) {
		sbx_err_set(err, SBX_EX_DATA, "the manifest of '%s' is not a "
		    "JSON object", name);
		goto out;
	}
	if (is_index(type, m)) {
		if (!(pick = pick_platform(m, platform, name, err)))
			goto out;
		pick = sbx_xstrdup(pick);
		json_decref(m);
		m = NULL;
		free(type);
		free(digest);
		rc = sbx_registry_manifest(g, pick, &body, &type, &digest, err);
		free((char *)pick);
		if (rc < 0)
			goto out;
		rc = -1;
		if (!(m = json_loadb(body.data, body.len, 0, NULL)) ||
		    !json_is_object(m) || is_index(type, m)) {
			sbx_err_set(err, SBX_EX_DATA, "the %s manifest of '%s' "
			    "is not an image manifest", platform, name);
			goto out;
		}
	}
	cfg = sbx_json_str(json_object_get(m, "config"), "digest");
	layers = json_object_get(m, "layers");
	if (!cfg || !json_is_array(layers)) {
		sbx_err_set(err, SBX_EX_DATA, "the manifest of '%s' names no "
		    "config or no layers (schema 1 manifests are not read)",
		    name);
		goto out;
	}
	json_array_foreach(layers, k, l) {
		lt = sbx_json_str(l, "mediaType");
		for (i = 0; lt && layer_types[i]; i++)
			if (!strcmp(lt, layer_types[i]))
				break;
		if (!lt || !layer_types[i] || !sbx_json_str(l, "digest")) {
			sbx_err_set(err, SBX_EX_DATA, "layer %zu of '%s' is of "
			    "a type sbx cannot unpack ('%s')", k, name,
			    lt ? lt : "none");
			goto out;
		}
		size += sbx_json_int(l, "size", 0);
		json_array_append_new(ldig, json_string(sbx_json_str(l,
		    "digest")));
	}
	if (sbx_image_store_open(&s, err) < 0 ||
	    fetch_blob(&s, g, cfg, &fetched, err) < 0)
		goto out;
	json_array_foreach(layers, k, l)
		if (fetch_blob(&s, g, sbx_json_str(l, "digest"), &fetched,
		    err) < 0)
			goto out;
	if (put_blob(&s, digest, &body, err) < 0 ||
	    sbx_image_unpack(s.root, digest, ldig, &rootfs, err) < 0)
		goto out;
	rec = json_pack("{s:s,s:s,s:O,s:I,s:s,s:I}", "digest", digest,
	    "config", cfg, "layers", ldig, "size", (json_int_t)size,
	    "platform", platform, "pulled_at", (json_int_t)sbx_now());
	json_object_set_new(json_object_get(s.index, "images"), name, rec);
	if (sbx_image_store_save(&s, err) < 0)
		goto out;
	*out = json_deep_copy(rec);
	json_object_set_new(*out, "image", json_string(name));
	json_object_set_new(*out, "fetched", json_integer(fetched));
	json_object_set_new(*out, "rootfs", json_string(rootfs));
	rc = 0;
out:
	sbx_image_store_close(&s);
	json_decref(m);
	json_decref(ldig);
	free(rootfs);
	sbx_buf_release(&body);
	free(type);
	free(digest);
	free(name);
	sbx_registry_close(g);
	sbx_imgref_release(&r);
	return rc;
}
