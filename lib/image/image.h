/* image.h - OCI images: references, a registry client (the OCI
 * distribution API over libcurl) and the local image store. */
#ifndef SBX_IMAGE_H
#define SBX_IMAGE_H

#include <pthread.h>

#include "internal.h"

/* A reference as Docker reads one: [DOMAIN/]PATH[:TAG][@DIGEST]. */
struct sbx_imgref {
	char *domain;   /* "docker.io", "127.0.0.1:5000" */
	char *repo;     /* "library/python" */
	char *tag;      /* "3.12-slim"; "latest" when neither is given */
	char *digest;   /* "sha256:HEX", or NULL */
};

/* Parse s (bad input: SBX_EX_USAGE naming it). */
int sbx_imgref_parse(const char *s, struct sbx_imgref *r,
    struct sbx_err *err);
/* s is a repository's name, [DOMAIN/]PATH, with no tag nor digest. */
int sbx_imgref_valid_name(const char *s);
/* The full name, "DOMAIN/REPO:TAG" or "DOMAIN/REPO@DIGEST" (malloc'd). */
char *sbx_imgref_name(const struct sbx_imgref *r);
void sbx_imgref_release(struct sbx_imgref *r);
/* "sha256:" and 64 lowercase hex digits. */
int sbx_image_valid_digest(const char *d);
/* True for a registry on this machine's loopback (plain HTTP allowed). */
int sbx_registry_loopback(const char *domain);

struct sbx_registry;

/* The Engine API's X-Registry-Auth value for domain (base64url JSON,
 * malloc'd: wipe it), or NULL when the user has no credentials there. */
char *sbx_registry_engine_auth(const char *domain);

struct sbx_registry_opts {
	const char *const *insecure; /* domains spoken to over plain HTTP,
				      * NULL-terminated, or NULL */
	const char *platform;        /* "linux/amd64" (the default) */
	int progress;                /* a line of the layers' bytes on
				      * stderr (a terminal's) */
};

/* A client of ref's registry and repository; its credentials, if any,
 * from the credentials directory's "registry-DOMAIN" file (one line,
 * "user:password") or the auths of ~/.docker/config.json. */
struct sbx_registry *sbx_registry_open(const struct sbx_imgref *r,
    const struct sbx_registry_opts *o, struct sbx_err *err);
void sbx_registry_close(struct sbx_registry *g);
/* Another client of g's registry and repository, with g's credentials and
 * token so far, for another thread: its blob transfers end when *stop
 * turns nonzero (stop may be NULL), and on_bytes (or NULL) is told of
 * each piece of a blob as it comes. */
struct sbx_registry *sbx_registry_dup(const struct sbx_registry *g,
    const int *stop, void (*on_bytes)(size_t n, void *arg), void *arg,
    struct sbx_err *err);
/* The manifest of ref (a tag or a digest): its bytes, media type and
 * digest (checked against ref when ref is one). Missing: SBX_EX_NOSANDBOX
 * (3, "no such image"); refused credentials: SBX_EX_CRED. */
int sbx_registry_manifest(struct sbx_registry *g, const char *ref,
    struct sbx_buf *body, char **type, char **digest, struct sbx_err *err);
/* Blob digest written to fd as it arrives; fails (SBX_EX_DATA) when
 * what came is not what digest names. */
int sbx_registry_blob(struct sbx_registry *g, const char *digest, int fd,
    struct sbx_err *err);

/* --- the local store (store.c) ------------------------------------- */

struct sbx_image_store {
	char *root;
	int lock;      /* held from open to close */
	json_t *index; /* {"schema":1,"images":{NAME:record}} */
};

/* The store, locked, its index loaded (an empty one when new). */
int sbx_image_store_open(struct sbx_image_store *s, struct sbx_err *err);
int sbx_image_store_save(struct sbx_image_store *s, struct sbx_err *err);
void sbx_image_store_close(struct sbx_image_store *s);
/* ROOT/blobs/sha256/HEX of digest (malloc'd). */
char *sbx_image_blob_path(const char *root, const char *digest);
/* The record of image ref (a name of the index, or a reference read as
 * pull reads it), *name its name (malloc'd); missing: NULL with err
 * (SBX_EX_NOSANDBOX). */
const json_t *sbx_image_find(const struct sbx_image_store *s,
    const char *ref, char **name, struct sbx_err *err);

/* Its directory: config image.dir (SBX_IMAGE_DIR), else /var/lib/sbx/image
 * for root, else $XDG_DATA_HOME/sbx/image (malloc'd). */
char *sbx_image_root(void);
/* Pull ref into the store (its blobs checked, then named, its layers
 * applied once); *out what was recorded: {"image","digest","config",
 * "layers","size","platform","pulled_at","fetched","rootfs"}. Weak: the
 * remote flavour has it (libcurl), and only sbx-image links it. */
__attribute__((weak)) int sbx_image_pull(const char *ref, const struct sbx_registry_opts *o,
    json_t **out, struct sbx_err *err);
/* An image of the store as a sandbox uses it. */
struct sbx_image_use {
	char *name;          /* its full name in the store */
	char *digest;        /* its manifest's digest */
	char *config_digest; /* its config's digest */
	char *rootfs;        /* its root filesystem, shared */
	json_t *config;      /* the config's "config" (Env, WorkingDir, ...),
			      * or NULL */
};

/* Image ref of the store (read without its lock): *u, or -1 with err
 * (SBX_EX_USAGE naming it and saying to pull it). */
int sbx_image_lookup(const char *ref, struct sbx_image_use *u,
    struct sbx_err *err);
