/* ignore.c - gitignore patterns, for .sbxignore, --include and --exclude */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

/* A pattern is compiled to a list of tokens, run as an NFA over the path:
 * the set of live tokens advances one character at a time, so a match
 * costs at most (path length) x (pattern length) steps, whatever the
 * pattern. (A backtracking matcher, as fnmatch(3) is, takes exponential
 * time on "**" and "*" runs.) The semantics are git's wildmatch with
 * WM_PATHNAME. */
enum {
	T_CHAR,  /* the byte c */
	T_ANY,   /* "?": a byte but '/' */
	T_CLASS, /* "[...]": a byte of the class (never '/') */
	T_STAR,  /* "*": any run of bytes but '/' */
	T_DSTAR, /* "**" between slashes: any run of bytes */
	T_SKIP,  /* "**" then "/": also match nothing, skipping 3 tokens */
};

struct tok {
	unsigned char op, c;
	unsigned cls; /* for T_CLASS, an index into pat.cls */
	size_t reg;   /* its region: 1 + the last '/', "**" or skip before */
};

struct pat {
	struct tok *t;
	size_t n;
	unsigned char (*cls)[32]; /* bitmaps */
	size_t ncls;
	int neg, dironly;
	int anchored; /* matched from the root, else on the basename */
	int never;    /* malformed: git never matches it */
};

/* The largest pattern file read: a real one is a few KiB, and a match
 * costs up to (path length) x (total pattern length). */
#define IGNORE_MAX (64 * 1024)

struct sbx_ignore {
	struct pat *p;
	size_t n, cap;
	uint64_t digest; /* of every line added, in order */
};

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
		free(ig->p[i].t);
		free(ig->p[i].cls);
	}
	free(ig->p);
	free(ig);
}

size_t
sbx_ignore_count(const struct sbx_ignore *ig)
{
	return ig ? ig->n : 0;
}

/* git's character classes: ASCII only, and its isspace has no \v, \f. */
static int
in_cclass(const char *name, size_t len, int c)
{
	static const struct {
		const char *name;
		int (*is)(int);
	} cc[] = {{"alnum", isalnum}, {"alpha", isalpha}, {"blank", isblank},
	    {"cntrl", iscntrl}, {"digit", isdigit}, {"graph", isgraph},
	    {"lower", islower}, {"print", isprint}, {"punct", ispunct},
	    {"space", isspace}, {"upper", isupper}, {"xdigit", isxdigit}};
	size_t i;

	for (i = 0; i < sizeof cc / sizeof cc[0]; i++)
		if (strlen(cc[i].name) == len && !memcmp(cc[i].name, name, len))
			break;
	if (i == sizeof cc / sizeof cc[0])
		return -1;
	if (c >= 0x80 || (!strcmp(cc[i].name, "space") && (c == '\v' ||
	    c == '\f')))
		return 0;
	return cc[i].is(c) != 0;
}

static void
bit_set(unsigned char *bm, int c)
{
	bm[c >> 3] |= 1u << (c & 7);
}

/* The class at s[i] == '[', as git's wildmatch reads it, into bm; the
 * index after its ']', or 0 when it is malformed (no ']', an unknown
 * [:name:]), which git takes as a pattern that never matches. */
static size_t
parse_class(const char *s, size_t len, size_t i, unsigned char *bm)
{
	int neg = 0, prev = 0, ch, c, k;
	size_t j, name;

	memset(bm, 0, 32);
	if (++i < len && (s[i] == '!' || s[i] == '^'))
		neg = 1, i++;
	do {
		if (i >= len)
			return 0;
		ch = (unsigned char)s[i];
		if (ch == '\\') {
			if (++i >= len)
				return 0;
			ch = (unsigned char)s[i];
			bit_set(bm, ch);
		} else if (ch == '-' && prev && i + 1 < len &&
		    s[i + 1] != ']') {
			ch = (unsigned char)s[++i];
			if (ch == '\\' && ++i >= len)
				return 0;
			ch = (unsigned char)s[i];
			for (c = prev; c <= ch; c++)
				bit_set(bm, c);
			ch = 0;
		} else if (ch == '[' && i + 1 < len && s[i + 1] == ':') {
			for (j = name = i + 2; j < len && s[j] != ']'; j++)
				;
			if (j >= len)
				return 0;
			if (j - name < 1 || s[j - 1] != ':') {
				/* No ":]": the '[' is a plain member. */
				bit_set(bm, '[');
				continue;
			}
			for (c = 1; c < 256; c++) {
				k = in_cclass(s + name, j - name - 1, c);
				if (k < 0)
					return 0;
				if (k)
					bit_set(bm, c);
			}
			i = j;
			ch = 0;
		} else {
			bit_set(bm, ch);
		}
	} while (prev = ch, ++i < len ? s[i] != ']' : 1);
	if (neg)
		for (j = 0; j < 32; j++)
			bm[j] = ~bm[j];
	bm['/' >> 3] &= ~(1u << ('/' & 7));
	bm[0] &= ~1u;
	return i + 1;
}

