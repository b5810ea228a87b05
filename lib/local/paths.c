/* paths.c - where local sandboxes live, and finding one */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"

const char *
sbx_local_root(void)
{
	static char *root;

	if (!root)
		root = sbx_config_dir("local.dir", "local", 0);
	return root;
}

int
sbx_local_valid_id(const char *id)
{
	size_t i;

	for (i = 0; id[i]; i++)
		if (!isxdigit((unsigned char)id[i]) || isupper((unsigned char)id[i]))
			return 0;
	return i == SBX_ID_LEN;
}

long long
sbx_local_dir_born(const char *dir)
{
	struct statx sx;

	if (statx(AT_FDCWD, dir, 0, STATX_MTIME | STATX_BTIME, &sx) < 0)
		return -1;
	if ((sx.stx_mask & STATX_BTIME) && sx.stx_btime.tv_sec <
	    sx.stx_mtime.tv_sec)
		return sx.stx_btime.tv_sec;
	return sx.stx_mtime.tv_sec;
}

char *
sbx_local_find(const char *id_or_name, char **id_out)
{
	return sbx_local_find_in(sbx_local_root(), id_or_name, id_out);
}

char *
sbx_local_find_in(const char *root, const char *id_or_name, char **id_out)
{
	char *dir, *link, target[64];
	ssize_t n;
	struct stat st;

	if (sbx_local_valid_id(id_or_name)) {
		dir = sbx_xasprintf("%s/%s", root, id_or_name);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (id_out)
				*id_out = sbx_xstrdup(id_or_name);
			return dir;
		}
		free(dir);
	}
	if (strchr(id_or_name, '/') || !*id_or_name || *id_or_name == '.')
		return NULL;
	/* Names are symlinks name -> id in the names directory. */
	link = sbx_xasprintf("%s/.names/%s", root, id_or_name);
	n = readlink(link, target, sizeof target - 1);
	free(link);
	if (n <= 0)
		return NULL;
	target[n] = '\0';
	if (!sbx_local_valid_id(target))
		return NULL;
	dir = sbx_xasprintf("%s/%s", root, target);
	if (stat(dir, &st) < 0) {
		free(dir);
		return NULL;
	}
	if (id_out)
		*id_out = sbx_xstrdup(target);
	return dir;
}

int
sbx_local_claim_name(const char *root, const char *name, const char *id,
    struct sbx_err *err)
{
	char *dir = sbx_xasprintf("%s/.names", root);
	char *p = sbx_xasprintf("%s/%s", dir, name), *other;
	int rc = 0;

	mkdir(dir, 0700);
	if (symlink(id, p) == 0) {
		/* claimed */
	} else if (errno != EEXIST) {
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot claim name '%s':",
		    name);
	} else if ((other = sbx_local_find_in(root, name, NULL))) {
		free(other);
		rc = sbx_err_set(err, SBX_EX_FAIL, "the name '%s' is in use",
		    name);
	} else if (unlink(p) < 0 || symlink(id, p) < 0) {
		/* It named a sandbox that is gone: take it over. */
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot claim name '%s':",
		    name);
	}
	free(p);
	free(dir);
	return rc;
}


/* The directory and its socket must be ours: a state file that points
 * elsewhere must not get our stdio handed to someone else's socket. The
 * directory fd pins what was checked until the connect. */
int
sbx_local_connect(const char *dir)
{
	return sbx_local_connect_to(dir, "sock");
}

int
sbx_local_connect_to(const char *dir, const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd = -1, dfd, e;

	if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() ||
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
		close(dfd);
		errno = ECONNREFUSED;
		return -1;
	}
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd,
	    name);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
	    connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		e = errno;
		close(fd);
		errno = e;
		fd = -1;
	}
	e = errno;
	close(dfd);
	errno = e;
	return fd;
}

unsigned long long
sbx_local_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and parens: fields count from the last ')'. */
	if (!(p = strrchr(buf, ')')))
		return 0;
	p += 2;
	if (*p == 'Z' || *p == 'X')
		return 0; /* a zombie is gone for our purposes */
	for (field = 3; field < 22 && p; field++)
		if ((p = strchr(p, ' ')))
			p++;
	if (p)
		t = strtoull(p, NULL, 10);
	return t;
}

int
sbx_local_lock(const char *dir, int exclusive)
{
	char *p = sbx_xasprintf("%s/.lock", dir);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	free(p);
	while (fd >= 0 && flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR) {
			close(fd);
			fd = -1;
		}
	return fd;
}

