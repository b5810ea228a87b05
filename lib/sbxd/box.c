/* box.c - sbxd's sandboxes: the table, their records on disk, the clock */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "sbxd.h"

long long
sbxd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
sbxd_random_id(char *out, size_t n)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[64];
	size_t i;

	if (n > sizeof r)
		n = sizeof r;
	if (getrandom(r, n, 0) != (ssize_t)n)
		sbx_die(SBX_EX_FAIL, "cannot get random bytes:");
	/* 252 = 7 * 36: no bias from the modulo. */
	for (i = 0; i < n; i++) {
		while (r[i] >= 252)
			if (getrandom(&r[i], 1, 0) != 1)
				sbx_die(SBX_EX_FAIL, "cannot get random bytes:");
		out[i] = abc[r[i] % 36];
	}
	out[n] = 0;
}

static void
box_free(struct sbxd_box *b)
{
	json_decref(b->ref);
	json_decref(b->metadata);
	json_decref(b->envs);
	json_decref(b->daytona);
	json_decref(b->network);
	json_decref(b->log_seen);
	json_decref(b->volumes);
	free(b->template);
	free(b->workdir);
	explicit_bzero(b->token, sizeof b->token);
	explicit_bzero(b->traffic, sizeof b->traffic);
	free(b);
}

struct sbxd_box *
sbxd_box_get(const char *id)
{
	struct sbxd_box *b;

	pthread_mutex_lock(&sbxd.mu);
	for (b = sbxd.boxes; b; b = b->next)
		if (!strcmp(b->id, id))
			break;
	if (b)
		b->refs++;
	pthread_mutex_unlock(&sbxd.mu);
	return b;
}

void
sbxd_box_put_locked(struct sbxd_box *b)
{
	if (--b->refs == 0)
		box_free(b);
}

void
sbxd_box_put(struct sbxd_box *b)
{
	int last;

	pthread_mutex_lock(&sbxd.mu);
	last = --b->refs == 0;
	pthread_mutex_unlock(&sbxd.mu);
	if (last)
		box_free(b);
}

static char *
record_path(const struct sbxd_box *b)
{
	return sbx_xasprintf("%s/%s.json", sbxd.store, b->id);
}

int
sbxd_box_save(struct sbxd_box *b)
{
	struct sbx_err err;
	json_t *j;
	char *s, *path;
	int rc;

	pthread_mutex_lock(&sbxd.mu);
	if (b->gone) {
		pthread_mutex_unlock(&sbxd.mu);
		return 0;
	}
	j = json_pack("{s:s,s:O,s:s,s:O,s:O,s:I,s:I,s:b,s:b,s:b,s:s,s:s}",
	    "sandboxID", b->id, "ref", b->ref, "templateID", b->template,
	    "metadata", b->metadata, "envVars", b->envs,
	    "started_ms", (json_int_t)b->started_ms,
	    "end_ms", (json_int_t)b->end_ms, "paused", b->paused,
	    "autoPause", b->auto_pause, "internet", b->internet,
	    "token", b->token, "traffic", b->traffic);
	json_object_set_new(j, "autoPauseMemory",
	    json_boolean(!b->pause_files_only));
	if (b->network)
		json_object_set(j, "network", b->network);
	if (b->volumes)
		json_object_set(j, "volumeMounts", b->volumes);
	if (b->workdir)
		json_object_set_new(j, "workdir", json_string(b->workdir));
	if (b->ca)
		json_object_set_new(j, "ca", json_true());
	if (b->daytona)
		json_object_set(j, "daytona", b->daytona);
	if (b->delete_ms)
		json_object_set_new(j, "delete_ms",
		    json_integer(b->delete_ms));
	if (b->cpus || b->mem_mb || b->disk_mb)
		json_object_set_new(j, "size", json_pack("{s:I,s:I,s:I}",
		    "cpus", b->cpus, "memoryMB", b->mem_mb, "diskMB",
		    b->disk_mb));
	pthread_mutex_unlock(&sbxd.mu);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	path = record_path(b);
	/* 0600: the record holds the sandbox's access token. */
	rc = sbx_file_write_atomic(path, s, strlen(s), 0600, 0, &err);
	if (rc < 0)
		sbxd_log("cannot save sandbox %s: %s", b->id, err.msg);
	explicit_bzero(s, strlen(s));
	free(s);
	free(path);
	return rc;
}

