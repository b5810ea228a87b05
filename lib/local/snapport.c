/* snapport.c - a snapshot of the store as one portable tar (sbx-snapshot
 * export): first "sbx-snapshot.json", its meta with "format" and the
 * paths the sandbox deleted of its image ("deleted") or whose content
 * of the image it dropped ("opaque": emptied, then filled again), then
 * its files under "files/", as the sandbox's root owns them. No
 * whiteout goes in the tar: a backend it is imported on (lib/snapimport.c)
 * deletes those paths, then extracts the files over them. Hard links
 * are files of their own there (the backends' transfer takes none). A
 * snapshot stacked on others (of a --from sandbox) goes flattened. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "local.h"

/* A snapshot of a --from sandbox is its tree over its parents': the
 * layers are merged as the overlay merges them, top first. */
struct port {
	char *layer[SBX_SNAP_DEPTH]; /* the trees, top first */
	int nlayers;
	int host_owners;        /* its owners are the host's (rootless) */
	struct sbx_snap_merge m;
	struct archive *w;
	struct sbx_err *err;
};

/* Not the sandbox's own: the mount points every sandbox has, and sbx's
 * state in it (its detached commands' output). */
int
sbx_snap_port_skipped(const char *rel)
{
	static const char *const top[] = {"proc", "sys", "dev", "tmp/.sbx"};
	size_t i, n;

	for (i = 0; i < sizeof top / sizeof top[0]; i++) {
		n = strlen(top[i]);
		if (!strncmp(rel, top[i], n) && (!rel[n] || rel[n] == '/'))
			return 1;
	}
	return 0;
}

static int
opaque_dir(const char *path)
{
	char v[2];

	return (getxattr(path, "trusted.overlay.opaque", v, 1) == 1 ||
	    getxattr(path, "user.overlay.opaque", v, 1) == 1) && v[0] == 'y';
}

static int
put_entry(struct port *x, struct archive_entry *e, const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd, rc = 0;

	if (archive_write_header(x->w, e) != ARCHIVE_OK)
		return sbx_err_set(x->err, SBX_EX_FAIL, "cannot write the "
		    "archive: %s", archive_error_string(x->w));
	if (archive_entry_size(e) <= 0 || !path)
		return 0;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return sbx_err_set(x->err, SBX_EX_FAIL, "cannot read '%s':",
		    path);
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (archive_write_data(x->w, buf, (size_t)n) != n) {
			rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot write "
			    "the archive: %s", archive_error_string(x->w));
			break;
		}
	if (n < 0 && !rc)
		rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot read '%s':",
		    path);
	close(fd);
	return rc;
}

/* One file of the tree (rel, at path) as "files/rel". */
static int
emit(struct port *x, const char *rel, const char *path, const struct stat *st)
{
	struct archive_entry *e = archive_entry_new();
	char *name = sbx_xasprintf("files/%s", rel), target[4096];
	ssize_t n;
	int rc = 0;

	archive_entry_copy_stat(e, st);
	archive_entry_set_pathname(e, name);
	if (x->host_owners) {
		/* Rootless: the user is the sandbox's root. */
		archive_entry_set_uid(e, 0);
		archive_entry_set_gid(e, 0);
	}
	if (S_ISLNK(st->st_mode)) {
		if ((n = readlink(path, target, sizeof target - 1)) < 0) {
			rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot read "
			    "'%s':", path);
			goto out;
		}
		target[n] = '\0';
		archive_entry_set_symlink(e, target);
	}
	/* Hard links go as files of their own, each with its data: the
	 * transfer contract of the backends (sbx-cp's) takes no link but
	 * a symlink. */
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) ||
	    S_ISLNK(st->st_mode)) {
		archive_entry_set_nlink(e, S_ISDIR(st->st_mode) ? 2 : 1);
		rc = put_entry(x, e, S_ISREG(st->st_mode) ? path : NULL);
	}
	/* Sockets, fifos and devices are the sandbox's business. */
out:
	archive_entry_free(e);
	free(name);
	return rc;
}

void
sbx_snap_merge_init(struct sbx_snap_merge *m)
{
	m->deleted = json_array();
	m->opaque = json_array();
	m->seen = json_object();
	m->wh = json_object();
	m->op = json_object();
	m->next_wh = json_object();
	m->next_op = json_object();
}

