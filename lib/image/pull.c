/* pull.c - an image from its registry into the local store: the
 * manifest (an index's entry for the platform asked), the config and the
 * layers, each checked against its digest before it is named; each layer
 * unpacked as its blob comes, all at once, each into a directory of its
 * own, then flattened into the image's root filesystem (unpack.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/image.h"

/* Layers fetched at once, as docker pulls them. */
#define PULL_JOBS 3
/* An unpack waiting for more of its blob is woken each time this much
 * more came (or at its end): not at each piece curl gives. */
#define WAKE_BYTES (256 * 1024)

/* A blob this pull needs: fetched by a worker into an unnamed file of
 * the store, checked on the way, and named only once the whole image is
 * in; or already in the store. */
struct job {
	const char *digest;
	long long size;
	int fd;         /* the unnamed blob (checked once done), or -1 */
	long long avail; /* bytes of it in fd so far */
	int done;       /* fd is whole and checked, or the blob was in the
			 * store */
	int linked;     /* named by this pull */
	const struct sbx_buf *bytes; /* here already (the manifest), not
				      * fetched */
};

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* a blob started, more of it came, done */
	int waiting;            /* the unpacks waiting on cv */
	struct job *jobs;
	size_t n;
	size_t *todo, ntodo, next; /* the jobs to fetch, in layer order */
	int stop;       /* a blob or the unpack failed: the others end */
	int failed;
	struct sbx_err err;
	int bdfd;       /* ROOT/blobs/sha256 */
	const char *root;
	int progress;
	pthread_mutex_t pmu;
};

struct worker {
	struct pool *p;
	struct sbx_registry *g;
	struct job *cur;        /* the blob it fetches */
	pthread_t t;
	int started;
};

/* A layer unpacked as its blob comes. */
struct unpack {
	struct pool *p;
	struct job *j;
	struct sbx_image_tree *t;
	size_t i;               /* its place, 0 the bottom */
	pthread_t th;
	int started;
};

static void
pool_fail(struct pool *p, const struct sbx_err *e)
{
	pthread_mutex_lock(&p->mu);
	if (!p->failed) {
		p->failed = 1;
		p->err = *e;
	}
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* More of the blob w fetches is in its file: its unpack told. */
static void
on_bytes(size_t n, void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->p;

	pthread_mutex_lock(&p->mu);
	if (p->waiting && (w->cur->avail + (long long)n) / WAKE_BYTES !=
	    w->cur->avail / WAKE_BYTES)
		pthread_cond_broadcast(&p->cv);
	w->cur->avail += (long long)n;
	pthread_mutex_unlock(&p->mu);
	if (!p->progress)
		return;
	pthread_mutex_lock(&p->pmu);
	sbx_progress_add(0, n);
	pthread_mutex_unlock(&p->pmu);
}

/* Blob j into an unnamed file of the store, read by its unpack as it
 * comes, checked at its end (on disk: work()'s fsync, before any blob is
 * named). */
static int
fetch(struct pool *p, struct worker *w, struct job *j, struct sbx_err *err)
{
	int fd = openat(p->bdfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);

	if (fd < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot store a blob in "
		    "'%s':", p->root);
	pthread_mutex_lock(&p->mu);
	j->fd = fd;
	w->cur = j;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return sbx_registry_blob(w->g, j->digest, fd, err);
}

static void *
work(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->p;
	struct sbx_err e;
	struct job *j;

	for (;;) {
		pthread_mutex_lock(&p->mu);
		if (p->failed || p->next >= p->ntodo) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		j = &p->jobs[p->todo[p->next++]];
		pthread_mutex_unlock(&p->mu);
		memset(&e, 0, sizeof e);
		if (fetch(p, w, j, &e) < 0) {
			pool_fail(p, &e);
			break;
		}
		pthread_mutex_lock(&p->mu);
		j->done = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		/* On disk while the layer is applied, not before: the pull
		 * joins us before it names a blob. */
		if (fsync(j->fd) < 0) {
			sbx_err_set(&e, SBX_EX_FAIL, "cannot store blob %s:",
			    j->digest);
			pool_fail(p, &e);
			break;
		}
		pthread_mutex_lock(&p->pmu);
		sbx_progress_add(1, 0);
		pthread_mutex_unlock(&p->pmu);
	}
	return NULL;
}

/* The job of digest, added when new (an image may name a layer twice). */
static size_t
job_of(struct pool *p, const char *digest, long long size)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (!strcmp(p->jobs[i].digest, digest))
			return i;
	p->jobs[p->n] = (struct job){.digest = digest, .size = size,
	    .fd = -1};
	return p->n++;
}

/* The blobs fetched (and the manifest), named: all, or none (those named
 * here unnamed); on disk, with their names, before the index names
 * them. */