/* A create is recorded before it starts, as {"sandboxID", "creating"}: if
 * sbxd is killed before the create ends, its next start finds the record
 * and kills what the create left (a sandbox labelled sbxd=ID), which no
 * one else knows of. The whole record replaces it once the box is made. */
int
sbxd_box_creating(const char *id, struct sbx_err *err)
{
	char *path = sbx_xasprintf("%s/%s.json", sbxd.store, id), *s;
	int rc;

	s = sbx_xasprintf("{\"sandboxID\":\"%s\",\"creating\":true}", id);
	rc = sbx_file_write_atomic(path, s, strlen(s), 0600, 0, err);
	free(s);
	free(path);
	return rc;
}

struct orphans {
	const char *id;
	json_t *ids;
};

static int
orphan_of(json_t *info, void *arg)
{
	struct orphans *o = arg;
	const char *l = sbx_json_str(json_object_get(info, "labels"), "sbxd");

	if (l && !strcmp(l, o->id) && sbx_json_str(info, "id"))
		json_array_append(o->ids, json_object_get(info, "id"));
	return 0;
}

void
sbxd_box_reap(const char *id)
{
	char *path = sbx_xasprintf("%s/%s.json", sbxd.store, id);
	struct orphans o = {id, json_array()};
	struct sbx_err err;
	json_t *ref, *v;
	size_t i;
	int bad = 0;

	if (sbxd.be->ops->list(orphan_of, &o, &err) < 0) {
		sbxd_log("cannot list sandboxes: %s", err.msg);
		bad = 1;
	}
	json_array_foreach(o.ids, i, v) {
		ref = json_pack("{s:s,s:O}", "backend", sbxd.be->name, "id", v);
		if (sbxd_be_kill(ref, &err) < 0 && err.code != SBX_EX_NOSANDBOX) {
			sbxd_log("cannot kill sandbox %s of an unfinished "
			    "create: %s", json_string_value(v), err.msg);
			bad = 1;
		} else {
			sbxd_log("killed sandbox %s of an unfinished create",
			    json_string_value(v));
		}
		json_decref(ref);
	}
	json_decref(o.ids);
	/* Kept when something stays, for the next start to try again. */
	if (!bad)
		unlink(path);
	free(path);
}

int
sbxd_box_add(struct sbxd_box *b)
{
	pthread_mutex_lock(&sbxd.mu);
	b->refs++;
	b->next = sbxd.boxes;
	sbxd.boxes = b;
	sbxd.nboxes++;
	pthread_mutex_unlock(&sbxd.mu);
	return sbxd_box_save(b);
}

void
sbxd_box_unlink(struct sbxd_box *b)
{
	struct sbxd_box **p;
	int found = 0;
	char *path;

	pthread_mutex_lock(&sbxd.mu);
	for (p = &sbxd.boxes; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			found = 1;
			sbxd.nboxes--;
			break;
		}
	b->gone = 1;
	pthread_cond_broadcast(&sbxd.cv);
	pthread_mutex_unlock(&sbxd.mu);
	if (!found)
		return;
	path = record_path(b);
	if (unlink(path) < 0 && errno != ENOENT)
		sbxd_log("cannot remove '%s': %s", path, strerror(errno));
	free(path);
	sbxd_box_put(b);
}

static char *
default_store(void)
{
	const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");

	if (geteuid() == 0)
		return sbx_xstrdup("/var/lib/sbxd");
	if (x && *x == '/')
		return sbx_xasprintf("%s/sbxd", x);
	if (home && *home)
		return sbx_xasprintf("%s/.local/state/sbxd", home);
	return sbx_xstrdup("/tmp/sbxd");
}

/* One record: the box back in the table when its sandbox is still
 * there, else the record goes. */