void
sbx_snap_merge_release(struct sbx_snap_merge *m)
{
	json_decref(m->deleted);
	json_decref(m->opaque);
	json_decref(m->seen);
	json_decref(m->wh);
	json_decref(m->op);
	json_decref(m->next_wh);
	json_decref(m->next_op);
	memset(m, 0, sizeof *m);
}

int
sbx_snap_merge_hidden(const struct sbx_snap_merge *m, const char *rel)
{
	char *p = sbx_xstrdup(rel), *slash;
	int h = json_object_get(m->wh, p) != NULL;

	while (!h && (slash = strrchr(p, '/'))) {
		*slash = '\0';
		h = json_object_get(m->wh, p) || json_object_get(m->op, p);
	}
	free(p);
	return h;
}

/* "/rel" appended to list unless it is there. */
static void
add_once(json_t *list, const char *rel)
{
	char *p = sbx_xasprintf("/%s", rel);
	json_t *v;
	size_t i;

	json_array_foreach(list, i, v)
		if (!strcmp(json_string_value(v), p)) {
			free(p);
			return;
		}
	json_array_append_new(list, json_string(p));
	free(p);
}

void
sbx_snap_merge_mark(struct sbx_snap_merge *m, const char *rel, int opaque,
    int pass)
{
	json_object_set_new(opaque ? m->next_op : m->next_wh, rel,
	    json_true());
	if (!pass)
		add_once(opaque ? m->opaque : m->deleted, rel);
}

int
sbx_snap_merge_walk(struct sbx_snap_merge *m, int n, int pass,
    int (*layer)(void *arg, int l, int pass), void *arg)
{
	int l;

	json_object_clear(m->seen);
	json_object_clear(m->wh);
	json_object_clear(m->op);
	for (l = 0; l < n; l++) {
		json_object_clear(m->next_wh);
		json_object_clear(m->next_op);
		if (layer(arg, l, pass) < 0)
			return -1;
		json_object_update(m->wh, m->next_wh);
		json_object_update(m->op, m->next_op);
	}
	return 0;
}

/* Layer l's directory rel: pass 0 the whiteouts and opaque directories,
 * 1 the files too. */
static int
walk(struct port *x, int l, const char *rel, int pass)
{
	char *dir = *rel ? sbx_xasprintf("%s/%s", x->layer[l], rel) :
	    sbx_xstrdup(x->layer[l]);
	struct dirent **ents = NULL;
	struct stat st;
	int n, i, rc = 0, was;

	if ((n = scandir(dir, &ents, NULL, alphasort)) < 0) {
		rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot read '%s':",
		    dir);
		free(dir);
		return rc;
	}
	for (i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		char *crel, *path;

		if (rc || !strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		crel = *rel ? sbx_xasprintf("%s/%s", rel, nm) :
		    sbx_xstrdup(nm);
		path = sbx_xasprintf("%s/%s", dir, nm);
		was = (int)json_integer_value(json_object_get(x->m.seen,
		    crel));
		if (sbx_snap_port_skipped(crel) ||
		    sbx_snap_merge_hidden(&x->m, crel)) {
			;
		} else if (lstat(path, &st) < 0) {
			rc = sbx_err_set(x->err, SBX_EX_FAIL, "cannot read "
			    "'%s':", path);
		} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0,
		    0)) {
			/* Gone from the layers below and the image (made
			 * again above, maybe: removed first all the same). */
			sbx_snap_merge_mark(&x->m, crel, 0, pass);
		} else if (was && (was != 2 || !S_ISDIR(st.st_mode))) {
			;       /* the layer above's wins */
		} else {
			if (S_ISDIR(st.st_mode) && opaque_dir(path))
				sbx_snap_merge_mark(&x->m, crel, 1, pass);
			if (!was) {
				json_object_set_new(x->m.seen, crel,
				    json_integer(S_ISDIR(st.st_mode) ? 2 : 1));
				if (pass)
					rc = emit(x, crel, path, &st);
			}
			if (!rc && S_ISDIR(st.st_mode))
				rc = walk(x, l, crel, pass);
		}
		free(crel);
		free(path);
	}
	for (i = 0; i < n; i++)
		free(ents[i]);
	free(ents);
	free(dir);
	return rc;
}

static int
walk_layer(void *arg, int l, int pass)
{
	return walk(arg, l, "", pass);
}

