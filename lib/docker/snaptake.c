/* snaptake.c - a docker snapshot taken: the container committed (its own
 * layer), its workdir volume's files (which a commit leaves out) made a
 * layer of their own above it, and the two loaded as one image whose
 * config is sbx's alone (POST /images/load: a commit would carry the
 * container's -e values and io.sbx.* labels into every copy); exported
 * as lib/local/snapport.c exports the store's (libarchive) */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "docker.h"
#include "../local/local.h"

static int
tmpfd(struct sbx_err *err)
{
	const char *tmp = getenv("TMPDIR");
	int fd = open(tmp && *tmp ? tmp : "/tmp", O_TMPFILE | O_RDWR |
	    O_CLOEXEC, 0600);

	if (fd < 0)
		sbx_err_set(err, SBX_EX_FAIL, "cannot make a temporary file:");
	return fd;
}

/* A request whose body comes from in (or none: -1) or whose 2xx answer
 * goes to out (or to rs: -1). */
static int
req_fd(struct dk *d, const char *method, const char *path, int in, int out,
    struct sbx_http_resp *rs, struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = method, .in_fd = in, .out_fd = out,
	    .in_type = "application/x-tar"};
	struct stat st;
	char *full = sbx_xasprintf("/v%d.%d%s", API_MAJOR, d->minor, path);
	int rc;

	if (in >= 0 && fstat(in, &st) == 0 && st.st_size > 0)
		rq.in_size = st.st_size;
	rq.path = full;
	rc = sbx_http_do(d->h, &rq, rs, err);
	free(full);
	return rc;
}

static json_t *
inspect_image(struct dk *d, const char *image, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *o = NULL;
	char *q = sbx_http_escape(image);

	if (sbx_docker_req(d, "GET", NULL, &rs, err, "/images/%s/json", q) ==
	    0) {
		if (rs.status != 200 || !json_is_object(rs.json))
			sbx_docker_fail(&rs, rs.status == 404 ?
			    SBX_EX_NOSANDBOX : SBX_EX_FAIL, "cannot inspect an "
			    "image", err);
		else
			o = json_incref(rs.json);
		sbx_http_resp_release(&rs);
	}
	free(q);
	return o;
}

static void
rm_image(struct dk *d, const char *image)
{
	struct sbx_http_resp rs;
	struct sbx_err e;
	char *q = sbx_http_escape(image);

	/* noprune: its parent is the container's image, which stays. */
	if (sbx_docker_req(d, "DELETE", NULL, &rs, &e, "/images/%s?noprune=1",
	    q) == 0)
		sbx_http_resp_release(&rs);
	free(q);
}

static int
arch_fail(struct archive *a, struct sbx_err *err)
{
	return sbx_err_set(err, SBX_EX_FAIL, "cannot write a layer: %s",
	    archive_error_string(a));
}

/* Copy what a reads of its current entry to w. */
static int
copy_data(struct archive *a, struct archive *w, struct sbx_err *err)
{
	char buf[65536];
	la_ssize_t n;

	while ((n = archive_read_data(a, buf, sizeof buf)) > 0)
		if (archive_write_data(w, buf, (size_t)n) != n)
			return arch_fail(w, err);
	if (n < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read the "
		    "workdir's files: %s", archive_error_string(a));
	return 0;
}

/* name (the archive API's: the workdir's base name first) under the
 * workdir's path, relative to /. */
static char *
under(const char *workdir, const char *name)
{
	const char *rest = strchr(name, '/');

	return sbx_xasprintf("%s%s", workdir + 1, rest ? rest : "");
}

/* The layer of the workdir volume's files (the tar the archive API gave,
 * on in) on out: its paths under the workdir's, the workdir made opaque
 * (the volume was all of it), as a layer says so. */
