/* portable.c - listing and removing a sandbox's files through its own
 * shell (find, stat, sha256sum, rm: POSIX sh with coreutils or busybox),
 * for backends that can only exec; the local backend has faster ways */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* Names from find -print0, then a separator no name can hold (they all
 * start with "./"), then a stat line per name, ending with the name. */
static const char scan_sh[] =
    "cd -- \"$1\" || exit 3\n"
    "t=$(mktemp) || exit 1\n"
    "find . \\( -name .git -o -name .sbx \\) -prune -o "
    "\\( -type f -o -type l \\) -print0 >\"$t\"\n"
    "cat \"$t\"; printf '\\0//\\0'\n"
    "xargs -0 -r stat -c '%s %y %a %F %n' -- <\"$t\" 2>/dev/null\n"
    "rm -f \"$t\"\n";

/* A file gone since the scan has no line, and is no failure. */
static const char hash_sh[] =
    "cd -- \"$1\" || exit 3\nshift\nsha256sum -- \"$@\" 2>/dev/null || :\n";

static const char rm_sh[] =
    "cd -- \"$1\" || exit 3\nshift\n"
    "for f; do if [ -L \"$f\" ] || [ ! -d \"$f\" ]; then rm -f -- \"$f\" "
    "|| exit 1; fi; done\n";

/* At most this many paths, of this many bytes, per sha256sum. */
#define HASH_ARGS_MAX 4096
#define HASH_BYTES_MAX (96 * 1024)

static int
run_sh(const json_t *ref, const char *script, const char *dir,
    char **args, size_t nargs, struct sbx_buf *out, struct sbx_err *err)
{
	const struct sbx_backend *be = sbx_backend_of(ref, err);
	struct sbx_exec_opts o = {.capture = 1, .max_output = 1u << 30};
	struct sbx_exec_result res = {0};
	char **argv = sbx_xcalloc(nargs + 6, sizeof *argv);
	size_t i;
	int rc = -1;

	argv[0] = "sh";
	argv[1] = "-c";
	argv[2] = (char *)script;
	argv[3] = "sh";
	argv[4] = (char *)(dir ? dir : ".");
	for (i = 0; i < nargs; i++)
		argv[5 + i] = args[i];
	o.cwd = dir;
	if (!be || be->ops->exec(ref, argv, &o, &res, err) < 0)
		goto out;
	if (res.exit_code == 3)
		sbx_err_set(err, SBX_EX_USAGE, "no directory '%s' in the "
		    "sandbox", dir ? dir : "(workdir)");
	else if (res.exit_code)
		sbx_err_set(err, SBX_EX_FAIL, "the sandbox's shell failed "
		    "(status %d)", res.exit_code);
	else {
		*out = res.out;
		res.out = (struct sbx_buf)SBX_BUF_INIT;
		rc = 0;
	}
out:
	sbx_buf_release(&res.out);
	sbx_buf_release(&res.err);
	free(argv);
	return rc;
}

/* "2026-12-02 13:55:45.431110048 +0000" into nanoseconds. */
static int
parse_time(const char **p, int64_t *ns)
{
	struct tm tm = {0};
	char frac[10] = "";
	int sign, n = 0, i, hh, mm;
	int64_t f = 0;
	char zs;

	if (sscanf(*p, "%d-%d-%d %d:%d:%d%n", &tm.tm_year, &tm.tm_mon,
	    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
		return -1;
	*p += n;
	if (**p == '.') {
		n = 0;
		if (sscanf(*p, ".%9[0-9]%n", frac, &n) != 1)
			return -1;
		*p += n;
		while (isdigit((unsigned char)**p))
			(*p)++;
	}
	for (i = 0; i < 9; i++)
		f = f * 10 + (frac[i] ? frac[i] - '0' : 0);
	if (sscanf(*p, " %c%2d%2d%n", &zs, &hh, &mm, &n) != 3)
		return -1;
	*p += n;
	sign = zs == '-' ? -1 : 1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*ns = ((int64_t)timegm(&tm) - sign * (hh * 3600 + mm * 60)) *
	    1000000000 + f;
	return 0;
}

/* One stat line for name at *p: "SIZE TIME MODE TYPE NAME\n". */
static int
parse_stat(const char **p, const char *end, const char *name,
    struct sbx_fentry *e)
{
	const char *s = *p, *t, *h = NULL;
	char head[96];
	unsigned long long size;
	unsigned int mode;
	size_t n = strlen(name), hn;
	int k = 0;

	/* sscanf measures all of the string it is given, here the rest of
	 * the listing (quadratic: most of a pull of 10,000 files); so the
	 * numbers are read from a copy of the line's start. */
	hn = (size_t)(end - s) < sizeof head - 1 ? (size_t)(end - s) :
	    sizeof head - 1;
	memcpy(head, s, hn);
	head[hn] = '\0';
	h = head;
	if (sscanf(h, "%llu %n", &size, &k) != 1)
		return -1;
	h += k;
	if (parse_time(&h, &e->mtime) < 0 || sscanf(h, " %o %n", &mode, &k) != 1)
		return -1;
	h += k;
	s += h - head;
	if (!strncmp(s, "regular file ", k = 13) ||
	    !strncmp(s, "regular empty file ", k = 19))
		e->type = 'f';
	else if (!strncmp(s, "symbolic link ", k = 14))
		e->type = 'l';
	else
		return -1;
	t = s + k;
	if ((size_t)(end - t) < n + 1 || memcmp(t, name, n) || t[n] != '\n')
		return -1;
	e->size = size;
	e->mode = e->type == 'l' ? 0777 : mode & 07777;
	*p = t + n + 1;
	return 0;
}

/* sha256sum's escapes, in place: \\, \n and \r. */
static int
unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (*s != '\\') {
			*d++ = *s;
			continue;
		}
		if (s[1] == '\\')
			*d++ = '\\';
		else if (s[1] == 'n')
			*d++ = '\n';
		else if (s[1] == 'r')
			*d++ = '\r';
		else
			return -1;
		s++;
	}
	*d = '\0';
	return 0;
}