/* The export's tar writer on fd, its head written: sbx-snapshot.json
 * (meta m with "format", the lists deleted and opaque, owners
 * "sandbox"), then "files/"; NULL on a failure. */
static struct archive *
port_open(int fd, const json_t *m, json_t *deleted, json_t *opaque,
    struct sbx_err *err)
{
	static const char *const drop[] = {"layers", "pause_ms", "image_id",
	    "base_layers", "base_size", "endpoint", "runtime", "image_path"};
	struct archive_entry *e;
	json_t *man = json_deep_copy(m);
	struct archive *w = archive_write_new();
	char *s;
	size_t i;
	int rc = 0;

	if (archive_write_set_format_pax_restricted(w) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(w, fd) != ARCHIVE_OK)
		rc = -1;

	json_object_set_new(man, "format", json_string("sbx-snapshot/1"));
	json_object_set(man, "deleted", deleted);
	json_object_set(man, "opaque", opaque);
	/* What only the store, or the engine, means (a runtime too; a qemu
	 * image's path on this host). */
	for (i = 0; i < sizeof drop / sizeof drop[0]; i++)
		json_object_del(man, drop[i]);
	json_object_set_new(man, "owners", json_string("sandbox"));
	s = json_dumps(man, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(man);
	e = archive_entry_new();
	archive_entry_set_pathname(e, "sbx-snapshot.json");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)strlen(s));
	archive_entry_set_mtime(e, sbx_json_int(m, "created_epoch", 0), 0);
	if (rc < 0 || archive_write_header(w, e) != ARCHIVE_OK ||
	    archive_write_data(w, s, strlen(s)) != (la_ssize_t)strlen(s))
		rc = -1;
	archive_entry_free(e);
	free(s);
	if (rc == 0) {
		e = archive_entry_new();
		archive_entry_set_pathname(e, "files/");
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, 0755);
		rc = archive_write_header(w, e) == ARCHIVE_OK ? 0 : -1;
		archive_entry_free(e);
	}
	if (rc < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write the archive: %s",
		    archive_error_string(w));
		archive_write_free(w);
		return NULL;
	}
	return w;
}

int
sbx_snap_merge_export(struct sbx_snap_merge *m, int n,
    int (*layer)(void *arg, int l, int pass), void *arg, int fd,
    const json_t *meta, struct archive **w, struct sbx_err *err)
{
	int rc;

	if (sbx_snap_merge_walk(m, n, 0, layer, arg) < 0 ||
	    !(*w = port_open(fd, meta, m->deleted, m->opaque, err)))
		return -1;
	rc = sbx_snap_merge_walk(m, n, 1, layer, arg);
	if (rc == 0 && archive_write_close(*w) != ARCHIVE_OK)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot write the "
		    "archive: %s", archive_error_string(*w));
	archive_write_free(*w);
	*w = NULL;
	return rc;
}

int
sbx_snap_export(const char *id_or_name, int fd, struct sbx_err *err)
{
	struct port x = {0};
	json_t *m, *layers, *v;
	size_t i;
	int rc = -1;

	if (!(m = sbx_snap_get(id_or_name, err)))
		return -1;
	layers = json_object_get(m, "layers");
	if (!json_array_size(layers) || json_array_size(layers) >
	    SBX_SNAP_DEPTH) {
		sbx_err_set(err, SBX_EX_DATA, "snapshot '%s' has bad layers",
		    id_or_name);
		goto out;
	}
	json_array_foreach(layers, i, v)
		if (!json_is_string(v) || !(x.layer[x.nlayers++] =
		    sbx_snap_tree(json_string_value(v)))) {
			sbx_err_set(err, SBX_EX_FAIL, "snapshot '%s': its layer "
			    "'%s' is gone", id_or_name, json_is_string(v) ?
			    json_string_value(v) : "?");
			goto out;
		}
	sbx_snap_merge_init(&x.m);
	x.host_owners = !strcmp(sbx_json_str(m, "owners") ?
	    sbx_json_str(m, "owners") : "", "host");
	x.err = err;
	rc = sbx_snap_merge_export(&x.m, x.nlayers, walk_layer, &x, fd, m,
	    &x.w, err);
out:
	sbx_snap_merge_release(&x.m);
	for (i = 0; i < (size_t)x.nlayers; i++)
		free(x.layer[i]);
	json_decref(m);
	return rc;
}