static int
name_blobs(struct pool *p, int *fetched, struct sbx_err *err)
{
	char fdp[64];
	size_t i;
	int any = 0;

	for (i = 0; i < p->n; i++) {
		if (p->jobs[i].fd < 0)
			continue;
		snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", p->jobs[i].fd);
		if (linkat(AT_FDCWD, fdp, p->bdfd, p->jobs[i].digest + 7,
		    AT_SYMLINK_FOLLOW) == 0) {
			p->jobs[i].linked = any = 1;
		} else if (errno != EEXIST) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot store blob %s:",
			    p->jobs[i].digest);
			return -1;
		}
		if (!p->jobs[i].bytes)
			(*fetched)++;
	}
	if (any && fsync(p->bdfd) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot store the blobs "
		    "in '%s':", p->root);
	return 0;
}

/* Job j's bytes, here already, into an unnamed file of the store. */
static int
put_bytes(struct pool *p, struct job *j, struct sbx_err *err)
{
	if ((j->fd = openat(p->bdfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC,
	    0644)) < 0 || sbx_write_all(j->fd, j->bytes->data,
	    j->bytes->len) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot store blob %s:",
		    j->digest);
	j->done = 1;
	return 0;
}

/* For the unpack of u: the blob holds more than off bytes, or is whole;
 * -1 when the pull failed. */
