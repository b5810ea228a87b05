/* ctxhash.c - a Docker build context and its name: remote-box's context
 * hash (its backends/_common.py, _context_hash), .dockerignore included */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "internal.h"

/* Skipped by name at any depth, with or without a .dockerignore:
 * remote-box's list, and .sbx, the tools' own state directory (each run
 * writes it: in the hash, each run would build anew). */
static const char *const always_out[] = {
	".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache",
	".ruff_cache", ".tox", ".venv", "venv", "node_modules", ".sbx", NULL,
};

#define DOCKERIGNORE_MAX (1 << 20)

struct rule {
	char **seg;
	size_t n;
	int neg;
};

struct dignore {
	struct rule *r;
	size_t n;
	int has_neg;
};

struct walk {
	struct dignore *ig;
	char **files;
	size_t n, cap;
};

/* posixpath.normpath of a path without a leading '/': "" and "." parts
 * dropped, ".." taking the part before it (kept when there is none). */
static char *
normpath(const char *p)
{
	char *s = sbx_xstrdup(p), *out = sbx_xcalloc(1, strlen(p) + 2);
	char *tok, *save = NULL;
	size_t len = 0;

	for (tok = strtok_r(s, "/", &save); tok; tok = strtok_r(NULL, "/",
	    &save)) {
		if (!strcmp(tok, "."))
			continue;
		if (!strcmp(tok, "..") && len > 0) {
			char *last = strrchr(out, '/');
			const char *lp = last ? last + 1 : out;

			if (strcmp(lp, "..")) {
				len = last ? (size_t)(last - out) : 0;
				out[len] = '\0';
				continue;
			}
		}
		if (len)
			out[len++] = '/';
		memcpy(out + len, tok, strlen(tok) + 1);
		len += strlen(tok);
	}
	free(s);
	return out;
}

/* Python's str.strip(), for the ASCII whitespace. */
static char *
strip(char *s)
{
	char *e;

	while (*s && strchr(" \t\n\r\v\f", *s))
		s++;
	for (e = s + strlen(s); e > s && strchr(" \t\n\r\v\f", e[-1]); e--)
		;
	*e = '\0';
	return s;
}

static void
add_rule(struct dignore *ig, char *line)
{
	struct rule r = {0};
	char *p = strip(line), *norm, *tok, *save = NULL;
	size_t n;

	if (!*p || *p == '#')
		return;
	if (*p == '!') {
		r.neg = 1;
		p = strip(p + 1);
	}
	while (*p == '/')
		p++;
	for (n = strlen(p); n > 0 && p[n - 1] == '/'; n--)
		p[n - 1] = '\0';
	norm = normpath(p);
	if (!*norm || !strcmp(norm, ".")) {
		free(norm);
		return;
	}
	for (tok = strtok_r(norm, "/", &save); tok; tok = strtok_r(NULL, "/",
	    &save)) {
		r.seg = sbx_xrealloc(r.seg, (r.n + 1) * sizeof *r.seg);
		r.seg[r.n++] = sbx_xstrdup(tok);
	}
	free(norm);
	ig->r = sbx_xrealloc(ig->r, (ig->n + 1) * sizeof *ig->r);
	ig->r[ig->n++] = r;
	ig->has_neg |= r.neg;
}

/* root/.dockerignore, as lines (Python's splitlines breaks at these). */
static int
load_ignore(int rootfd, struct dignore *ig, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char chunk[8192], *p, *q;
	ssize_t r;
	int fd = openat(rootfd, ".dockerignore", O_RDONLY | O_CLOEXEC), rc = -1;

	if (fd < 0)
		return errno == ENOENT ? 0 : sbx_err_set(err, SBX_EX_FAIL,
		    "cannot open '.dockerignore':");
	while ((r = read(fd, chunk, sizeof chunk)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			sbx_err_set(err, SBX_EX_FAIL, "cannot read "
			    "'.dockerignore':");
			goto out;
		}
		sbx_buf_add(&b, chunk, (size_t)r);
		if (b.len > DOCKERIGNORE_MAX) {
			sbx_err_set(err, SBX_EX_USAGE, "'.dockerignore' is "
			    "larger than 1 MiB");
			goto out;
		}
	}
	sbx_buf_add(&b, "", 1);
	if (memchr(b.data, '\0', b.len - 1)) {
		sbx_err_set(err, SBX_EX_USAGE, "'.dockerignore' holds a NUL "
		    "byte");
		goto out;
	}
	for (p = b.data; p; p = q) {
		q = strpbrk(p, "\n\r\v\f\x1c\x1d\x1e");
		if (q)
			*q++ = '\0';
		add_rule(ig, p);
	}
	rc = 0;
out:
	sbx_buf_release(&b);
	close(fd);
	return rc;
}

