/* volume.c - named volumes of the local backend: ROOT/volumes/NAME/data,
 * a directory in the store that sandboxes mount (sbx-volume, --volume) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local.h"

static char *
volumes_dir(void)
{
	return sbx_xasprintf("%s/volumes", sbx_local_root());
}

int
sbx_local_volumes_lock(int exclusive)
{
	char *dir = volumes_dir();
	struct sbx_err ignored = {0};
	int fd = -1;

	if (sbx_mkdirs(dir, 0700, &ignored) == 0)
		fd = sbx_local_lock(dir, exclusive);
	free(dir);
	return fd;
}

/* Its entry: {"backend","name","created","path"} (path: its files). */
static json_t *
vol_info(const char *name)
{
	char *dir = sbx_xasprintf("%s/volumes/%s", sbx_local_root(), name);
	char created[32];
	struct stat st;
	json_t *o = NULL;

	/* NAME holds data alone, made with it: its mtime is its birth. */
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		sbx_time_fmt((long long)st.st_mtime, created, sizeof created);
		o = json_pack("{ssssssss+}", "backend", "local", "name", name,
		    "created", created, "path", dir, "/data");
	}
	free(dir);
	return o;
}

char *
sbx_local_volume_path(const char *name, int create, struct sbx_err *err)
{
	char *dir = volumes_dir(), *v = NULL, *data = NULL;
	int made = 0;

	if (!sbx_volume_valid_name(name)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid volume name '%s' "
		    "(want [a-zA-Z0-9][a-zA-Z0-9_.-]{0,63})", name);
		goto out;
	}
	v = sbx_xasprintf("%s/%s", dir, name);
	data = sbx_xasprintf("%s/data", v);
	if (create) {
		if (sbx_mkdirs(dir, 0700, err) < 0)
			goto fail;
		if (mkdir(v, 0700) == 0)
			made = 1;
		else if (errno != EEXIST) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", v);
			goto fail;
		}
		/* Owned by root on the disk: every sandbox's root through
		 * its idmapped mount (rootless: by us, its only id). */
		if ((mkdir(data, 0755) < 0 && errno != EEXIST) ||
		    (made && chmod(data, 0755) < 0)) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':",
			    data);
			goto fail;
		}
	}
	if (access(data, F_OK) < 0) {
		sbx_err_set(err, SBX_EX_NOSANDBOX, "no volume '%s'", name);
		goto fail;
	}
	goto out;
fail:
	free(data);
	data = NULL;
out:
	free(v);
	free(dir);
	return data;
}

struct users {
	const char *name;
	json_t *ids;
};

/* A sandbox not gone (running, paused, stopped) whose meta names it. */
static int
user_of(json_t *info, void *arg)
{
	struct users *u = arg;
	const char *st = sbx_json_str(info, "status"), *id;
	json_t *meta, *v;
	struct sbx_err ignored;
	char *p;
	size_t i;

	if (!st || (strcmp(st, "running") && strcmp(st, "paused") &&
	    strcmp(st, "stopped")) || !(id = sbx_json_str(info, "id")))
		return 0;
	p = sbx_xasprintf("%s/%s/meta.json", sbx_local_root(), id);
	meta = sbx_json_load_object(p, &ignored);
	free(p);
	json_array_foreach(json_object_get(meta, "volumes"), i, v)
		if (!strcmp(sbx_json_str(v, "name") ? sbx_json_str(v,
		    "name") : "", u->name)) {
			json_array_append_new(u->ids, json_string(id));
			break;
		}
	json_decref(meta);
	return 0;
}

static int
vol_rm(const char *name, struct sbx_err *err)
{
	struct users u = {name, json_array()};
	char *data, *v, text[256];
	int rc = -1, lk = sbx_local_volumes_lock(1);

	if (!(data = sbx_local_volume_path(name, 0, err)))
		goto out;
	if (sbx_local_ops.list(user_of, &u, err) < 0)
		goto out;
	if (json_array_size(u.ids)) {
		sbx_volume_users_text(u.ids, text, sizeof text);
		sbx_err_set(err, SBX_EX_FAIL, "volume '%s' is in use by %s",
		    name, text);
		goto out;
	}
	v = sbx_xasprintf("%s/volumes/%s", sbx_local_root(), name);
	if ((rc = sbx_rmtree(v)) < 0)
		sbx_err_set(err, SBX_EX_FAIL, "cannot remove '%s':", v);
	free(v);
out:
	if (lk >= 0)
		close(lk);
	free(data);
	json_decref(u.ids);
	return rc;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
vol_ls(int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err)
{
	char *dir = volumes_dir(), **names = NULL;
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0, i;
	json_t *o;
	int rc = 0;

	if (!d) {
		free(dir);
		return errno == ENOENT ? 0 : sbx_err_set(err, SBX_EX_FAIL,
		    "cannot read the volumes:");
	}
	while ((e = readdir(d)))
		if (sbx_volume_valid_name(e->d_name)) {
			names = sbx_xrealloc(names, (n + 1) * sizeof *names);
			names[n++] = sbx_xstrdup(e->d_name);
		}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, by_name);
	for (i = 0; i < n; i++) {
		if (!rc && (o = vol_info(names[i]))) {
			rc = fn(o, arg) < 0 ? -1 : 0;
			json_decref(o);
		}
		free(names[i]);
	}
	free(names);
	free(dir);
	return rc;
}

int
sbx_local_volume(const char *op, const char *name,
    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err)
{
	char *data;
	json_t *o;
	int rc;

	if (!strcmp(op, "ls"))
		return vol_ls(fn, arg, err);
	if (!strcmp(op, "rm"))
		return vol_rm(name, err);
	if (!(data = sbx_local_volume_path(name, 1, err)))
		return -1;
	free(data);
	o = vol_info(name);
	rc = o && fn ? fn(o, arg) : 0;
	json_decref(o);
	return rc < 0 ? -1 : 0;
}