static int
workdir_layer(const char *workdir, int in, int out, struct sbx_err *err)
{
	struct archive *a = archive_read_new(), *w = archive_write_new();
	struct archive_entry *e, *wh;
	int rc = 0, r, first = 1;
	char *p;

	archive_read_support_format_tar(a);
	if (lseek(in, 0, SEEK_SET) < 0 ||
	    archive_read_open_fd(a, in, 65536) != ARCHIVE_OK) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read the workdir's "
		    "files: %s", archive_error_string(a));
		goto out;
	}
	if (archive_write_set_format_pax_restricted(w) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(w, out) != ARCHIVE_OK) {
		rc = arch_fail(w, err);
		goto out;
	}
	while (!rc && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		p = under(workdir, archive_entry_pathname(e));
		archive_entry_set_pathname(e, p);
		free(p);
		if (archive_entry_hardlink(e)) {
			p = under(workdir, archive_entry_hardlink(e));
			archive_entry_set_hardlink(e, p);
			free(p);
		}
		if (archive_write_header(w, e) != ARCHIVE_OK)
			rc = arch_fail(w, err);
		else if (archive_entry_size(e) > 0 &&
		    !archive_entry_hardlink(e))
			rc = copy_data(a, w, err);
		if (rc || !first)
			continue;
		/* Right after the workdir itself, which it marks. */
		first = 0;
		wh = archive_entry_new();
		p = sbx_xasprintf("%s/.wh..wh..opq", workdir + 1);
		archive_entry_set_pathname(wh, p);
		free(p);
		archive_entry_set_filetype(wh, AE_IFREG);
		archive_entry_set_perm(wh, 0);
		archive_entry_set_size(wh, 0);
		if (archive_write_header(w, wh) != ARCHIVE_OK)
			rc = arch_fail(w, err);
		archive_entry_free(wh);
	}
	if (!rc && r != ARCHIVE_EOF)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read the workdir's "
		    "files: %s", archive_error_string(a));
	if (!rc && archive_write_close(w) != ARCHIVE_OK)
		rc = arch_fail(w, err);
out:
	archive_read_free(a);
	archive_write_free(w);
	return rc;
}