/* Whether rule r matches path (segments seg[0..n)) or one of its
 * ancestors: the positions in the path that the rule's first segments
 * can reach, one segment at a time ("**": zero or more), so that a
 * pattern of many "**" stays linear in each. */
static int
rule_match(const struct rule *r, char **seg, size_t n, unsigned char *at,
    unsigned char *next)
{
	size_t i, j, lo;

	memset(at, 0, n + 1);
	at[0] = 1;
	for (i = 0; i < r->n; i++) {
		memset(next, 0, n + 1);
		if (!strcmp(r->seg[i], "**")) {
			for (lo = 0; lo <= n && !at[lo]; lo++)
				;
			for (j = lo; j <= n; j++)
				next[j] = 1;
		} else {
			for (j = 0; j < n; j++)
				if (at[j] && fnmatch(r->seg[i], seg[j],
				    FNM_NOESCAPE) == 0)
					next[j + 1] = 1;
		}
		memcpy(at, next, n + 1);
	}
	for (j = 1; j <= n; j++)
		if (at[j])
			return 1;
	return 0;
}

/* The last rule that matches decides. */
static int
ignored(const struct dignore *ig, const char *rel)
{
	char *s, **seg = NULL, *tok, *save = NULL;
	unsigned char *at, *next;
	size_t n = 0, i;
	int out = 0;

	if (!ig->n)
		return 0;
	s = sbx_xstrdup(rel);
	for (tok = strtok_r(s, "/", &save); tok; tok = strtok_r(NULL, "/",
	    &save)) {
		seg = sbx_xrealloc(seg, (n + 1) * sizeof *seg);
		seg[n++] = tok;
	}
	at = sbx_xmalloc(n + 1);
	next = sbx_xmalloc(n + 1);
	for (i = 0; i < ig->n; i++)
		if (rule_match(&ig->r[i], seg, n, at, next))
			out = !ig->r[i].neg;
	free(at);
	free(next);
	free(seg);
	free(s);
	return out;
}

static int
is_always_out(const char *name)
{
	const char *const *p;

	for (p = always_out; *p; p++)
		if (!strcmp(name, *p))
			return 1;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* os.walk's view: a symlink to a directory is listed but not entered; a
 * file is what stat(2) through a symlink says is a regular file. */
static int
walk_dir(struct walk *w, int dfd, const char *prefix, struct sbx_err *err)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	struct stat st;
	char *rel;
	int fd, rc = 0;

	if (!d) {
		close(dfd);
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':",
		    *prefix ? prefix : ".");
	}
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rel = *prefix ? sbx_xasprintf("%s/%s", prefix, de->d_name) :
		    sbx_xstrdup(de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot stat '%s':",
			    rel);
		} else if (S_ISDIR(st.st_mode)) {
			if (is_always_out(de->d_name) || (!w->ig->has_neg &&
			    ignored(w->ig, rel)))
				;
			else if ((fd = openat(dirfd(d), de->d_name, O_RDONLY |
			    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
				rc = sbx_err_set(err, SBX_EX_FAIL, "cannot "
				    "open '%s':", rel);
			else
				rc = walk_dir(w, fd, rel, err);
		} else if (strcmp(de->d_name, ".DS_Store") &&
		    fstatat(dirfd(d), de->d_name, &st, 0) == 0 &&
		    S_ISREG(st.st_mode) && !ignored(w->ig, rel)) {
			if (w->n == w->cap) {
				w->cap = w->cap ? 2 * w->cap : 256;
				w->files = sbx_xrealloc(w->files, w->cap *
				    sizeof *w->files);
			}
			w->files[w->n++] = rel;
			rel = NULL;
		}
		free(rel);
	}
	if (rc == 0 && errno)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':",
		    *prefix ? prefix : ".");
	closedir(d);
	return rc;
}