static void
adopt(const char *name)
{
	struct sbx_err err;
	struct sbxd_box *b;
	json_t *j, *info;
	char *path = sbx_xasprintf("%s/%s", sbxd.store, name);
	const char *s;

	j = sbx_json_load_object(path, &err);
	if (!j) {
		sbxd_log("ignoring '%s': %s", path, err.msg);
		free(path);
		return;
	}
	s = sbx_json_str(j, "sandboxID");
	if (json_is_true(json_object_get(j, "creating")) && s &&
	    strlen(s) == SBXD_ID_LEN) {
		sbxd_box_reap(s);
		json_decref(j);
		free(path);
		return;
	}
	b = sbx_xcalloc(1, sizeof *b);
	snprintf(b->id, sizeof b->id, "%s", s ? s : "");
	snprintf(b->token, sizeof b->token, "%s",
	    sbx_json_str(j, "token") ? sbx_json_str(j, "token") : "");
	snprintf(b->traffic, sizeof b->traffic, "%s",
	    sbx_json_str(j, "traffic") ? sbx_json_str(j, "traffic") : "");
	b->ref = json_incref(json_object_get(j, "ref"));
	s = sbx_json_str(j, "templateID");
	b->template = sbx_xstrdup(s ? s : "base");
	if ((s = sbx_json_str(j, "workdir")) && *s == '/')
		b->workdir = sbx_xstrdup(s);
	b->metadata = json_incref(json_object_get(j, "metadata"));
	b->envs = json_incref(json_object_get(j, "envVars"));
	b->started_ms = sbx_json_int(j, "started_ms", 0);
	b->end_ms = sbx_json_int(j, "end_ms", 0);
	b->auto_pause = json_is_true(json_object_get(j, "autoPause"));
	b->pause_files_only = json_is_false(json_object_get(j,
	    "autoPauseMemory"));
	b->internet = json_is_true(json_object_get(j, "internet"));
	b->ca = json_is_true(json_object_get(j, "ca"));
	if (json_is_object(json_object_get(j, "network")))
		b->network = json_incref(json_object_get(j, "network"));
	if (json_is_array(json_object_get(j, "volumeMounts")))
		b->volumes = json_incref(json_object_get(j, "volumeMounts"));
	if (json_is_object(json_object_get(j, "daytona")))
		b->daytona = json_incref(json_object_get(j, "daytona"));
	b->delete_ms = sbx_json_int(j, "delete_ms", 0);
	b->cpus = sbx_json_int(json_object_get(j, "size"), "cpus", 0);
	b->mem_mb = sbx_json_int(json_object_get(j, "size"), "memoryMB", 0);
	b->disk_mb = sbx_json_int(json_object_get(j, "size"), "diskMB", 0);
	b->next_pid = 100;
	json_decref(j);
	if (!b->metadata)
		b->metadata = json_object();
	if (!b->envs)
		b->envs = json_object();
	if (strlen(b->id) != SBXD_ID_LEN || !json_is_object(b->ref)) {
		sbxd_log("ignoring '%s': not a record of sbxd", path);
		box_free(b);
		free(path);
		return;
	}
	info = sbxd.be->ops->info(b->ref, &err);
	s = info ? sbx_json_str(info, "status") : NULL;
	if (!s || (strcmp(s, "running") && strcmp(s, "paused"))) {
		sbxd_log("sandbox %s is gone (%s)", b->id,
		    s ? s : err.msg);
		unlink(path);
		json_decref(info);
		box_free(b);
		free(path);
		return;
	}
	b->paused = !strcmp(s, "paused");
	json_decref(info);
	free(path);
	sbxd_box_add(b);
	sbxd_log("adopted sandbox %s (%s)", b->id, b->paused ? "paused" :
	    "running");
}