/* "sha256:HEX" of what fd holds, into out (72 bytes). */
static int
digest_of(int fd, char *out, struct sbx_err *err)
{
	unsigned char sum[32];
	size_t i;

	if (lseek(fd, 0, SEEK_SET) < 0 || sbx_sha256_fd(fd, sum) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read a layer:");
	memcpy(out, "sha256:", 8);
	for (i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", sum[i]);
	return 0;
}

/* One file of the load's tar: data, or (data NULL) what fd holds. */
static int
put_file(struct archive *w, const char *name, const char *data, int fd,
    struct sbx_err *err)
{
	struct archive_entry *e = archive_entry_new();
	char buf[65536];
	struct stat st;
	ssize_t n;
	int rc = 0;

	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	if (data)
		archive_entry_set_size(e, (la_int64_t)strlen(data));
	else if (fstat(fd, &st) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		archive_entry_free(e);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read a layer:");
	} else
		archive_entry_set_size(e, st.st_size);
	if (archive_write_header(w, e) != ARCHIVE_OK)
		rc = arch_fail(w, err);
	else if (data && archive_write_data(w, data, strlen(data)) !=
	    (la_ssize_t)strlen(data))
		rc = arch_fail(w, err);
	while (!rc && !data && (n = read(fd, buf, sizeof buf)) != 0) {
		if (n < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read a "
			    "layer:");
		else if (archive_write_data(w, buf, (size_t)n) != n)
			rc = arch_fail(w, err);
	}
	archive_entry_free(e);
	return rc;
}

/* The tar POST /images/load takes, on out: config, the manifest naming
 * it and its layers. Only the workdir's layer (lfd, -1: none) is in it:
 * the engine has the others, and looks no further for a layer it has. */
static int
load_tar(const json_t *config, const char *tag, int lfd, int out,
    struct sbx_err *err)
{
	struct archive *w = archive_write_new();
	json_t *layers = json_array(), *man;
	size_t i, n = json_array_size(json_object_get(json_object_get(config,
	    "rootfs"), "diff_ids"));
	char *cs = json_dumps(config, JSON_COMPACT), *ms, *p;
	int rc = 0;

	for (i = 0; i < n; i++) {
		p = lfd >= 0 && i == n - 1 ? sbx_xstrdup("workdir/layer.tar") :
		    sbx_xasprintf("engine-has-%zu/layer.tar", i);
		json_array_append_new(layers, json_string(p));
		free(p);
	}
	man = json_pack("[{ss s[s] so}]", "Config", "config.json", "RepoTags",
	    tag, "Layers", layers);
	ms = json_dumps(man, JSON_COMPACT);
	if (archive_write_set_format_pax_restricted(w) != ARCHIVE_OK ||
	    archive_write_open_fd(w, out) != ARCHIVE_OK)
		rc = arch_fail(w, err);
	if (!rc)
		rc = put_file(w, "config.json", cs, -1, err);
	if (!rc)
		rc = put_file(w, "manifest.json", ms, -1, err);
	if (!rc && lfd >= 0)
		rc = put_file(w, "workdir/layer.tar", NULL, lfd, err);
	if (!rc && archive_write_close(w) != ARCHIVE_OK)
		rc = arch_fail(w, err);
	archive_write_free(w);
	json_decref(man);
	free(cs);
	free(ms);
	return rc;
}

/* The container's -e names: its variables the image has not. */
static json_t *
env_names(const json_t *cenv, const json_t *ienv)
{
	json_t *a = json_array(), *v, *w;
	const char *s;
	size_t i, j;

	json_array_foreach(cenv, i, v) {
		if (!(s = json_string_value(v)))
			continue;
		json_array_foreach(ienv, j, w)
			if (json_is_string(w) && !strcmp(json_string_value(w),
			    s))
				break;
		if (j == json_array_size(ienv))
			json_array_append_new(a, json_stringn(s, strcspn(s,
			    "=")));
	}
	return a;
}

/* The container's labels of -l: not sbx's, not its image's. */
static json_t *
user_labels(const json_t *clab, const json_t *ilab)
{
	json_t *o = json_object(), *v;
	const char *k;

	json_object_foreach((json_t *)clab, k, v)
		if (strncmp(k, LABEL_PREFIX, strlen(LABEL_PREFIX)) &&
		    !json_equal(v, json_object_get(ilab, k)))
			json_object_set(o, k, v);
	return o;
}

/* The meta of the snapshot sid of container c, whose image is base. */
static json_t *
snap_meta(const char *sid, const char *name, const json_t *c,
    const json_t *base)
{
	const json_t *cfg = json_object_get(c, "Config");
	const json_t *hc = json_object_get(c, "HostConfig");
	const json_t *bcfg = json_object_get(base, "Config");
	const char *pm = sbx_json_str(json_object_get(bcfg, "Labels"),
	    SNAP_META_LABEL), *k;
	json_t *parent = pm ? json_loads(pm, 0, NULL) : NULL, *m, *lim;
	long long now = sbx_now(), v;
	char created[64];
	static const char *const hckeys[] = {"Memory", "NanoCpus",
	    "PidsLimit"};
	static const char *const keys[] = {"memory", "cpus_milli", "pids"};
	size_t i;

	sbx_time_fmt(now, created, sizeof created);
	m = json_pack("{ss so ss sI ss ss}", "snapshot", sid, "name", name ?
	    json_string(name) : json_null(), "created", created,
	    "created_epoch", (json_int_t)now, "backend", "docker", "source",
	    sbx_json_str(c, "Id"));
	/* Made from a snapshot: the image below it is the parent's. */
	json_object_set_new(m, "image", json_string(parent ? sbx_json_str(
	    parent, "image") : sbx_json_str(cfg, "Image")));
	json_object_set_new(m, "image_digest", json_null());
	json_object_set_new(m, "workdir", json_string(sbx_json_str(cfg,
	    "WorkingDir") && *sbx_json_str(cfg, "WorkingDir") ?
	    sbx_json_str(cfg, "WorkingDir") : "/"));
	json_object_set_new(m, "env_names", env_names(json_object_get(cfg,
	    "Env"), json_object_get(bcfg, "Env")));
	json_object_set_new(m, "labels", user_labels(json_object_get(cfg,
	    "Labels"), json_object_get(bcfg, "Labels")));
	lim = json_object();
	for (i = 0; i < 3; i++)
		if ((v = sbx_json_int(hc, hckeys[i], 0)) > 0)
			json_object_set_new(lim, keys[i], json_integer(i == 1 ?
			    v / 1000000 : v));
	k = sbx_json_str(json_object_get(cfg, "Labels"), "io.sbx.timeout");
	if (k && (v = strtoll(k, NULL, 10)) > 0)
		json_object_set_new(lim, "timeout", json_integer(v));
	json_object_set_new(m, "limits", lim);
	json_object_set_new(m, "files", json_null());
	json_object_set_new(m, "memory", json_false());
	json_object_set_new(m, "runtime", sbx_json_str(hc, "Runtime") ?
	    json_string(sbx_json_str(hc, "Runtime")) : json_null());
	json_object_set_new(m, "base_layers", json_integer(parent ?
	    sbx_json_int(parent, "base_layers", 0) : (json_int_t)
	    json_array_size(json_object_get(json_object_get(base, "RootFS"),
	    "Layers"))));
	json_object_set_new(m, "base_size", json_integer(parent ?
	    sbx_json_int(parent, "base_size", 0) : sbx_json_int(base, "Size",
	    0)));
	json_decref(parent);
	return m;
}

/* The image's config: the image's Env, Cmd, Entrypoint and the rest of
 * it, the container's workdir, labels the image's (not sbx's) and the
 * snapshot's; its layers the commit's, then the workdir's (diff, or
 * NULL: none). */
static json_t *
image_config(const json_t *commit, const json_t *base, const json_t *meta,
    const char *diff)
{
	const json_t *bcfg = json_object_get(base, "Config");
	json_t *cfg = json_object(), *labels = json_object(), *v, *ids, *o;
	const char *k, *copy[] = {"Env", "Cmd", "Entrypoint", "User",
	    "ExposedPorts", "StopSignal", "Shell"};
	char created[64], *js;
	size_t i;

	for (i = 0; i < sizeof copy / sizeof copy[0]; i++)
		if ((v = json_object_get(bcfg, copy[i])) && !json_is_null(v))
			json_object_set(cfg, copy[i], v);
	json_object_set(cfg, "WorkingDir", json_object_get(meta, "workdir"));
	json_object_foreach((json_t *)json_object_get(bcfg, "Labels"), k, v)
		if (strncmp(k, LABEL_PREFIX, strlen(LABEL_PREFIX)))
			json_object_set(labels, k, v);
	json_object_set(labels, SNAP_LABEL, json_object_get(meta, "snapshot"));
	if (sbx_json_str(meta, "name"))
		json_object_set(labels, SNAP_NAME_LABEL, json_object_get(meta,
		    "name"));
	js = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_object_set_new(labels, SNAP_META_LABEL, json_string(js));
	free(js);
	json_object_set_new(cfg, "Labels", labels);
	ids = json_deep_copy(json_object_get(json_object_get(commit, "RootFS"),
	    "Layers"));
	if (diff)
		json_array_append_new(ids, json_string(diff));
	sbx_time_fmt(sbx_json_int(meta, "created_epoch", 0), created,
	    sizeof created);
	o = json_pack("{ss ss ss so s{ss so}}", "architecture",
	    sbx_json_str(commit, "Architecture") ? sbx_json_str(commit,
	    "Architecture") : "amd64", "os", sbx_json_str(commit, "Os") ?
	    sbx_json_str(commit, "Os") : "linux", "created", created, "config",
	    cfg, "rootfs", "type", "layers", "diff_ids", ids);
	return o;
}

/* The commit, then the workdir's files into wfd; paused for the two if
 * it runs, so that they are of one moment. */
static int
freeze_copy(struct dk *d, const json_t *c, const char *workdir,
    char **commit, int wfd, long long *pause_ms, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	const char *id = sbx_json_str(c, "Id");
	int paused = 0, rc = -1;
	long long t0;
	char *q = NULL, *p;
	json_t *body;

	t0 = sbx_mono_ms();
	if (!strcmp(sbx_docker_status_of(c), "running")) {
		if (sbx_docker_post(d, id, "pause", "cannot pause the "
		    "container", err) < 0)
			return -1;
		paused = 1;
	}
	/* Its config is the container's: the load replaces it. */
	body = json_object();
	rc = sbx_docker_req(d, "POST", body, &rs, err, "/commit?container=%s&"
	    "pause=0", id);
	json_decref(body);
	if (rc < 0)
		goto out;
	rc = -1;
	if (rs.status != 201 || !sbx_json_str(rs.json, "Id")) {
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot commit the container",
		    err);
		goto out;
	}
	*commit = sbx_xstrdup(sbx_json_str(rs.json, "Id"));
	sbx_http_resp_release(&rs);
	memset(&rs, 0, sizeof rs);
	if (wfd >= 0) {
		q = sbx_http_escape(workdir);
		p = sbx_xasprintf("/containers/%s/archive?path=%s", id, q);
		rc = req_fd(d, "GET", p, -1, wfd, &rs, err);
		free(p);
		if (rc == 0 && rs.status != 200)
			rc = sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot read "
			    "the workdir's files", err);
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	sbx_http_resp_release(&rs);
	free(q);
	if (paused && sbx_docker_post(d, id, "unpause", "cannot unpause the "
	    "container", rc < 0 ? &(struct sbx_err){0} : err) < 0)
		rc = -1;
	/* One paused or stopped already was not paused by us. */
	*pause_ms = paused ? sbx_mono_ms() - t0 : 0;
	return rc;
}

json_t *
sbx_docker_snap_take(const json_t *ref, const char *name, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct dk d;
	json_t *c = NULL, *base = NULL, *cm = NULL, *meta = NULL, *conf = NULL;
	json_t *fin = NULL, *out = NULL, *a;
	char sid[32], hex[SBX_ID_LEN + 1], *commit = NULL, *tag = NULL;
	char diff[80], *p;
	const char *workdir;
	long long pause_ms = 0;
	int wfd = -1, lfd = -1, tfd = -1, loaded = 0;
	size_t i;

	if (name && !sbx_snap_valid_name(name)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid snapshot name '%s'",
		    name);
		return NULL;
	}
	if (sbx_docker_ref_open(&d, ref, &c, err) < 0)
		return NULL;
	if (name) {
		p = sbx_xasprintf(SNAP_NAME_LABEL "=%s", name);
		a = sbx_docker_snap_images(&d, p, err);
		free(p);
		if (!a)
			goto out;
		i = json_array_size(a);
		json_decref(a);
		if (i) {
			sbx_err_set(err, SBX_EX_FAIL, "the snapshot name '%s' "
			    "is in use", name);
			goto out;
		}
	}
	if (!(base = inspect_image(&d, sbx_json_str(c, "Image") ?
	    sbx_json_str(c, "Image") : "?", err)))
		goto out;
	sbx_local_new_id(hex);
	snprintf(sid, sizeof sid, SNAP_PREFIX "%s", hex);
	tag = sbx_xasprintf(SNAP_REPO ":%s", sid);
	meta = snap_meta(sid, name, c, base);
	workdir = sbx_json_str(meta, "workdir");
	/* "/" is no volume: the commit has it all. */
	if (strcmp(workdir, "/") && ((wfd = tmpfd(err)) < 0 ||
	    (lfd = tmpfd(err)) < 0))
		goto out;
	if (freeze_copy(&d, c, workdir, &commit, wfd, &pause_ms, err) < 0)
		goto out;
	if (wfd >= 0) {
		/* A copy, not the archive's tar as it is: the engine's
		 * save of a layer made of that one is not the same bytes
		 * (its digest, the layer's id, would not hold). */
		if (workdir_layer(workdir, wfd, lfd, err) < 0 ||
		    digest_of(lfd, diff, err) < 0)
			goto out;
	}
	if (!(cm = inspect_image(&d, commit, err)))
		goto out;
	conf = image_config(cm, base, meta, wfd >= 0 ? diff : NULL);
	if ((tfd = tmpfd(err)) < 0 || load_tar(conf, tag, lfd, tfd, err) < 0)
		goto out;
	if (lseek(tfd, 0, SEEK_SET) < 0 || req_fd(&d, "POST",
	    "/images/load?quiet=1", tfd, -1, &rs, err) < 0)
		goto out;
	loaded = 1;
	if (rs.status != 200 || (rs.body.data && (strstr(rs.body.data,
	    "\"errorDetail\"") || strstr(rs.body.data, "\"error\"")))) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot load the snapshot's "
		    "image: %.300s (status %ld)", rs.body.data ? rs.body.data :
		    "no reason given", rs.status);
		goto out;
	}
	if (!(fin = inspect_image(&d, tag, err)))
		goto out;
	out = json_deep_copy(meta);
	json_object_set_new(out, "size", json_integer(sbx_json_int(fin, "Size",
	    0) - sbx_json_int(meta, "base_size", 0)));
	json_object_set_new(out, "pause_ms", json_integer(pause_ms));
	json_object_set_new(out, "image_id", json_string(sbx_json_str(fin,
	    "Id") ? sbx_json_str(fin, "Id") : ""));
	json_object_set_new(out, "endpoint", json_string(d.endpoint));
