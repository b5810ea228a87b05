/* manifest.c - lists of files with their size, mtime, mode and hash */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "internal.h"

struct sbx_fentry *
sbx_manifest_add(struct sbx_manifest *m, const char *path)
{
	struct sbx_fentry *e;

	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 256;
		m->e = sbx_xrealloc(m->e, m->cap * sizeof *m->e);
	}
	e = &m->e[m->n++];
	memset(e, 0, sizeof *e);
	e->path = sbx_xstrdup(path);
	m->sorted = 0;
	return e;
}

void
sbx_manifest_reserve(struct sbx_manifest *m, size_t n)
{
	if (n <= m->cap)
		return;
	m->cap = n;
	m->e = sbx_xrealloc(m->e, m->cap * sizeof *m->e);
}

static int
by_path(const void *a, const void *b)
{
	return strcmp(((const struct sbx_fentry *)a)->path,
	    ((const struct sbx_fentry *)b)->path);
}

void
sbx_manifest_sort(struct sbx_manifest *m)
{
	size_t i, j;

	if (m->n)
		qsort(m->e, m->n, sizeof *m->e, by_path);
	/* A path listed twice (git ls-files -c and -o can) counts once. */
	for (i = j = 0; i < m->n; i++) {
		if (j && !strcmp(m->e[j - 1].path, m->e[i].path)) {
			free(m->e[i].path);
			continue;
		}
		m->e[j++] = m->e[i];
	}
	m->n = j;
	m->sorted = 1;
}

struct sbx_fentry *
sbx_manifest_find(const struct sbx_manifest *m, const char *path)
{
	struct sbx_fentry key = {.path = (char *)path};

	if (!m->n)
		return NULL;
	return bsearch(&key, m->e, m->n, sizeof *m->e, by_path);
}

int
sbx_dirs_cover(const struct sbx_manifest *dirs, const char *dir,
    uint32_t bits, int self)
{
	const struct sbx_fentry *e;
	char buf[4096];
	size_t i, n = strlen(dir);

	if (n >= sizeof buf)
		return 1;
	/* The top is above everything but itself. */
	if ((n || self) && (e = sbx_manifest_find(dirs, "")) && e->mode & bits)
		return 1;
	memcpy(buf, dir, n + 1);
	for (i = 1; i <= n; i++) {
		if (i < n ? buf[i] != '/' : !self)
			continue;
		buf[i] = '\0';
		e = sbx_manifest_find(dirs, buf);
		if (i < n)
			buf[i] = '/';
		if (e && e->mode & bits)
			return 1;
	}
	return 0;
}

void
sbx_manifest_release(struct sbx_manifest *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		free(m->e[i].path);
	free(m->e);
	memset(m, 0, sizeof *m);
}

int
sbx_fentry_stat(struct sbx_fentry *e, const struct stat *st)
{
	if (S_ISREG(st->st_mode))
		e->type = 'f';
	else if (S_ISLNK(st->st_mode))
		e->type = 'l';
	else
		return 0;
	e->mode = e->type == 'l' ? 0777 : st->st_mode & 07777;
	e->size = (uint64_t)st->st_size;
	e->mtime = sbx_ns(st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	return 1;
}

/* Nanoseconds fit in 64 bits from 1678 to 2262; beyond, they saturate
 * (such a time still compares, and a sandbox cannot make us overflow). */
int64_t
sbx_ns(int64_t sec, long nsec)
{
	if (sec >= INT64_MAX / 1000000000 - 1)
		return INT64_MAX;
	if (sec <= INT64_MIN / 1000000000 + 1)
		return INT64_MIN;
	return sec * 1000000000 + nsec;
}

/* The other way, with tv_nsec in 0..999999999 before 1970 too. */
struct timespec
sbx_ts(int64_t ns)
{
	struct timespec ts;
	int64_t r = ns % 1000000000;

	ts.tv_sec = ns / 1000000000 - (r < 0);
	ts.tv_nsec = r < 0 ? r + 1000000000 : r;
	return ts;
}

/* nettle, not libcrypto: libarchive brings it in anyway, and a static
 * libcrypto drags dlopen and getaddrinfo into sbx-sync (ld warns). */
int
sbx_sha256_fd(int fd, unsigned char out[32])
{
	struct sha256_ctx c;
	char buf[65536];
	ssize_t n;

	sha256_init(&c);
	while ((n = read(fd, buf, sizeof buf)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		sha256_update(&c, (size_t)n, (const uint8_t *)buf);
	}
	sha256_digest(&c, SHA256_DIGEST_SIZE, out);
	return 0;
}

struct walk {
	const struct sbx_scan_opts *o;
	void (*emit)(const struct sbx_fentry *e, void *arg);
	void *earg;
	unsigned part, parts, nth; /* this walker's share of the top */
	int flat;                  /* not into subdirectories */
	size_t top;                /* the length of the prefix */
	char path[4096];
};

static void
walk_dir(struct walk *w, int dfd, size_t len)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	struct stat st;
	size_t n;

	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n = strlen(de->d_name);
		if (len + n + 2 > sizeof w->path)
			continue;
		memcpy(w->path + len, de->d_name, n + 1);
		/* Walkers share the top level: directories dealt out in
		 * turn, plain entries all to the first. */
		if (w->flat && de->d_type == DT_DIR)
			continue;
		if (len == w->top && w->parts > 1 && (de->d_type == DT_DIR ?
		    w->nth++ % w->parts != w->part : w->part != 0))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (w->o->skip && w->o->skip(w->path, S_ISDIR(st.st_mode),
		    w->o->arg))
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = w->flat ? -1 : openat(dirfd(d), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0) {
				w->path[len + n] = '/';
				w->path[len + n + 1] = '\0';
				walk_dir(w, sub, len + n + 1);
			}
			continue;
		}
		struct sbx_fentry e = {.path = w->path};

		if (!sbx_fentry_stat(&e, &st))
			continue;
		w->emit(&e, w->earg);
	}
	closedir(d);
}

void
sbx_walk(int dfd, const struct sbx_scan_opts *o, unsigned part, unsigned parts,
    void (*emit)(const struct sbx_fentry *e, void *arg), void *arg)
{
	struct walk w = {.o = o, .emit = emit, .earg = arg, .part = part,
	    .parts = parts};

	walk_dir(&w, dfd, 0);
}

void
sbx_walk_at(int dfd, const char *prefix, int flat,
    const struct sbx_scan_opts *o,
    void (*emit)(const struct sbx_fentry *e, void *arg), void *arg)
{
	struct walk w = {.o = o, .emit = emit, .earg = arg, .parts = 1,
	    .flat = flat};
	size_t n = strlen(prefix);

	if (n + 2 > sizeof w.path) {
		close(dfd);
		return;
	}
	memcpy(w.path, prefix, n);
	if (n)
		w.path[n++] = '/';
	w.path[n] = '\0';
	w.top = n;
	walk_dir(&w, dfd, n);
}

int
sbx_scan_skipped(const struct sbx_scan_opts *o, const char *path)
{
	char buf[4096];
	size_t i, n = strlen(path);

	if (!o->skip)
		return 0;
	if (n >= sizeof buf)
		return 1;
	memcpy(buf, path, n + 1);
	for (i = 0; i < n; i++)
		if (buf[i] == '/') {
			buf[i] = '\0';
			if (o->skip(buf, 1, o->arg))
				return 1;
			buf[i] = '/';
		}
	return o->skip(path, 0, o->arg);
}