/* --image names a directory rather than an image of the store: it starts
 * with '/' or '.', ends with '/' (as the docker backend reads it; an image
 * reference never does), or names something that is there. */
int sbx_image_is_path(const char *image);
/* The WorkingDir of image (of the store), or NULL (malloc'd). */
char *sbx_image_workdir(const char *image);
/* The "config" of the config blob config_digest in the store. */
int sbx_image_config_of(const char *config_digest, json_t **config);
void sbx_image_use_release(struct sbx_image_use *u);
/* ls: an array of {"image","digest","platform","size","layers",
 * "pulled_at"}. */
int sbx_image_list(json_t **out, struct sbx_err *err);
/* rm: the name goes from the index, then what nothing else uses (no
 * other image, no sandbox of this machine, stopped ones included). */
int sbx_image_remove(const char *ref, json_t **out, struct sbx_err *err);
/* rm for a front end that owns the name (sbxd's templates): an image
 * already gone is no error (*out's "removed" false). */
int sbx_image_drop(const char *ref, json_t **out, struct sbx_err *err);
/* prune: only what nothing uses goes, the builder's cache kept but for
 * its broken entries and leftovers (all: the cache goes too); *out
 * {"freed": bytes, "blobs", "rootfs", "cache", "layers": how many went,
 * "build_running": true when a build kept its files and the blobs}. */
int sbx_image_prune(int all, json_t **out, struct sbx_err *err);
/* inspect: what ls says, its layers, its config and its rootfs. */
int sbx_image_inspect(const char *ref, json_t **out, struct sbx_err *err);

/* import: a docker-archive tar, an OCI image layout tar, or a root
 * filesystem (a directory, or a tar) as one layer, from src ("-":
 * stdin), named tag or as the archive names it; every blob checked
 * (SBX_EX_DATA when one is not what its digest says), bad input
 * SBX_EX_USAGE, nothing stored unless all is. *out as pull's, with
 * "format" (oci, docker, rootfs). */
int sbx_image_import(const char *src, const char *tag, json_t **out,
    struct sbx_err *err);
/* export: image ref as an OCI image layout tar on fd, with docker's
 * manifest.json beside it (what docker save writes since Docker 25). */
int sbx_image_export(const char *ref, int fd, struct sbx_err *err);

/* The root filesystem of the image of manifest digest, whose layers (a
 * JSON array of digests, bottom first) are in the store at root: made
 * once (ROOT/rootfs/HEX), shared; *path is it (malloc'd). */
int sbx_image_unpack(const char *root, const char *digest,
    const json_t *layers, char **path, struct sbx_err *err);

/* The same a layer at a time, as the layers come, any number at once:
 * begin (1 when the tree is already there: apply nothing, commit), apply
 * layer i (0 the bottom) from its blob's fd, each into a directory of its
 * own, then commit (the layers flattened by renames, bottom up, and
 * renamed whole, *path malloc'd) or abort (nothing left). */
struct sbx_image_layer {
	/* The layer's unpacker, a child in its directory (chrooted there
	 * as root), forked at begin (before any thread of a pull: a child
	 * forked from a threaded process may find a lock of the allocator
	 * taken for ever) and fed the layer's fd on sock. */
	int sock;
	pid_t pid;
	/* A buffer it shares with us (mapped before the fork): the tar we
	 * make of its blob (inflated here) it reads there, in RING_SLOTS
	 * pieces of RING_SLOT bytes, told which on sock, with no copy. */
	unsigned char *ring;
	char *digest;
	struct sbx_buf notes; /* what it does to the layers below */
};
struct sbx_image_tree {
	char *final, *tmp;  /* tmp holds a directory per layer: 0, 1, ... */
	int dfd;            /* tmp's */
	size_t n;
	struct sbx_image_layer *l;
};
int sbx_image_tree_begin(struct sbx_image_tree *t, const char *root,
    const char *digest, size_t nlayers, struct sbx_err *err);
int sbx_image_tree_apply(struct sbx_image_tree *t, size_t i, int fd,
    const char *digest, struct sbx_err *err);
int sbx_image_tree_commit(struct sbx_image_tree *t, char **path,
    struct sbx_err *err);
void sbx_image_tree_abort(struct sbx_image_tree *t);
/* Tree ROOT/rootfs/HEX (its path) made in this boot and not synced:
 * ROOT/unsynced/HEX holds this boot's id, synced before the
 * tree gets its name. sbx_image_lookup makes a tree whose mark is of
 * another boot again from its blobs (synced as they came), syncs it and
 * removes the mark. */
int sbx_image_mark_unsynced(const char *tree, struct sbx_err *err);
/* Layer i's tar made by fill, straight into the buffer its unpacker
 * reads: fill(arg, buf, size) puts up to size bytes of it at buf and
 * returns their number, 0 at its end, -1 when it cannot (its own error
 * kept in arg: err is then only that the layer did not come whole). */
int sbx_image_tree_apply_fill(struct sbx_image_tree *t, size_t i,
    const char *digest, ssize_t (*fill)(void *arg, unsigned char *buf,
    size_t size), void *arg, struct sbx_err *err);
/* Layer i from its blob (gzip inflated by ISA-L, anything else fed as it
 * is) through apply_fill, read as it comes: wait (or NULL for a whole
 * file) returns 0 once the blob holds more than off bytes or is whole,
 * -1 when it will not come whole. In inflate.c, the remote flavour's
 * (libisal): without it sbx_image_unpack gives each blob whole to its
 * unpacker. */
int sbx_image_tree_apply_blob(struct sbx_image_tree *t, size_t i, int fd,
    const char *digest, int (*wait)(void *arg, off_t off), void *arg,
    struct sbx_err *err);

#endif