out:
	/* Nothing between is left: the commit's image goes (its layers are
	 * the snapshot's now), and the snapshot's on a failure. */
	if (commit)
		rm_image(&d, commit);
	if (!out && loaded)
		rm_image(&d, tag);
	sbx_http_resp_release(&rs);
	if (wfd >= 0)
		close(wfd);
	if (lfd >= 0)
		close(lfd);
	if (tfd >= 0)
		close(tfd);
	json_decref(c);
	json_decref(base);
	json_decref(cm);
	json_decref(meta);
	json_decref(conf);
	json_decref(fin);
	free(commit);
	free(tag);
	sbx_docker_close(&d);
	return out;
}

/* --- export ----------------------------------------------------------- */

/* The snapshot's own layers (those above its base image's), top first,
 * merged as the overlay merges them, into snapport's archive. */
struct port {
	struct sbx_snap_merge m;
	int *fds, n;    /* the layers' tars, bottom first */
	json_t *links;  /* this layer's hard links to emit: target -> names */
	/* Per layer, from pass 0: the directories with an entry below them
	 * (parent), and those with one that is not a directory nor the
	 * engine's mount point (need). A directory of the first and not the
	 * second was only copied up for a mount point: not the sandbox's. */
	json_t **parent, **need;
	struct archive *w;
	struct sbx_err *err;
};