int
sbxd_store_adopt(struct sbx_err *err)
{
	DIR *d;
	struct dirent *e;
	size_t n;

	sbxd.store = sbxd.o.store ? sbx_xstrdup(sbxd.o.store) :
	    default_store();
	if (sbx_mkdirs(sbxd.store, 0700, err) < 0)
		return -1;
	if (!(d = opendir(sbxd.store)))
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':",
		    sbxd.store);
	while ((e = readdir(d))) {
		n = strlen(e->d_name);
		if (n == SBXD_ID_LEN + 5 && !strcmp(e->d_name + n - 5, ".json"))
			adopt(e->d_name);
	}
	closedir(d);
	return 0;
}

void
sbxd_env_free(char **env)
{
	size_t i;

	for (i = 0; env && env[i]; i++) {
		explicit_bzero(env[i], strlen(env[i]));
		free(env[i]);
	}
	free(env);
}

char **
sbxd_box_env(struct sbxd_box *b, const json_t *more)
{
	const json_t *objs[2];
	const char *k;
	json_t *v;
	char **env;
	size_t n = 0, i;

	pthread_mutex_lock(&sbxd.mu);
	objs[0] = b->envs;
	objs[1] = json_is_object(more) ? more : NULL;
	env = sbx_xcalloc(json_object_size(b->envs) +
	    (objs[1] ? json_object_size(objs[1]) : 0) + 2, sizeof *env);
	/* E2B's processes run as "user", whose home is /home/user: "~" is
	 * there as for envd's cwd and paths (the backend's default is /root).
	 * Later entries win, so envVars and envs may still set HOME. It
	 * comes first: a Start as root puts /root in its place. */
	env[n++] = sbx_xstrdup("HOME=/home/user");
	for (i = 0; i < 2; i++) {
		if (!objs[i])
			continue;
		json_object_foreach((json_t *)objs[i], k, v)
			if (json_is_string(v))
				env[n++] = sbx_xasprintf("%s=%s", k,
				    json_string_value(v));
	}
	pthread_mutex_unlock(&sbxd.mu);
	return env;
}

/* What the clock ends: a box past its end is killed, or paused. */
void *
sbxd_reaper(void *arg)
{
	struct sbxd_box *b, *due;
	struct sbx_err err;
	struct timespec ts;
	long long now;

	(void)arg;
	pthread_mutex_lock(&sbxd.mu);
	while (!sbxd.stopping) {
		now = sbxd_now_ms();
		for (due = NULL, b = sbxd.boxes; b; b = b->next)
			if ((!b->paused && !b->busy && b->end_ms <= now) ||
			    (b->paused && !b->busy && b->delete_ms &&
			    b->delete_ms <= now)) {
				due = b;
				break;
			} else if (!b->paused) {
				b->delete_ms = 0;
			}
		if (!due) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 250 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&sbxd.cv, &sbxd.mu, &ts);
			continue;
		}
		due->refs++;
		due->busy = 1;
		pthread_mutex_unlock(&sbxd.mu);
		if (due->auto_pause && !due->paused) {
			if ((due->pause_files_only ? sbxd_be_stop(due->ref,
			    &err) : sbxd_be_pause(due->ref, &err)) < 0)
				sbxd_log("cannot pause sandbox %s at its end: "
				    "%s", due->id, err.msg);
			pthread_mutex_lock(&sbxd.mu);
			due->paused = 1;
			if (due->daytona)
				sbxd_dt_stopped(due);
			due->busy = 0;
			pthread_mutex_unlock(&sbxd.mu);
			sbxd_box_save(due);
			sbxd_log("sandbox %s paused at its end%s", due->id,
			    due->pause_files_only ? " (files only)" : "");
		} else {
			pthread_mutex_lock(&sbxd.mu);
			due->dying = 1;
			pthread_mutex_unlock(&sbxd.mu);
			sbxd_proc_end_all(due);
			if (sbxd_be_kill(due->ref, &err) < 0 &&
			    err.code != SBX_EX_NOSANDBOX)
				sbxd_log("cannot kill sandbox %s at its end: "
				    "%s", due->id, err.msg);
			sbxd_box_unlink(due);
			sbxd_log("sandbox %s killed at its end", due->id);
		}
		sbxd_box_put(due);
		pthread_mutex_lock(&sbxd.mu);
	}
	pthread_mutex_unlock(&sbxd.mu);
	return NULL;
}
