/* store.c - the local image store: content-addressed blobs (each named
 * by its sha256 only once what arrived was checked against it) and an
 * index of the images pulled, name -> manifest, under a lock.
 *
 *   ROOT/blobs/sha256/HEX   manifests, configs, layers (as they came)
 *   ROOT/images.json        {"schema":1,"images":{NAME:{...}}}
 *   ROOT/.lock              held while the index changes */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image.h"

#define INDEX_SCHEMA 1

char *
sbx_image_root(void)
{
	const char *x, *home;

	if ((x = sbx_config_get("image.dir", NULL)) && *x)
		return sbx_xstrdup(x);
	if (geteuid() == 0)
		return sbx_xstrdup("/var/lib/sbx/image");
	if ((x = getenv("XDG_DATA_HOME")) && *x == '/')
		return sbx_xasprintf("%s/sbx/image", x);
	if ((home = getenv("HOME")) && *home)
		return sbx_xasprintf("%s/.local/share/sbx/image", home);
	return sbx_xasprintf("/tmp/sbx-%u/image", (unsigned)geteuid());
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
	s.root = sbx_image_root();
	/* Written whole (temp, rename): read without the lock. */
	p = sbx_xasprintf("%s/images.json", s.root);
	s.index = access(p, F_OK) == 0 ? sbx_json_load_object(p, &e) : NULL;
	free(p);
	if (!s.index)
		s.index = json_pack("{s:{}}", "images");
	if (!(rec = sbx_image_find(&s, ref, &u->name, err))) {
		err->code = SBX_EX_USAGE;
		goto out;
	}
	u->digest = sbx_xstrdup(sbx_json_str(rec, "digest"));
	u->config_digest = sbx_json_str(rec, "config") ?
	    sbx_xstrdup(sbx_json_str(rec, "config")) : NULL;
	u->rootfs = sbx_xasprintf("%s/rootfs/%s", s.root, u->digest + 7);
	u->config = image_config(s.root, u->config_digest);
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
	char *root = sbx_image_root();

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