/* What the engine mounts over a container's files (its init, and the
 * files of its network): a commit holds empty files there. */
static int
mount_point(const char *rel)
{
	static const char *const mp[] = {"usr/bin/docker-init",
	    "sbin/docker-init", "etc/hostname", "etc/hosts",
	    "etc/resolv.conf", ".dockerenv"};
	size_t i;

	for (i = 0; i < sizeof mp / sizeof mp[0]; i++)
		if (!strcmp(rel, mp[i]))
			return 1;
	return 0;
}

/* Every directory above rel into set. */
static void
mark_up(json_t *set, const char *rel)
{
	char *p = sbx_xstrdup(rel), *slash;

	while ((slash = strrchr(p, '/'))) {
		*slash = '\0';
		json_object_set_new(set, p, json_true());
	}
	free(p);
}

/* A layer's name of an entry, relative, without "./" or a final '/';
 * "" for the root. */
static char *
rel_of(const char *name)
{
	char *r;
	size_t n;

	while (!strncmp(name, "./", 2) || *name == '/')
		name += *name == '/' ? 1 : 2;
	r = sbx_xstrdup(name);
	n = strlen(r);
	while (n && r[n - 1] == '/')
		r[--n] = '\0';
	return strcmp(r, ".") ? r : (r[0] = '\0', r);
}