/* What a "*" cannot read past: a '/', a "**", a skip over one. */
static int
barrier(const struct tok *t)
{
	return (t->op == T_CHAR && t->c == '/') || t->op == T_DSTAR ||
	    t->op == T_SKIP;
}

static void
emit(struct pat *p, size_t *cap, int op, int c)
{
	if (p->n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		p->t = sbx_xrealloc(p->t, *cap * sizeof *p->t);
	}
	p->t[p->n].op = op;
	p->t[p->n].c = c;
	p->t[p->n++].cls = p->ncls ? p->ncls - 1 : 0;
}

/* Whether the last tokens are "**" then "/". */
static int
ends_dstar_slash(const struct pat *p)
{
	return p->n >= 3 && p->t[p->n - 3].op == T_SKIP &&
	    p->t[p->n - 2].op == T_DSTAR && p->t[p->n - 1].op == T_CHAR &&
	    p->t[p->n - 1].c == '/';
}

/* Compile s[0..len) to tokens, as git's wildmatch reads it. */
static void
compile(struct pat *p, const char *s, size_t len)
{
	size_t i = 0, j, cap = 0, ccap = 0, next, first;

	/* git compares the literal prefix of a pattern with a slash apart,
	 * and hands wildmatch the rest: a "**" that starts it is at the
	 * start of a pattern there ("a/x**" + "/b" spans directories). */
	for (first = 0; p->anchored && first < len; first++)
		if (strchr("*?[\\", s[first]))
			break;
	while (i < len) {
		switch (s[i]) {
		case '*':
			for (j = i; j < len && s[j] == '*'; j++)
				;
			/* Two or more stars are "**" only between slashes
			 * (as git reads "**\/" too); else they are one. */
			if (j - i < 2 || (i && i != first && s[i - 1] != '/') ||
			    (j < len &&
			    s[j] != '/' && !(s[j] == '\\' && j + 1 < len &&
			    s[j + 1] == '/'))) {
				emit(p, &cap, T_STAR, 0);
				i = j;
			} else if (j < len && s[j] == '/') {
				/* "**" then "**": one does it. */
				if (!ends_dstar_slash(p)) {
					emit(p, &cap, T_SKIP, 0);
					emit(p, &cap, T_DSTAR, 0);
					emit(p, &cap, T_CHAR, '/');
				}
				i = j + 1;
			} else {
				emit(p, &cap, T_DSTAR, 0);
				i = j;
			}
			break;
		case '?':
			emit(p, &cap, T_ANY, 0);
			i++;
			break;
		case '[':
			if (p->ncls == ccap) {
				ccap = ccap ? ccap * 2 : 4;
				p->cls = sbx_xrealloc(p->cls, ccap *
				    sizeof *p->cls);
			}
			if (!(next = parse_class(s, len, i, p->cls[p->ncls]))) {
				p->never = 1;
				return;
			}
			p->ncls++;
			emit(p, &cap, T_CLASS, 0);
			i = next;
			break;
		case '\\':
			/* A trailing backslash never matches, as in git. */
			if (i + 1 == len) {
				p->never = 1;
				return;
			}
			emit(p, &cap, T_CHAR, (unsigned char)s[i + 1]);
			i += 2;
			break;
		default:
			emit(p, &cap, T_CHAR, (unsigned char)s[i]);
			i++;
			break;
		}
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
	 * one. The backslash stays, for the matcher to read. */
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
	compile(&p, s, len);
	for (i = 0, keep = 0; i < p.n; i++) {
		p.t[i].reg = keep;
		if (barrier(&p.t[i]))
			keep = i + 1;
	}
	if (ig->n == ig->cap) {
		ig->cap = ig->cap ? ig->cap * 2 : 16;
		ig->p = sbx_xrealloc(ig->p, ig->cap * sizeof *ig->p);
	}
	ig->p[ig->n++] = p;
}

int
sbx_ignore_load(struct sbx_ignore *ig, const char *path, struct sbx_err *err)
{
	char *text = NULL, *line, *nl;
	size_t len = 0;
	ssize_t n;
	FILE *f;
	int rc = -1;

	if (!(f = fopen(path, "re")) && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	if (!f)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", path);
	/* Read it all before adding any: a file past the cap adds nothing. */
	text = sbx_xmalloc(IGNORE_MAX + 2);
	while (len <= IGNORE_MAX && (n = fread(text + len, 1,
	    IGNORE_MAX + 1 - len, f)) > 0)
		len += n;
	/* A directory opens, and fails at the first read (EISDIR). */
	if (ferror(f)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':", path);
		goto out;
	}
	if (len > IGNORE_MAX) {
		sbx_err_set(err, SBX_EX_USAGE, "'%s' is larger than %d KiB",
		    path, IGNORE_MAX / 1024);
		goto out;
	}
	text[len] = '\0';
	for (line = text; line < text + len; line = nl + 1) {
		if ((nl = memchr(line, '\n', text + len - line)))
			*nl = '\0';
		else
			nl = text + len;
		sbx_ignore_add(ig, line);
	}
	rc = 0;
out:
	free(text);
	fclose(f);
	return rc;
}

/* The live tokens of a run, in a list and flagged in on[]: token i live
 * means it is next to match; token n (one past the last) means the
 * pattern has matched all it read. A step costs what is live, not the
 * whole pattern. */
struct nfa {
	unsigned char *on, *nx;    /* flags of cur, and of next */
	size_t *cur, *next, ncur;
	size_t *top;               /* by region: its highest live "*", + 1 */
};

static void
add(unsigned char *on, size_t *list, size_t *n, size_t i)
{
	if (on[i])
		return;
	on[i] = 1;
	list[(*n)++] = i;
}

/* Follow the tokens that match nothing; then drop the live tokens a live
 * "*" stands for: from a token x below a "*" at j in its region (no '/',
 * "**" or skip between), every path to a match reads j's "*" after
 * bytes that are not '/', which that "*" reads as well. Without this a
 * run of "*a*a*a..." keeps every one of its stars live. */
static void
settle(const struct pat *p, struct nfa *a)
{
	const struct tok *t;
	size_t k, j, i;

	for (k = 0; k < a->ncur; k++) {
		if ((i = a->cur[k]) == p->n)
			continue;
		t = &p->t[i];
		if (t->op == T_STAR || t->op == T_DSTAR || t->op == T_SKIP)
			add(a->on, a->cur, &a->ncur, i + 1);
		if (t->op == T_SKIP)
			add(a->on, a->cur, &a->ncur, i + 3);
	}
	for (k = 0; k < a->ncur; k++) {
		i = a->cur[k];
		if (i < p->n && p->t[i].op == T_STAR &&
		    a->top[p->t[i].reg] < i + 1)
			a->top[p->t[i].reg] = i + 1;
	}
	for (k = j = 0; k < a->ncur; k++) {
		i = a->cur[k];
		if (i < p->n && !barrier(&p->t[i]) &&
		    a->top[p->t[i].reg] > i + 1)
			a->on[i] = 0;
		else
			a->cur[j++] = i;
	}
	a->ncur = j;
	for (k = 0; k < a->ncur; k++)
		if (a->cur[k] < p->n)
			a->top[p->t[a->cur[k]].reg] = 0;
}

static void
restart(const struct pat *p, struct nfa *a)
{
	size_t k;

	for (k = 0; k < a->ncur; k++)
		a->on[a->cur[k]] = 0;
	a->ncur = 0;
	add(a->on, a->cur, &a->ncur, 0);
	settle(p, a);
}

static void
step(const struct pat *p, struct nfa *a, unsigned char c)
{
	size_t k, i, nnext = 0, *tl;
	const struct tok *t;
	unsigned char *tf;
	int ok;

	for (k = 0; k < a->ncur; k++) {
		i = a->cur[k];
		a->on[i] = 0;
		if (i == p->n)
			continue;
		t = &p->t[i];
		switch (t->op) {
		case T_CHAR:
			ok = c == t->c;
			break;
		case T_ANY:
			ok = c != '/';
			break;
		case T_CLASS:
			ok = p->cls[t->cls][c >> 3] >> (c & 7) & 1;
			break;
		case T_STAR:
			if (c != '/')
				add(a->nx, a->next, &nnext, i);
			continue;
		case T_DSTAR:
			add(a->nx, a->next, &nnext, i);
			continue;
		default:
			continue;
		}
		if (ok)
			add(a->nx, a->next, &nnext, i + 1);
	}
	tf = a->on;
	a->on = a->nx;
	a->nx = tf;
	tl = a->cur;
	a->cur = a->next;
	a->next = tl;
	a->ncur = nnext;
	settle(p, a);
}

/* Run p over s..end: whether it matches the whole. With hit (zeroed, one
 * byte per '/' in s..end and one more), also hit[k] = 1 when p matches
 * the path up to its k-th '/'; a basename pattern restarts after each. */
static int
run(const struct pat *p, const char *s, const char *end, unsigned char *hit)
{
	enum { SMALL = 64 };
	unsigned char flags[2][SMALL];
	size_t lists[3][SMALL], m = p->n + 1;
	void *heap = NULL;
	struct nfa a;
	const char *q;
	size_t k = 0;
	int r = 0;

	if (p->never)
		return 0;
	if (m <= SMALL) {
		a.on = flags[0];
		a.nx = flags[1];
		a.cur = lists[0];
		a.next = lists[1];
		a.top = lists[2];
	} else {
		heap = sbx_xmalloc(m * (2 + 3 * sizeof(size_t)));
		a.cur = heap;
		a.next = a.cur + m;
		a.top = a.next + m;
		a.on = (unsigned char *)(a.top + m);
		a.nx = a.on + m;
	}
	memset(a.on, 0, m);
	memset(a.nx, 0, m);
	memset(a.top, 0, m * sizeof *a.top);
	a.ncur = 0;
	restart(p, &a);
	for (q = s;; q++) {
		r = a.on[p->n];
		if (hit && (q == end || *q == '/'))
			hit[k++] = r;
		if (q == end)
			break;
		if (!a.ncur && (p->anchored || !hit)) {
			r = 0;
			break;
		}
		step(p, &a, (unsigned char)*q);
		if (!p->anchored && *q == '/')
			restart(p, &a);
	}
	free(heap);
	return r;
}

int
sbx_ignore_match1(const struct sbx_ignore *ig, const char *path, int is_dir)
{
	const char *base = strrchr(path, '/'), *end = path + strlen(path);
	const struct pat *p;
	size_t i;

	base = base ? base + 1 : path;
	/* The last match wins: look from the end and stop at the first. */
	for (i = ig->n; i-- > 0;) {
		p = &ig->p[i];
		if (p->dironly && !is_dir)
			continue;
		if (run(p, p->anchored ? path : base, end, NULL))
			return p->neg ? 0 : 1;
	}
	return -1;
}

int
sbx_ignore_match(const struct sbx_ignore *ig, const char *path, int is_dir)
{
	const char *s, *end = path + strlen(path);
	unsigned char *hit;
	signed char *v;
	size_t d = 1, k, left, i;
	const struct pat *p;
	int r = 0;

	if (!ig || !ig->n)
		return 0;
	for (s = path; *s; s++)
		d += *s == '/';
	/* v[k]: the verdict on the path up to its k-th '/' (a directory),
	 * the last for the path itself; -1 until a pattern matches. One run
	 * of each pattern gives them all. */
	hit = sbx_xmalloc(d);
	v = sbx_xmalloc(d);
	memset(v, -1, d);
	for (i = ig->n, left = d; left && i-- > 0;) {
		p = &ig->p[i];
		memset(hit, 0, d);
		run(p, path, end, hit);
		for (k = 0; k < d; k++) {
			if (v[k] != -1 || !hit[k] || (p->dironly &&
			    k == d - 1 && !is_dir))
				continue;
			v[k] = !p->neg;
			left--;
		}
	}
	/* An ignored directory hides all below it, whatever comes later. */
	for (k = 0; k < d && !r; k++)
		r = v[k] == 1;
	free(hit);
	free(v);
	return r;
}
