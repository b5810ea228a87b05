/* warm.c - sandboxes made ahead for sbx-create (local.warm N).
 *
 * A create's own work is mostly the kernel's (namespaces, ~30 mounts, a
 * cgroup, a disk): 5-7 ms on two CPUs, more than the 5 ms a create and
 * its first command may take. With local.warm N, sbx-create keeps up to
 * N sandboxes made like the last one it was asked for, and a create
 * asking for the same takes one instead: its id, directory and kernel
 * objects are the warm sandbox's; its labels, --env and idle timeout are
 * given to it as it is taken (the agent takes the environment and the
 * timeout, meta.json the rest). A filler process of its own (the
 * create's child, in a session of its own, holding none of its files)
 * makes the pool full again once the create is done.
 *
 * The pool is ROOT/warm/KEY/, KEY a hash of the spec as it is compared
 * (sbx_spec_json's, its labels, env, timeout and start aside, with the
 * image's digest for an image of the store); each file in it names a
 * warm sandbox, whose meta.json holds the whole key text under "warm".
 * A create takes one by removing its file (of creates at once, one
 * gets each), then checks its meta. What a warm sandbox is made with
 * holds no secret: no --env, no header to inject or proxy password (such
 * a spec, a named one, one publishing ports and one with volumes, which
 * a sandbox made ahead would hold in use, are never pooled). One
 * left unused ends by its own idle timeout (local.warm_timeout, 10m) and
 * sbx-gc removes it as expired. Losing a race (a filler or a taker
 * killed half-way) leaves a sandbox that does the same. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "../image/image.h"
#include "local.h"

#define WARM_MAX 16
#define WARM_TIMEOUT 600 /* seconds idle before an unused one ends */
#define QUIET 250        /* ms without a take before one is made */

/* local.warm and local.warm_timeout. */
static int
warm_conf(unsigned *n, uint64_t *idle, struct sbx_err *err)
{
	const char *v = sbx_config_get("local.warm", "0");
	char *end;
	unsigned long k;

	errno = 0;
	k = strtoul(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || k > WARM_MAX)
		return sbx_err_set(err, SBX_EX_USAGE, "local.warm: '%s' is not "
		    "a count from 0 to %d", v, WARM_MAX);
	*n = (unsigned)k;
	*idle = WARM_TIMEOUT;
	v = sbx_config_get("local.warm_timeout", NULL);
	if (k && v && sbx_opt_duration("local.warm_timeout", v, 1,
	    SBX_TIMEOUT_MAX, idle, err) < 0)
		return -1;
	return 0;
}

/* The spec as the pool compares it (malloc'd JSON text), or NULL: it is
 * not pooled. */
static char *
warm_key(const struct sbx_spec *spec)
{
	static const char *const aside[] = {"labels", "env", "timeout",
	    "start", "name"};
	struct sbx_image_use iu = {0};
	struct sbx_err err;
	json_t *k;
	char *text;
	size_t i;

	if (spec->name || spec->ports || spec->net_inject ||
	    spec->egress_proxy || json_array_size(spec->volumes))
		return NULL;
	k = sbx_spec_json(spec);
	for (i = 0; i < sizeof aside / sizeof aside[0]; i++)
		json_object_del(k, aside[i]);
	/* An image of the store by its digest: pulled again, it is new. */
	if (spec->image && strcmp(spec->image, "host") &&
	    !sbx_image_is_path(spec->image)) {
		if (sbx_image_lookup(spec->image, &iu, &err) < 0) {
			json_decref(k);
			return NULL;
		}
		json_object_set_new(k, "image_digest", json_string(iu.digest));
		sbx_image_use_release(&iu);
	}
	text = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(k);
	return text;
}

/* ROOT/warm/HASH, HASH the key's 64-bit FNV-1a (the key itself is
 * compared with the sandbox's: a collision costs a miss, never a wrong
 * sandbox). */
static char *
pool_dir(const char *key)
{
	return sbx_xasprintf("%s/warm/%016llx", sbx_local_root(),
	    (unsigned long long)sbx_fnv1a(sbx_fnv1a(0, NULL, 0), key,
	    strlen(key)));
}

/* The meta of warm sandbox id if it runs, made for key, untouched since;
 * else NULL. */