static int
read_fail(struct archive *a, struct sbx_err *err)
{
	return sbx_err_set(err, SBX_EX_FAIL, "cannot read the snapshot's "
	    "layers: %s", archive_error_string(a));
}

/* A file with what a reads of its current entry, or -1. */
static int
spool(struct archive *a, struct sbx_err *err)
{
	char buf[65536];
	la_ssize_t n;
	int fd = tmpfd(err);

	while (fd >= 0 && (n = archive_read_data(a, buf, sizeof buf)) != 0)
		if (n < 0 || sbx_write_all(fd, buf, (size_t)n) < 0) {
			read_fail(a, err);
			close(fd);
			fd = -1;
		}
	return fd;
}

/* e as "files/rel" in the archive, its data from a (the layer's
 * reader), or from fd when it is not -1. */
static int
emit(struct port *x, struct archive_entry *e, const char *rel,
    struct archive *a, int fd)
{
	struct archive_entry *o = archive_entry_clone(e);
	char *name = sbx_xasprintf("files/%s", rel), buf[65536];
	ssize_t n;
	int rc = 0;

	archive_entry_set_pathname(o, name);
	archive_entry_set_hardlink(o, NULL);
	archive_entry_set_uname(o, NULL);
	archive_entry_set_gname(o, NULL);
	archive_entry_set_nlink(o, archive_entry_filetype(e) == AE_IFDIR ?
	    2 : 1);
	if (archive_write_header(x->w, o) != ARCHIVE_OK)
		rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot write the "
		    "archive: %s", archive_error_string(x->w));
	else if (archive_entry_filetype(e) != AE_IFREG ||
	    archive_entry_size(e) <= 0)
		;
	else if (fd < 0)
		rc = copy_data(a, x->w, x->err);
	else if (lseek(fd, 0, SEEK_SET) < 0)
		rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot read a layer:");
	else
		while (!rc && (n = read(fd, buf, sizeof buf)) != 0)
			if (n < 0)
				rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot "
				    "read a layer:");
			else if (archive_write_data(x->w, buf, (size_t)n) != n)
				rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot "
				    "write the archive: %s",
				    archive_error_string(x->w));
	archive_entry_free(o);
	free(name);
	return rc;
}

/* A hard link's target's data for each of its names, when the layer is
 * read again (the transfer of the backends takes no hard link). */