/* --- the trash: killed sandboxes' directories, removed after the kill --- */

/* Removers of the trash's entries at once: a removal waits mostly on
 * the host's disk (an ext4 mounted with discard waits for each freed
 * block's discard: ~35 ms a sandbox's directory), so a fleet's kill
 * leaves its directories to several of them. */
#define TRASH_WORKERS 8

/* Remove the trash t's entry name: first the end of its sandbox, which
 * its kill did not wait for (its processes, cgroups and disk), then its
 * uid slot and name, where they still name it (a kill killed after its
 * rename left them taken). */
static int
trash_remove(const char *t, const char *name)
{
	char *p = sbx_xasprintf("%s/%s", t, name), *id = sbx_xstrdup(name);
	int rc;

	/* ID.PID. Its directory stays until its processes and cgroups
	 * are gone: what a killed remover left, sbx-gc finds here. */
	id[strcspn(id, ".")] = '\0';
	rc = sbx_local_valid_id(id) ? sbx_local_release_of(p, id) : 0;
	free(id);
	if (rc == 0)
		rc = sbx_rmtree(p);
	free(p);
	return rc;
}

/* Remove what the trash t holds (its lock ours; our children share it
 * until they are done); -1 when something is left. Names starting with
 * '.' are not entries. */
static int
trash_empty(const char *t)
{
	DIR *d = opendir(t);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	pid_t pids[TRASH_WORKERS];
	int rc = 0, k, nw = 0, status;

	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			names = sbx_xrealloc(names, cap * sizeof *names);
		}
		names[n++] = sbx_xstrdup(e->d_name);
	}
	closedir(d);
	/* Worker k removes entries k, k + TRASH_WORKERS, ...; what a
	 * worker could not be forked for, we remove ourselves. */
	for (k = 0; n > 1 && k < TRASH_WORKERS && (size_t)k < n; k++) {
		if ((pids[nw] = fork()) == 0) {
			for (i = (size_t)k; i < n; i += TRASH_WORKERS)
				if (trash_remove(t, names[i]) < 0)
					rc = -1;
			_exit(rc < 0);
		}
		if (pids[nw] < 0)
			break;
		nw++;
	}
	for (; k < TRASH_WORKERS && (size_t)k < n; k++)
		for (i = (size_t)k; i < n; i += TRASH_WORKERS)
			if (trash_remove(t, names[i]) < 0)
				rc = -1;
	while (nw > 0) {
		if (waitpid(pids[nw - 1], &status, 0) < 0) {
			if (errno == EINTR)
				continue;
			rc = -1;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			rc = -1;
		}
		nw--;
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* Whether the trash t holds an entry. */
static int
trash_full(const char *t)
{
	DIR *d = opendir(t);
	struct dirent *e;
	int full = 0;

	while (d && !full && (e = readdir(d)))
		full = e->d_name[0] != '.';
	if (d)
		closedir(d);
	return full;
}

/* Empty the trash t whose lock fd holds; then, unlocked, look again:
 * a kill that found the lock taken left what it put there to us. */
static void
trash_sweep_locked(const char *t, int fd)
{
	do {
		trash_empty(t);
		flock(fd, LOCK_UN);
	} while (trash_full(t) && flock(fd, LOCK_EX | LOCK_NB) == 0);
}

int
sbx_local_trash(const char *dir, const char *id)
{
	char *t = sbx_xasprintf("%s/.trash", sbx_local_root()), *p;
	int fd = -1, null;

	/* Unique: a kill's pid (two kills of one sandbox: one renames). */
	p = sbx_xasprintf("%s/%s.%ld", t, id, (long)getpid());
	if ((mkdir(t, 0700) < 0 && errno != EEXIST) || rename(dir, p) < 0) {
		free(p);
		free(t);
		return -1;
	}
	free(p);
	/* Held: its holder looks again once done. */
	if ((fd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    flock(fd, LOCK_EX | LOCK_NB) < 0)
		goto out;
	/* A child the kill neither waits for nor reaps: every caller is a
	 * command that exits soon after (a remover done before it is a
	 * zombie until then), and init's once it has. A grandchild, made
	 * to be init's at once, cost a second fork and a wait for the
	 * first, 0.3 to 3 ms of a kill on a loaded host (perf trace). In
	 * a session of its own: a terminal's ^C to the kill's process
	 * group is not for it. Nothing of ours (a pipe our reader waits
	 * on) stays open in it, nor our working directory (a mount the
	 * user unmounts next). */
	if (fork() == 0) {
		setsid();
		if (chdir("/") < 0)
			_exit(1);
		if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		close_range(3, (unsigned)fd - 1, 0);
		close_range((unsigned)fd + 1, ~0U, 0);
		trash_sweep_locked(t, fd);
		_exit(0);
	}
out:
	/* Failed to fork: the next kill or sbx-gc removes it. */
	if (fd >= 0)
		close(fd);
	free(t);
	return 0;
}

int
sbx_local_sweep(void)
{
	char *t = sbx_xasprintf("%s/.trash", sbx_local_root());
	int fd, rc = 0;

	if ((fd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		/* A sweeper at work: after it (one killed lets go). */
		while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
			;
		rc = trash_empty(t);
		close(fd);
	} else if (errno != ENOENT) {
		rc = -1;
	}
	free(t);
	return rc;
}

static int
by_id(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
sbx_local_list_in(const char *root, json_t *(*info)(const char *id),
    int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err)
{
	DIR *d = opendir(root);
	struct dirent *e;
	char **ids = NULL;
	size_t n = 0, i;
	int rc = 0;

	if (!d) {
		if (errno == ENOENT)
			return 0;
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", root);
	}
	while ((e = readdir(d)))
		if (sbx_local_valid_id(e->d_name)) {
			ids = sbx_xrealloc(ids, (n + 1) * sizeof *ids);
			ids[n++] = sbx_xstrdup(e->d_name);
		}
	closedir(d);
	if (n)
		qsort(ids, n, sizeof *ids, by_id);
	for (i = 0; i < n; i++) {
		json_t *o = info(ids[i]);

		if (!rc && fn(o, arg) < 0)
			rc = -1;
		json_decref(o);
		free(ids[i]);
	}
	free(ids);
	return rc;
}

json_t *
sbx_local_meta(const char *dir)
{
	char *p = sbx_xasprintf("%s/meta.json", dir);
	json_t *m = json_load_file(p, 0, NULL);

	free(p);
	return m;
}

json_t *
sbx_local_info_head(const char *backend, const char *id, const json_t *meta,
    const char *status, long long created, long long active)
{
	json_t *o = json_object();

	json_object_set_new(o, "backend", json_string(backend));
	json_object_set_new(o, "id", json_string(id));
	json_object_set(o, "name", json_object_get(meta, "name") ?
	    json_object_get(meta, "name") : json_null());
	json_object_set_new(o, "status", json_string(status));
	/* An image of the store by its name, not its directory. */
	json_object_set(o, "image", json_is_string(json_object_get(meta,
	    "image_ref")) ? json_object_get(meta, "image_ref") :
	    json_object_get(meta, "image") ? json_object_get(meta, "image") :
	    json_null());
	json_object_set(o, "workdir", json_object_get(meta, "workdir") ?
	    json_object_get(meta, "workdir") : json_null());
	sbx_info_times(o, sbx_now(), created, active);
	json_object_set_new(o, "timeout", json_integer(sbx_json_int(meta,
	    "timeout", 0)));
	json_object_set_new(o, "labels", json_is_object(json_object_get(meta,
	    "labels")) ? json_incref(json_object_get(meta, "labels")) :
	    json_object());
	return o;
}

char *
sbx_local_read_small(const char *dir, const char *file)
{
	char *p = sbx_xasprintf("%s/%s", dir, file), buf[256];
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	free(p);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return sbx_xstrdup(buf);
}

int
sbx_local_paused(const char *dir, long long *when)
{
	char *t = sbx_local_read_small(dir, SBX_PAUSED_FILE);
	int how = 0;

	if (t) {
		how = !strncmp(t, "stop", 4) ? 't' : 's';
		if (when)
			*when = strtoll(t + (how == 't' ? 4 : 7), NULL, 10);
		free(t);
	}
	return how;
}

int
sbx_local_mark_paused(const char *dir, const char *how, struct sbx_err *err)
{
	char *p = sbx_xasprintf("%s/" SBX_PAUSED_FILE, dir);
	char *text = sbx_xasprintf("%s %lld\n", how, sbx_mono_ms());
	int rc = sbx_file_write_atomic(p, text, strlen(text), 0600, 0, err);

	free(p);
	free(text);
	return rc;
}

void
sbx_local_unmark_paused(const char *dir)
{
	char *p = sbx_xasprintf("%s/" SBX_PAUSED_FILE, dir);

	unlink(p);
	free(p);
}