static json_t *
warm_meta(const char *id, const char *key, char **dirp)
{
	char *dir = sbx_xasprintf("%s/%s", sbx_local_root(), id);
	json_t *meta = sbx_local_meta(dir);
	const char *w = sbx_json_str(meta, "warm");

	if (!w || strcmp(w, key) || !sbx_local_live(meta) ||
	    sbx_local_paused(dir, NULL)) {
		json_decref(meta);
		free(dir);
		return NULL;
	}
	*dirp = dir;
	return meta;
}

/* Give warm sandbox id what spec asks beyond its key: 1 and *ref, or 0
 * (it is killed: the create makes one of its own). */
static int
adopt(const char *id, const char *key, const struct sbx_spec *spec,
    json_t **ref)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct timeval tv = {5, 0};
	struct sbx_msg m = {0};
	struct sbx_err err;
	json_t *meta, *names = json_array(), *r;
	char *dir = NULL, *text, *path;
	uint32_t n = 0, i;
	int sock, rc = -1;

	if (!(meta = warm_meta(id, key, &dir))) {
		/* Dead or changed: its idle timeout or sbx-gc ends it. */
		json_decref(names);
		return 0;
	}
	while (spec->env && spec->env[n])
		n++;
	sbx_msg_put_u64(&b, spec->timeout);
	sbx_msg_put_u32(&b, n);
	for (i = 0; i < n; i++) {
		sbx_msg_put_str(&b, spec->env[i]);
		json_array_append_new(names, json_stringn(spec->env[i],
		    strcspn(spec->env[i], "=")));
	}
	if ((sock = sbx_local_connect(dir)) >= 0) {
		setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		if (sbx_msg_send(sock, SBX_MSG_ADOPT, b.data, b.len, NULL,
		    0) == 0 && sbx_msg_recv(sock, &m) > 0 &&
		    m.type == SBX_MSG_INFOREP)
			rc = 0;
		sbx_msg_release(&m);
		close(sock);
	}
	/* Values of --env may be secrets: leave no copy in our heap. */
	explicit_bzero(b.data, b.len);
	sbx_buf_release(&b);
	json_object_del(meta, "warm");
	json_object_set(meta, "labels", spec->labels ? spec->labels :
	    json_object());
	json_object_set_new(meta, "timeout", json_integer((json_int_t)
	    spec->timeout));
	json_object_set_new(meta, "created_at_epoch", json_integer(sbx_now()));
	json_object_set_new(meta, "env_names", names);
	if (spec->start)
		json_object_set(meta, "start", spec->start);
	text = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER);
	path = sbx_xasprintf("%s/meta.json", dir);
	if (rc == 0 && text)
		rc = sbx_file_write_atomic(path, text, strlen(text), 0600, 0,
		    &err);
	free(path);
	free(text);
	json_decref(meta);
	r = json_pack("{ssssss}", "backend", "local", "id", id, "dir", dir);
	free(dir);
	if (rc < 0) {
		sbx_local_ops.kill(r, 0, &err);
		json_decref(r);
		return 0;
	}
	*ref = r;
	return 1;
}

int
sbx_local_warm_take(const struct sbx_spec *spec, json_t **ref,
    struct sbx_err *err)
{
	unsigned n;
	uint64_t idle;
	char *key, *pool;
	struct dirent *e;
	DIR *d;
	int got = 0;

	if (warm_conf(&n, &idle, err) < 0)
		return -1;
	if (!n || !(key = warm_key(spec)))
		return 0;
	pool = pool_dir(key);
	if ((d = opendir(pool))) {
		/* Its file removed, it is ours (another create's else). */
		while (!got && (e = readdir(d)))
			if (sbx_local_valid_id(e->d_name) && unlinkat(dirfd(d),
			    e->d_name, 0) == 0)
				got = adopt(e->d_name, key, spec, ref);
		closedir(d);
	}
	free(pool);
	free(key);
	return got;
}

/* How many of the pool's sandboxes are there to take; the files of those
 * that are not go. */
static unsigned
pool_live(int fd, const char *key)
{
	DIR *d = fdopendir(openat(fd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC));
	struct dirent *e;
	unsigned live = 0;
	json_t *meta;
	char *dir;

	while (d && (e = readdir(d))) {
		if (!sbx_local_valid_id(e->d_name))
			continue;
		if ((meta = warm_meta(e->d_name, key, &dir))) {
			live++;
			json_decref(meta);
			free(dir);
		} else {
			unlinkat(fd, e->d_name, 0);
		}
	}
	if (d)
		closedir(d);
	return live;
}