static int
emit_links(struct port *x, int fd)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	json_t *names, *v;
	size_t i;
	char *rel;
	int rc = 0, r, tfd;

	archive_read_support_format_tar(a);
	if (lseek(fd, 0, SEEK_SET) < 0 || archive_read_open_fd(a, fd, 65536) !=
	    ARCHIVE_OK)
		rc = read_fail(a, x->err);
	while (!rc && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		rel = rel_of(archive_entry_pathname(e));
		names = json_object_get(x->links, rel);
		free(rel);
		if (!names || archive_entry_filetype(e) != AE_IFREG ||
		    archive_entry_hardlink(e))
			continue;
		/* Its data once, for each name. */
		if ((tfd = spool(a, x->err)) < 0) {
			rc = -1;
			break;
		}
		json_array_foreach(names, i, v)
			if (!rc)
				rc = emit(x, e, json_string_value(v), NULL,
				    tfd);
		close(tfd);
	}
	archive_read_free(a);
	json_object_clear(x->links);
	return rc;
}

/* Layer l from the top (a tar): pass 0 the whiteouts and opaque
 * directories, 1 the files too. */
static int
walk_layer(void *arg, int l, int pass)
{
	struct port *x = arg;
	int fd = x->fds[x->n - 1 - l];
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	const char *base;
	char *rel, *dir, *p;
	int rc = 0, r, was, isdir, type;

	archive_read_support_format_tar(a);
	if (lseek(fd, 0, SEEK_SET) < 0 || archive_read_open_fd(a, fd, 65536) !=
	    ARCHIVE_OK) {
		rc = read_fail(a, x->err);
		goto out;
	}
	while (!rc && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		rel = rel_of(archive_entry_pathname(e));
		dir = sbx_xstrdup(rel);
		p = strrchr(dir, '/');
		base = p ? p + 1 : rel;
		if (p)
			*p = '\0';
		else
			dir[0] = '\0';
		if (!pass && *rel) {
			mark_up(x->parent[l], rel);
			if (archive_entry_filetype(e) != AE_IFDIR &&
			    !mount_point(rel))
				mark_up(x->need[l], rel);
		}
		if (!*rel || mount_point(rel) || (pass &&
		    archive_entry_filetype(e) == AE_IFDIR &&
		    json_object_get(x->parent[l], rel) &&
		    !json_object_get(x->need[l], rel))) {
			;       /* the image's root; the engine's files */
		} else if (!strcmp(base, ".wh..wh..opq")) {
			if (*dir && !sbx_snap_port_skipped(dir) &&
			    !sbx_snap_merge_hidden(&x->m, dir))
				sbx_snap_merge_mark(&x->m, dir, 1, pass);
		} else if (!strncmp(base, ".wh.", 4)) {
			free(rel);
			rel = *dir ? sbx_xasprintf("%s/%s", dir, base + 4) :
			    sbx_xstrdup(base + 4);
			if (!sbx_snap_port_skipped(rel) &&
			    !sbx_snap_merge_hidden(&x->m, rel))
				sbx_snap_merge_mark(&x->m, rel, 0, pass);
		} else if (!sbx_snap_port_skipped(rel) &&
		    !sbx_snap_merge_hidden(&x->m, rel)) {
			type = archive_entry_filetype(e);
			isdir = type == AE_IFDIR;
			was = (int)json_integer_value(json_object_get(
			    x->m.seen, rel));
			/* The layer above's wins; sockets, fifos and
			 * devices are the sandbox's business. */
			if (!was && (isdir || type == AE_IFREG ||
			    type == AE_IFLNK || archive_entry_hardlink(e))) {
				json_object_set_new(x->m.seen, rel,
				    json_integer(isdir ? 2 : 1));
				if (pass && archive_entry_hardlink(e)) {
					p = rel_of(archive_entry_hardlink(e));
					if (!json_object_get(x->links, p))
						json_object_set_new(x->links,
						    p, json_array());
					json_array_append_new(json_object_get(
					    x->links, p), json_string(rel));
					free(p);
				} else if (pass)
					rc = emit(x, e, rel, a, -1);
			}
		}
		free(rel);
		free(dir);
	}
	if (!rc && r != ARCHIVE_EOF)
		rc = read_fail(a, x->err);
	if (!rc && pass && json_object_size(x->links))
		rc = emit_links(x, fd);
out:
	archive_read_free(a);
	return rc;
}

/* The layers ids[from...] of the engine's save of an image (a tar on
 * fd), each into a file of fds, found by their digests: the OCI layout
 * names a layer so (blobs/sha256/HEX); the legacy one's DIR/layer.tar
 * come in no order of the image's (the manifest, at the end, says it). */