void
sbx_portable_hashes(char *out, struct sbx_manifest *m, size_t from,
    size_t n)
{
	char *p, *end, *name;
	size_t i, k;
	unsigned int byte;
	int esc;

	for (p = out, k = 0; k < n && (end = strchr(p, '\n')); p = end + 1) {
		esc = *p == '\\';
		p += esc;
		if (end - p < 66 || p[64] != ' ')
			break;
		*end = '\0';
		name = p + 66;
		if (esc && unescape(name) < 0)
			break;
		while (k < n && strcmp(m->e[from + k].path, name))
			k++;
		if (k == n)
			break;
		for (i = 0; i < 32; i++) {
			if (!isxdigit((unsigned char)p[2 * i]) ||
			    !isxdigit((unsigned char)p[2 * i + 1]) ||
			    sscanf(p + 2 * i, "%2x", &byte) != 1)
				break;
			m->e[from + k].hash[i] = (unsigned char)byte;
		}
		m->e[from + k++].has_hash = i == 32;
	}
}

/* Hash m's files from i on, as many as one command's arguments hold;
 * returns how many it asked for. */
static size_t
hash_chunk(const json_t *ref, const char *dir, struct sbx_manifest *m,
    size_t from, struct sbx_err *err)
{
	struct sbx_buf out = SBX_BUF_INIT;
	char **args;
	size_t i, n, bytes = 0;

	for (n = 0; from + n < m->n && n < HASH_ARGS_MAX; n++) {
		bytes += strlen(m->e[from + n].path) + 1;
		if (n && bytes > HASH_BYTES_MAX)
			break;
	}
	args = sbx_xcalloc(n + 1, sizeof *args);
	for (i = 0; i < n; i++)
		args[i] = m->e[from + i].path;
	/* No hash is no harm: the file counts as changed. */
	if (run_sh(ref, hash_sh, dir, args, n, &out, err) == 0) {
		sbx_buf_add(&out, "", 1);
		sbx_portable_hashes(out.data, m, from, n);
	}
	sbx_buf_release(&out);
	free(args);
	return n;
}

int
sbx_portable_hash(const json_t *ref, const char *dir, struct sbx_manifest *m,
    struct sbx_err *err)
{
	size_t i;

	/* In chunks: a command's arguments are bounded (ARG_MAX, and a
	 * request's size on a server). */
	for (i = 0; i < m->n; i += hash_chunk(ref, dir, m, i, err))
		;
	return 0;
}

int
sbx_portable_scan(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	const char *end, *sep, *name, *sp;

	if (o->meanwhile)
		o->meanwhile(o->arg);
	if (run_sh(ref, scan_sh, o->dir, NULL, 0, &b, err) < 0)
		return -1;
	sbx_buf_add(&b, "", 1);
	end = b.data + b.len - 1;
	sep = memmem(b.data, b.len, "//", 3);
	if (!sep || (sep != b.data && sep[-1] != '\0')) {
		sbx_buf_release(&b);
		return sbx_err_set(err, SBX_EX_FAIL, "bad listing from the "
		    "sandbox");
	}
	sp = sep + 3;
	for (name = b.data; name < sep; name += strlen(name) + 1) {
		struct sbx_fentry e = {0};

		/* A file gone between find and stat has no line. */
		if (strncmp(name, "./", 2) || parse_stat(&sp, end, name, &e) < 0)
			continue;
		if (!sbx_path_valid(name + 2) || sbx_scan_skipped(o, name + 2))
			continue;
		e.path = sbx_manifest_add(out, name + 2)->path;
		out->e[out->n - 1] = e;
	}
	sbx_buf_release(&b);
	sbx_manifest_sort(out);
	return 0;
}

int
sbx_portable_remove(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, struct sbx_err *err)
{
	struct sbx_buf out = SBX_BUF_INIT;
	char **args = sbx_xcalloc(paths->n + 1, sizeof *args);
	size_t i, n = 0;
	int rc;

	for (i = 0; i < paths->n; i++)
		if (sbx_path_valid(paths->e[i].path))
			args[n++] = paths->e[i].path;
	/* In chunks that stay far below ARG_MAX. */
	for (i = 0, rc = 0; rc == 0 && i < n; i += 512) {
		rc = run_sh(ref, rm_sh, dir, args + i, n - i < 512 ? n - i : 512,
		    &out, err);
		sbx_buf_release(&out);
	}
	free(args);
	return rc;
}