static int
hash_file(int rootfd, const char *rel, unsigned char out[32],
    struct sbx_err *err)
{
	int fd = openat(rootfd, rel, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot open '%s':", rel);
	rc = sbx_sha256_fd(fd, out);
	close(fd);
	if (rc < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", rel);
	return 0;
}

/* Where the Dockerfile is in the context: its path below root, or NULL
 * when it is elsewhere. */
static char *
inside(const char *root, const char *path)
{
	char *r = realpath(root, NULL), *p = realpath(path, NULL), *rel = NULL;
	size_t n;

	if (r && p) {
		n = strlen(r);
		if (!strcmp(r, "/"))
			n = 0;
		if (!strncmp(p, r, n) && p[n] == '/' && p[n + 1])
			rel = sbx_xstrdup(p + n + 1);
	}
	free(r);
	free(p);
	return rel;
}

int
sbx_ctx_load(struct sbx_ctx *c, const char *root, const char *dockerfile,
    struct sbx_err *err)
{
	struct dignore ig = {0};
	struct walk w = {.ig = &ig};
	struct sha256_ctx sha;
	unsigned char sum[SHA256_DIGEST_SIZE], fh[SHA256_DIGEST_SIZE];
	struct stat st;
	char *dfpath = NULL;
	size_t i, j;
	int rootfd, dffd = -1, rc = -1;

	memset(c, 0, sizeof *c);
	if ((rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return sbx_err_set(err, errno == ENOENT || errno == ENOTDIR ?
		    SBX_EX_USAGE : SBX_EX_FAIL, "cannot open context '%s':",
		    root);
	dfpath = dockerfile ? sbx_xstrdup(dockerfile) :
	    sbx_xasprintf("%s/Dockerfile", root);
	if ((dffd = open(dfpath, O_RDONLY | O_CLOEXEC)) < 0 ||
	    fstat(dffd, &st) < 0 || !S_ISREG(st.st_mode)) {
		sbx_err_set(err, SBX_EX_USAGE, "Dockerfile not found at path: "
		    "'%s'", dfpath);
		goto out;
	}
	if (load_ignore(rootfd, &ig, err) < 0)
		goto out;
	if (walk_dir(&w, dup(rootfd), "", err) < 0)
		goto out;
	/* An empty context (the Dockerfile elsewhere) has no list. */
	if (w.n)
		qsort(w.files, w.n, sizeof *w.files, cmp_str);
	sha256_init(&sha);
	for (i = 0; i < w.n; i++) {
		if (hash_file(rootfd, w.files[i], fh, err) < 0)
			goto out;
		sha256_update(&sha, strlen(w.files[i]) + 1,
		    (const uint8_t *)w.files[i]);
		sha256_update(&sha, sizeof fh, fh);
	}
	/* The Dockerfile's bytes last, wherever it is and whatever
	 * .dockerignore says of it. */
	{
		char buf[65536];
		ssize_t r;

		while ((r = read(dffd, buf, sizeof buf)) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				sbx_err_set(err, SBX_EX_FAIL, "cannot read "
				    "'%s':", dfpath);
				goto out;
			}
			sha256_update(&sha, (size_t)r, (const uint8_t *)buf);
		}
	}
	sha256_digest(&sha, sizeof sum, sum);
	for (i = 0; i < 4; i++)
		snprintf(c->hash + 2 * i, 3, "%02x", sum[i]);
	c->root = sbx_xstrdup(root);
	c->dockerfile = dfpath;
	dfpath = NULL;
	c->dockerfile_rel = inside(root, c->dockerfile);
	c->files = w.files;
	c->n = w.n;
	w.files = NULL;
	w.n = 0;
	rc = 0;
out:
	for (i = 0; i < w.n; i++)
		free(w.files[i]);
	free(w.files);
	for (i = 0; i < ig.n; i++) {
		for (j = 0; j < ig.r[i].n; j++)
			free(ig.r[i].seg[j]);
		free(ig.r[i].seg);
	}
	free(ig.r);
	free(dfpath);
	if (dffd >= 0)
		close(dffd);
	close(rootfd);
	return rc;
}

void
sbx_ctx_release(struct sbx_ctx *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		free(c->files[i]);
	free(c->files);
	free(c->root);
	free(c->dockerfile);
	free(c->dockerfile_rel);
	memset(c, 0, sizeof *c);
}