/* Milliseconds since the pool was last taken from (its directory's
 * mtime, unless it is still seen, the one our last link gave it). */
static long long
since_taken(int fd, struct timespec *seen)
{
	struct timespec now;
	struct stat st;

	if (fstat(fd, &st) < 0 || (st.st_mtim.tv_sec == seen->tv_sec &&
	    st.st_mtim.tv_nsec == seen->tv_nsec))
		return QUIET;
	clock_gettime(CLOCK_REALTIME, &now);
	return (now.tv_sec - st.st_mtim.tv_sec) * 1000 + (now.tv_nsec -
	    st.st_mtim.tv_nsec) / 1000000;
}

/* The filler: one at a time per pool (its directory locked, never
 * waited for), at most n made, each once no create has taken one for
 * QUIET ms: a burst of creates, and the first command of the create
 * that started it, have the CPUs to themselves. */
static void
fill(const struct sbx_spec *spec, const char *key, unsigned n, uint64_t idle)
{
	struct sbx_spec w = *spec;
	struct sbx_err err;
	char *pool = pool_dir(key);
	struct timespec seen = {0, 0};
	struct stat st;
	long long quiet;
	unsigned made;
	json_t *ref;
	int fd, lk;

	lk = sbx_mkdirs(pool, 0700, &err) < 0 ? -1 : open(pool, O_RDONLY |
	    O_DIRECTORY | O_CLOEXEC);
	free(pool);
	if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0)
		return;
	/* Nothing of the create's that may be secret or its own. */
	w.env = NULL;
	w.labels = NULL;
	w.start = NULL;
	w.timeout = idle;
	sbx_sleep_ms(QUIET);
	for (made = 0; made < n; ) {
		if ((quiet = since_taken(lk, &seen)) < QUIET) {
			sbx_sleep_ms(QUIET - (quiet < 0 ? 0 : quiet));
			continue;
		}
		if (pool_live(lk, key) >= n)
			break;
		if (sbx_local_make_warm(&w, key, &ref, &err) < 0)
			return;
		fd = openat(lk, sbx_json_str(ref, "id"), O_WRONLY | O_CREAT |
		    O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
		json_decref(ref);
		if (fstat(lk, &st) == 0)
			seen = st.st_mtim;
		made++;
	}
}

void
sbx_local_warm_fill(const struct sbx_spec *spec)
{
	struct sbx_err err;
	unsigned n;
	uint64_t idle;
	char *key;
	pid_t pid;
	int fd;

	if (warm_conf(&n, &idle, &err) < 0 || !n || !(key = warm_key(spec)))
		return;
	/* A child in a session of its own, not waited for (sbx-create
	 * exits next: it is reaped by whoever inherits it), holding none of
	 * the caller's pipes and locks. */
	fflush(NULL);
	if ((pid = fork()) != 0) {
		free(key);
		return;
	}
	setsid();
	if (close_range(0, ~0u, 0) < 0)
		for (fd = (int)sysconf(_SC_OPEN_MAX) - 1; fd >= 0; fd--)
			close(fd);
	if ((fd = open("/dev/null", O_RDWR)) == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	fill(spec, key, n, idle);
	_exit(0);
}

void
sbx_local_warm_sweep(void)
{
	char *top = sbx_xasprintf("%s/warm", sbx_local_root()), *p;
	DIR *d = opendir(top), *pd;
	struct dirent *e, *f;
	int fd;

	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || (fd = openat(dirfd(d), e->d_name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			continue;
		/* A pool its filler is at work on is left alone. */
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && (pd = fdopendir(openat(
		    fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)))) {
			while ((f = readdir(pd))) {
				if (!sbx_local_valid_id(f->d_name))
					continue;
				p = sbx_xasprintf("%s/%s", sbx_local_root(),
				    f->d_name);
				if (access(p, F_OK) < 0 && errno == ENOENT)
					unlinkat(fd, f->d_name, 0);
				free(p);
			}
			closedir(pd);
			/* Empty: a spec no create asks for now. */
			unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
		}
		close(fd);
	}
	if (d)
		closedir(d);
	free(top);
}

