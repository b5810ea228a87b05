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

/* The live tokens of a run: on[i] when token i is next to match; on[n]
 * when the pattern has matched all it read. lo..hi bounds the live ones,
 * so a step costs what is live, not the whole pattern. */
struct nfa {
	unsigned char *on, *nx;
	size_t lo, hi; /* hi < lo: none live */
};

static void
add(struct nfa *a, unsigned char *on, size_t i)
{
	if (on[i])
		return;
	on[i] = 1;
	if (i < a->lo)
		a->lo = i;
	if (i > a->hi || a->hi == (size_t)-1)
		a->hi = i;
}

/* Follow the tokens that match nothing; they only lead forward, so one
 * pass from lo does it. */
static void
closure(const struct pat *p, struct nfa *a)
{
	size_t i;

	for (i = a->lo; i <= a->hi && i < p->n; i++) {
		if (!a->on[i])
			continue;
		if (p->t[i].op == T_STAR || p->t[i].op == T_DSTAR ||
		    p->t[i].op == T_SKIP)
			add(a, a->on, i + 1);
		if (p->t[i].op == T_SKIP)
			add(a, a->on, i + 3);
	}
}

static void
restart(const struct pat *p, struct nfa *a)
{
	if (a->hi != (size_t)-1)
		memset(a->on + a->lo, 0, a->hi - a->lo + 1);
	a->lo = (size_t)-1;
	a->hi = (size_t)-1;
	add(a, a->on, 0);
	closure(p, a);
}

static void
step(const struct pat *p, struct nfa *a, unsigned char c)
{
	size_t i, lo = a->lo, hi = a->hi;
	const struct tok *t;
	unsigned char *tmp;
	int ok;

	a->lo = a->hi = (size_t)-1;
	for (i = lo; hi != (size_t)-1 && i <= hi && i < p->n; i++) {
		if (!a->on[i])
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
				add(a, a->nx, i);
			continue;
		case T_DSTAR:
			add(a, a->nx, i);
			continue;
		default:
			continue;
		}
		if (ok)
			add(a, a->nx, i + 1);
	}
	if (hi != (size_t)-1)
		memset(a->on + lo, 0, hi - lo + 1);
	tmp = a->on;
	a->on = a->nx;
	a->nx = tmp;
	if (a->hi != (size_t)-1)
		closure(p, a);
}

/* Run p over s..end: whether it matches the whole. With hit (zeroed, one
 * byte per '/' in s..end and one more), also hit[k] = 1 when p matches
 * the path up to its k-th '/'; a basename pattern restarts after each. */
static int
run(const struct pat *p, const char *s, const char *end, unsigned char *hit)
{
	unsigned char stack[2][256], *heap = NULL;
	struct nfa a;
	const char *q;
	size_t k = 0;
	int m = 0;

	if (p->never)
		return 0;
	if (p->n < sizeof stack[0]) {
		a.on = stack[0];
		a.nx = stack[1];
	} else {
		a.on = heap = sbx_xmalloc(2 * (p->n + 1));
		a.nx = heap + p->n + 1;
	}
	memset(a.on, 0, p->n + 1);
	memset(a.nx, 0, p->n + 1);
	a.lo = a.hi = (size_t)-1;
	restart(p, &a);
	for (q = s;; q++) {
		/* on[n] is the last token: it is live when hi is n. */
		m = a.hi == p->n;
		if (hit && (q == end || *q == '/'))
			hit[k++] = m;
		if (q == end)
			break;
		if (a.hi == (size_t)-1 && (p->anchored || !hit)) {
			m = 0;
			break;
		}
		step(p, &a, (unsigned char)*q);
		if (!p->anchored && *q == '/')
			restart(p, &a);
	}
	free(heap);
	return m;
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