static int
job_wait(void *arg, off_t off)
{
	struct unpack *u = arg;
	struct pool *p = u->p;
	int rc;

	pthread_mutex_lock(&p->mu);
	while (!p->failed && !u->j->done && u->j->avail <= off) {
		p->waiting++;
		pthread_cond_wait(&p->cv, &p->mu);
		p->waiting--;
	}
	rc = p->failed ? -1 : 0;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* Layer u->i unpacked from its blob as it comes (or from the store's);
 * its failure said once its blob is whole: a blob that is not what its
 * digest says is that, not the bad tar it made. */
static void *
unpack(void *arg)
{
	struct unpack *u = arg;
	struct pool *p = u->p;
	struct job *j = u->j;
	struct sbx_err e = {0};
	int fd, rc, growing;

	pthread_mutex_lock(&p->mu);
	while (!p->failed && j->fd < 0 && !j->done) {
		p->waiting++;
		pthread_cond_wait(&p->cv, &p->mu);
		p->waiting--;
	}
	rc = p->failed;
	growing = j->fd >= 0;
	fd = growing ? fcntl(j->fd, F_DUPFD_CLOEXEC, 0) :
	    openat(p->bdfd, j->digest + 7, O_RDONLY | O_CLOEXEC);
	pthread_mutex_unlock(&p->mu);
	if (rc) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (fd < 0) {
		sbx_err_set(&e, SBX_EX_FAIL, growing ? "cannot read blob %s:" :
		    "layer %s is not in the store (pull the image again):",
		    j->digest);
		pool_fail(p, &e);
		return NULL;
	}
	rc = sbx_image_tree_apply_blob(u->t, u->i, fd, j->digest,
	    growing ? job_wait : NULL, u, &e);
	close(fd);
	if (rc == 0)
		return NULL;
	pthread_mutex_lock(&p->mu);
	while (!p->failed && !j->done) {
		p->waiting++;
		pthread_cond_wait(&p->cv, &p->mu);
		p->waiting--;
	}
	pthread_mutex_unlock(&p->mu);
	pool_fail(p, &e);
	return NULL;
}

/* The image's blobs (config first, then its layers) fetched PULL_JOBS at
 * once, each layer unpacked as its blob comes, all at once; nothing
 * named unless all of it came and was unpacked. */
static int
fetch_unpack(struct pool *p, struct sbx_registry *g, const size_t *lj,
    size_t nl, struct sbx_image_tree *t, int unpack_them,
    struct sbx_err *err)
{
	struct worker w[PULL_JOBS];
	struct unpack *u = sbx_xcalloc(nl + 1, sizeof *u);
	long long bytes = 0;
	size_t i, nw;

	memset(w, 0, sizeof w);
	for (i = 0; i < p->n; i++)
		if (faccessat(p->bdfd, p->jobs[i].digest + 7, F_OK, 0) == 0) {
			p->jobs[i].done = 1;
		} else if (p->jobs[i].bytes) {
			if (put_bytes(p, &p->jobs[i], err) < 0) {
				free(u);
				return -1;
			}
		} else {
			p->todo[p->ntodo++] = i;
			bytes += p->jobs[i].size;
		}
	sbx_progress_start(p->progress && p->ntodo);
	sbx_progress_total(p->ntodo, (uint64_t)bytes);
	nw = p->ntodo < PULL_JOBS ? p->ntodo : PULL_JOBS;
	for (i = 0; i < nw; i++) {
		w[i].p = p;
		if (!(w[i].g = sbx_registry_dup(g, &p->stop, on_bytes, &w[i],
		    err))) {
			pool_fail(p, err);
			break;
		}
		if ((errno = pthread_create(&w[i].t, NULL, work, &w[i]))) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
			pool_fail(p, err);
			break;
		}
		w[i].started = 1;
	}
	for (i = 0; unpack_them && !p->failed && i < nl; i++) {
		u[i] = (struct unpack){.p = p, .j = &p->jobs[lj[i]], .t = t,
		    .i = i};
		if ((errno = pthread_create(&u[i].th, NULL, unpack, &u[i]))) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
			pool_fail(p, err);
			break;
		}
		u[i].started = 1;
	}
	/* What is here already on disk while the rest comes. */
	for (i = 0; i < p->n; i++)
		if (p->jobs[i].bytes && p->jobs[i].fd >= 0 &&
		    fsync(p->jobs[i].fd) < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot store blob %s:",
			    p->jobs[i].digest);
			pool_fail(p, err);
		}
	for (i = 0; i < nl; i++)
		if (u[i].started)
			pthread_join(u[i].th, NULL);
	for (i = 0; i < nw; i++) {
		if (w[i].started)
			pthread_join(w[i].t, NULL);
		sbx_registry_close(w[i].g);
	}
	free(u);
	sbx_progress_end();
	if (p->failed) {
		*err = p->err;
		return -1;
	}
	return 0;
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
	struct sbx_image_tree t = {.dfd = -1};
	struct pool p = {.mu = PTHREAD_MUTEX_INITIALIZER,
	    .cv = PTHREAD_COND_INITIALIZER, .pmu = PTHREAD_MUTEX_INITIALIZER,
	    .bdfd = -1};
	size_t *lj = NULL;
	json_t *m = NULL, *layers, *l, *rec, *ldig;
	char *type = NULL, *digest = NULL, *name = NULL, *rootfs = NULL, *bdir;
	const char *platform = o && o->platform ? o->platform : "linux/amd64";
	const char *cfg, *pick, *lt;
	long long size = 0;
	int fetched = 0, rc = -1, i, have;
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
	if (!sbx_image_valid_digest(cfg)) {
		sbx_err_set(err, SBX_EX_DATA, "invalid blob digest '%s'", cfg);
		goto out;
	}
	json_array_foreach(layers, k, l)
		if (!sbx_image_valid_digest(sbx_json_str(l, "digest"))) {
			sbx_err_set(err, SBX_EX_DATA, "invalid blob digest "
			    "'%s'", sbx_json_str(l, "digest"));
			goto out;
		}
	if (sbx_image_store_open(&s, err) < 0)
		goto out;
	p.root = s.root;
	p.progress = o && o->progress;
	bdir = sbx_xasprintf("%s/blobs/sha256", s.root);
	p.bdfd = open(bdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(bdir);
	if (p.bdfd < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot open the image store "
		    "'%s':", s.root);
		goto out;
	}
	p.jobs = sbx_xcalloc(json_array_size(layers) + 2, sizeof *p.jobs);
	p.todo = sbx_xcalloc(json_array_size(layers) + 1, sizeof *p.todo);
	lj = sbx_xcalloc(json_array_size(layers) + 1, sizeof *lj);
	job_of(&p, cfg, sbx_json_int(json_object_get(m, "config"), "size",
	    0));
	json_array_foreach(layers, k, l)
		lj[k] = job_of(&p, sbx_json_str(l, "digest"),
		    sbx_json_int(l, "size", 0));
	/* The manifest (checked against its digest) named with the blobs,
	 * written and synced while they come. */
	p.jobs[job_of(&p, digest, (long long)body.len)].bytes = &body;
	if ((have = sbx_image_tree_begin(&t, s.root, digest,
	    json_array_size(layers), err)) < 0 ||
	    fetch_unpack(&p, g, lj, json_array_size(layers), &t, !have,
	    err) < 0 || name_blobs(&p, &fetched, err) < 0 ||
	    sbx_image_tree_commit(&t, &rootfs, err) < 0)
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
	/* Nothing of a failed pull stays: its tree, the blobs it named. */
	sbx_image_tree_abort(&t);
	for (k = 0; k < p.n; k++) {
		if (rc < 0 && p.jobs[k].linked)
			unlinkat(p.bdfd, p.jobs[k].digest + 7, 0);
		if (p.jobs[k].fd >= 0)
			close(p.jobs[k].fd);
	}
	if (p.bdfd >= 0)
		close(p.bdfd);
	free(p.jobs);
	free(p.todo);
	free(lj);
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