static int
spool_layers(int fd, const json_t *ids, size_t from, int *fds,
    struct sbx_err *err)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	const char *name;
	size_t n = json_array_size(ids), k;
	char hex[80];
	int rc = 0, r, lfd;

	archive_read_support_format_tar(a);
	if (lseek(fd, 0, SEEK_SET) < 0 || archive_read_open_fd(a, fd, 65536) !=
	    ARCHIVE_OK)
		rc = read_fail(a, err);
	while (!rc && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		name = archive_entry_pathname(e);
		if (archive_entry_filetype(e) != AE_IFREG ||
		    (strncmp(name, "blobs/sha256/", 13) && (strlen(name) < 10 ||
		    strcmp(name + strlen(name) - 10, "/layer.tar"))))
			continue;
		if ((lfd = spool(a, err)) < 0) {
			rc = -1;
			break;
		}
		if (digest_of(lfd, hex, err) < 0) {
			close(lfd);
			rc = -1;
			break;
		}
		for (k = from; k < n; k++)
			if (fds[k - from] < 0 && !strcmp(hex, json_string_value(
			    json_array_get(ids, k))))
				break;
		if (k < n)
			fds[k - from] = lfd;
		else
			close(lfd);
	}
	if (!rc && r != ARCHIVE_EOF)
		rc = read_fail(a, err);
	archive_read_free(a);
	for (k = from; !rc && k < n; k++)
		if (fds[k - from] < 0)
			rc = sbx_err_set(err, SBX_EX_FAIL, "the engine's save "
			    "of the snapshot lacks its layer %s",
			    json_string_value(json_array_get(ids, k)));
	return rc;
}

int
sbx_docker_snap_export(const char *id_or_name, int fd, struct sbx_err *err)
{
	struct sbx_http_resp rs = {0};
	struct port x = {0};
	struct dk d;
	json_t *m = NULL, *img = NULL, *ids;
	size_t base, n = 0, i;
	int sfd = -1, *fds = NULL, rc = -1;
	char *p;

	if (sbx_docker_open(&d, NULL, err) < 0)
		return -1;
	if (!(m = sbx_docker_snap_find(&d, id_or_name, err)) ||
	    !(img = inspect_image(&d, sbx_json_str(m, "image_id"), err)))
		goto out;
	ids = json_object_get(json_object_get(img, "RootFS"), "Layers");
	n = json_array_size(ids);
	base = (size_t)sbx_json_int(m, "base_layers", 0);
	if (base > n) {
		sbx_err_set(err, SBX_EX_DATA, "snapshot '%s' has bad layers",
		    id_or_name);
		goto out;
	}
	for (i = 0; i < n; i++)
		if (!json_is_string(json_array_get(ids, i)) || strlen(
		    json_string_value(json_array_get(ids, i))) != 71) {
			sbx_err_set(err, SBX_EX_DATA, "snapshot '%s' has bad "
			    "layers", id_or_name);
			goto out;
		}
	fds = sbx_xcalloc(n - base + 1, sizeof *fds);
	for (i = 0; i < n - base; i++)
		fds[i] = -1;
	/* The whole image: the engine has no save of some layers alone. */
	if ((sfd = tmpfd(err)) < 0)
		goto out;
	p = sbx_xasprintf("/images/%s/get", sbx_json_str(m, "image_id"));
	i = (size_t)req_fd(&d, "GET", p, -1, sfd, &rs, err);
	free(p);
	if ((int)i < 0)
		goto out;
	if (rs.status != 200) {
		sbx_docker_fail(&rs, SBX_EX_FAIL, "cannot save the snapshot's "
		    "image", err);
		goto out;
	}
	if (spool_layers(sfd, ids, base, fds, err) < 0)
		goto out;
	close(sfd);
	sfd = -1;
	sbx_snap_merge_init(&x.m);
	x.fds = fds;
	x.n = (int)(n - base);
	x.links = json_object();
	x.parent = sbx_xcalloc(n - base + 1, sizeof *x.parent);
	x.need = sbx_xcalloc(n - base + 1, sizeof *x.need);
	for (i = 0; i < n - base; i++) {
		x.parent[i] = json_object();
		x.need[i] = json_object();
	}
	x.err = err;
	rc = sbx_snap_merge_export(&x.m, x.n, walk_layer, &x, fd, m, &x.w,
	    err);
out:
	sbx_snap_merge_release(&x.m);
	json_decref(x.links);
	for (i = 0; fds && i < n - base; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		if (x.parent)
			json_decref(x.parent[i]);
		if (x.need)
			json_decref(x.need[i]);
	}
	free(x.parent);
	free(x.need);
	free(fds);
	if (sfd >= 0)
		close(sfd);
	sbx_http_resp_release(&rs);
	json_decref(m);
	json_decref(img);
	sbx_docker_close(&d);
	return rc;
}
