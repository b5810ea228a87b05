/* ignore.c - gitignore patterns, for .sbxignore, --include and --exclude */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

/* A run of nseg path segments matched by one glob, or a "**" (nseg 0). */
struct item {
	const char *glob;
	size_t nseg;
};

struct pat {
	char *text;         /* the globs, cut at each "**" */
	struct item *it;
	size_t n;
	int neg, dironly;
	int anchored;       /* matched from the root, else on the basename */
};

struct sbx_ignore {
	struct pat *p;
	size_t n, cap;
	uint64_t digest; /* of every line added, in order */
};

/* FNM_LEADING_DIR lets a glob of k segments match the first k segments
 * of a longer path, so nothing is copied or cut to match. */
#define FNM_FLAGS (FNM_PATHNAME | FNM_LEADING_DIR)

struct sbx_ignore *
sbx_ignore_new(void)
{
	struct sbx_ignore *ig = sbx_xcalloc(1, sizeof(struct sbx_ignore));

	ig->digest = sbx_fnv1a(0, NULL, 0);
	return ig;
}

uint64_t
sbx_ignore_digest(const struct sbx_ignore *ig)
{
	return ig ? ig->digest : 0;
}

void
sbx_ignore_free(struct sbx_ignore *ig)
{
	size_t i;

	if (!ig)
		return;
	for (i = 0; i < ig->n; i++) {
		free(ig->p[i].text);
		free(ig->p[i].it);
	}
	free(ig->p);
	free(ig);
}

size_t
sbx_ignore_count(const struct sbx_ignore *ig)
{
	return ig ? ig->n : 0;
}

/* Split a pattern into globs and "**"s, once, so that a match only walks
 * the items. */
static void
split(struct pat *p)
{
	char *seg = p->text, *end;
	size_t nslash = 0;

	for (end = p->text; *end; end++)
		nslash += *end == '/';
	p->it = sbx_xcalloc(nslash + 1, sizeof *p->it);
	for (;; seg = end + 1) {
		end = strchrnul(seg, '/');
		if (end - seg == 2 && seg[0] == '*' && seg[1] == '*') {
			if (seg > p->text)
				seg[-1] = '\0';
			/* Consecutive "**" segments are one. */
			if (!p->n || p->it[p->n - 1].nseg)
				p->it[p->n++].nseg = 0;
		} else if (p->n && p->it[p->n - 1].nseg) {
			p->it[p->n - 1].nseg++;
		} else {
			p->it[p->n].glob = seg;
			p->it[p->n++].nseg = 1;
		}
		if (!*end)
			break;
	}
}

void
sbx_ignore_add(struct sbx_ignore *ig, const char *line)
{
	size_t len = strlen(line), i, keep;
	struct pat p = {0};
	const char *s = line;

	ig->digest = sbx_fnv1a(sbx_fnv1a(ig->digest, line, len), "\n", 1);
	if (len && line[len - 1] == '\r')
		len--;
	/* Trailing spaces go, unless the last one is escaped: "a\ " keeps
	 * one. The backslash stays, for fnmatch to read. */
	for (i = keep = 0; i < len; i++) {
		if (line[i] == '\\' && i + 1 < len)
			keep = ++i + 1;
		else if (line[i] != ' ')
			keep = i + 1;
	}
	len = keep;
	if (!len || line[0] == '#')
		return;
	if (*s == '!') {
		p.neg = 1;
		s++, len--;
	}
	if (len && s[len - 1] == '/') {
		p.dironly = 1;
		len--;
	}
	p.anchored = memchr(s, '/', len) != NULL;
	if (len && *s == '/')
		s++, len--;
	if (!len)
		return;
	p.text = sbx_xmalloc(len + 1);
	memcpy(p.text, s, len);
	p.text[len] = '\0';
	split(&p);
	if (ig->n == ig->cap) {
		ig->cap = ig->cap ? ig->cap * 2 : 16;
		ig->p = sbx_xrealloc(ig->p, ig->cap * sizeof *ig->p);
	}
	ig->p[ig->n++] = p;
}

int
sbx_ignore_load(struct sbx_ignore *ig, const char *path, struct sbx_err *err)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;
	int rc = 0;

	if (!(f = fopen(path, "re")) && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	if (!f)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", path);
	while ((n = getline(&line, &cap, f)) >= 0) {
		if (n && line[n - 1] == '\n')
			line[n - 1] = '\0';
		sbx_ignore_add(ig, line);
	}
	/* A directory opens, and fails at the first read (EISDIR). */
	if (ferror(f))
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", path);
	free(line);
	fclose(f);
	return rc;
}

/* The end of the k-th segment from s ('/' or end), NULL if there are
 * fewer than k before end. */
static const char *
seg_end(const char *s, size_t k, const char *end)
{
	if (s >= end)
		return NULL;
	for (;;) {
		while (s < end && *s != '/')
			s++;
		if (--k == 0)
			return s;
		if (s == end)
			return NULL;
		s++;
	}
}

/* Whether items it..last match the segments from s to end exactly. */
static int
match_items(const struct item *it, const struct item *last, const char *s,
    const char *end)
{
	const char *e;

	if (it == last)
		return s == end;
	if (!it->nseg) {
		/* A trailing "**" matches what is inside, not the directory. */
		if (it + 1 == last)
			return s != end;
		for (;;) {
			if (match_items(it + 1, last, s, end))
				return 1;
			if (!(e = seg_end(s, 1, end)) || e == end)
				return 0;
			s = e + 1;
		}
	}
	if (!(e = seg_end(s, it->nseg, end)) || fnmatch(it->glob, s, FNM_FLAGS))
		return 0;
	return match_items(it + 1, last, e == end ? e : e + 1, end);
}

/* The verdict on the path that ends at end (a parent of a longer one). */
static int
verdict(const struct sbx_ignore *ig, const char *path, const char *end,
    int is_dir)
{
	const char *base = end;
	const struct pat *p;
	size_t i;

	while (base > path && base[-1] != '/')
		base--;
	/* The last match wins: look from the end and stop at the first. */
	for (i = ig->n; i-- > 0;) {
		p = &ig->p[i];
		if (p->dironly && !is_dir)
			continue;
		if (match_items(p->it, p->it + p->n, p->anchored ? path : base,
		    end))
			return p->neg ? 0 : 1;
	}
	return -1;
}

int
sbx_ignore_match1(const struct sbx_ignore *ig, const char *path, int is_dir)
{
	return verdict(ig, path, path + strlen(path), is_dir);
}

int
sbx_ignore_match(const struct sbx_ignore *ig, const char *path, int is_dir)
{
	const char *slash;

	if (!ig || !ig->n)
		return 0;
	/* An ignored directory hides all below it, whatever comes later. */
	for (slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/'))
		if (verdict(ig, path, slash, 1) == 1)
			return 1;
	return verdict(ig, path, path + strlen(path), is_dir) == 1;
}
