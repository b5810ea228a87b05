/* ignore.c - TAP unit tests of the gitignore pattern matcher */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"
#include "tap.h"

/* A matcher holding the lines of text; only '\n' splits, so a '\r' stays
 * for the matcher to deal with. */
static struct sbx_ignore *
ig_of(const char *text)
{
	struct sbx_ignore *ig = sbx_ignore_new();
	char *copy = sbx_xstrdup(text), *line, *next;

	for (line = copy; line; line = next) {
		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		sbx_ignore_add(ig, line);
	}
	free(copy);
	return ig;
}

/* The full verdict of one set of patterns on one path. */
static int
ignored(const char *text, const char *path, int is_dir)
{
	struct sbx_ignore *ig = ig_of(text);
	int r = sbx_ignore_match(ig, path, is_dir);

	sbx_ignore_free(ig);
	return r;
}

static int
verdict1(const char *text, const char *path, int is_dir)
{
	struct sbx_ignore *ig = ig_of(text);
	int r = sbx_ignore_match1(ig, path, is_dir);

	sbx_ignore_free(ig);
	return r;
}

static size_t
count_of(const char *text)
{
	struct sbx_ignore *ig = ig_of(text);
	size_t n = sbx_ignore_count(ig);

	sbx_ignore_free(ig);
	return n;
}

/* A temp file holding len bytes of text; the caller unlinks it. */
static char *
temp_with(const char *text, size_t len)
{
	char *path = sbx_xstrdup("/tmp/sbx-unit-ignore.XXXXXX");
	int fd = mkstemp(path);

	if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
		perror("temp file");
		exit(2);
	}
	close(fd);
	return path;
}

static void
t_basename_any_depth(void)
{
	CHECK(ignored("*.o", "a.o", 0));
	CHECK(ignored("*.o", "src/a.o", 0));
	CHECK(ignored("*.o", "src/lib/deep/a.o", 0));
	CHECK(!ignored("*.o", "a.c", 0));
	CHECK(!ignored("*.o", "a.o.c", 0));
	CHECK(ignored("build", "build", 0));
	CHECK(ignored("build", "src/build", 1));
	CHECK(ignored("build", "src/build/x.c", 0));
	CHECK(!ignored("build", "builder", 0));
	/* A leading "*" matches dot files too, as in git. */
	CHECK(ignored("*", ".hidden", 0));
}

static void
t_anchored(void)
{
	CHECK(ignored("/build", "build", 1));
	CHECK(ignored("/build", "build/x.o", 0));
	CHECK(!ignored("/build", "src/build", 1));
	CHECK(!ignored("/build", "src/build/x.o", 0));
	/* A slash in the middle anchors as one at the start does. */
	CHECK(ignored("doc/frotz", "doc/frotz", 1));
	CHECK(!ignored("doc/frotz", "a/doc/frotz", 1));
	CHECK(ignored("/*.c", "a.c", 0));
	CHECK(!ignored("/*.c", "src/a.c", 0));
	CHECK(verdict1("src/a.c", "src/a.c", 0) == 1);
	CHECK(verdict1("src/a.c", "x/src/a.c", 0) == -1);
}

static void
t_dir_only(void)
{
	CHECK(ignored("build/", "build", 1));
	CHECK(!ignored("build/", "build", 0));
	CHECK(ignored("build/", "src/build", 1));
	CHECK(!ignored("build/", "src/build", 0));
	CHECK(ignored("build/", "src/build/a.c", 0));
	CHECK(verdict1("build/", "build/a.c", 0) == -1);
	CHECK(ignored("doc/frotz/", "doc/frotz", 1));
	CHECK(!ignored("doc/frotz/", "doc/frotz", 0));
	CHECK(!ignored("doc/frotz/", "a/doc/frotz", 1));
	CHECK(ignored("*/", "src", 1));
	CHECK(!ignored("*/", "a.c", 0));
}

static void
t_negation_last_wins(void)
{
	const char *keep = "*.log\n!keep.log";

	CHECK(ignored(keep, "a.log", 0));
	CHECK(!ignored(keep, "keep.log", 0));
	CHECK(!ignored(keep, "x/keep.log", 0));
	CHECK(verdict1(keep, "keep.log", 0) == 0);
	CHECK(verdict1(keep, "a.log", 0) == 1);
	CHECK(verdict1(keep, "a.c", 0) == -1);
	CHECK(ignored("!*.c\n*.c", "a.c", 0));
	CHECK(verdict1("*.c\n!*.c", "a.c", 0) == 0);
	CHECK(!ignored("*.c\n!/src/*.c", "src/a.c", 0));
	CHECK(ignored("*.c\n!/src/*.c", "lib/a.c", 0));
}

/* git does not even look inside an excluded directory. */
static void
t_no_reinclude_under_excluded_dir(void)
{
	const char *dir = "build/\n!build/keep.txt";

	CHECK(ignored(dir, "build/keep.txt", 0));
	CHECK(verdict1(dir, "build/keep.txt", 0) == 0);
	CHECK(ignored(dir, "build/out.o", 0));
	CHECK(ignored("build\n!build/sub/", "build/sub/a", 0));
	/* Its contents, rather than the directory, can be re-included. */
	CHECK(!ignored("build/*\n!build/keep.txt", "build/keep.txt", 0));
	CHECK(ignored("build/*\n!build/keep.txt", "build/out.o", 0));
	CHECK(!ignored("build/**\n!build/keep.txt", "build/keep.txt", 0));
	CHECK(!ignored("build/*\n!build/keep.txt", "build", 1));
}

static void
t_double_star(void)
{
	CHECK(ignored("**/foo", "foo", 0));
	CHECK(ignored("**/foo", "a/foo", 0));
	CHECK(ignored("**/foo", "a/b/foo", 1));
	CHECK(ignored("**/foo/bar", "foo/bar", 0));
	CHECK(ignored("**/foo/bar", "x/y/foo/bar", 0));
	CHECK(!ignored("**/foo/bar", "foo/x/bar", 0));
	CHECK(ignored("abc/**", "abc/d", 0));
	CHECK(ignored("abc/**", "abc/e/f", 0));
	CHECK(verdict1("abc/**", "abc", 1) == -1);
	CHECK(!ignored("abc/**", "x/abc/d", 0));
	CHECK(ignored("a/**/b", "a/b", 0));
	CHECK(ignored("a/**/b", "a/x/b", 0));
	CHECK(ignored("a/**/b", "a/x/y/b", 0));
	CHECK(!ignored("a/**/b", "a/bb", 0));
	CHECK(!ignored("a/**/b", "x/a/b", 0));
	CHECK(ignored("src/**/*.c", "src/a.c", 0));
	CHECK(ignored("src/**/*.c", "src/lib/deep/c.c", 0));
	CHECK(!ignored("src/**/*.c", "src/lib/c.h", 0));
	CHECK(ignored("a/**/**/b", "a/b", 0));
	CHECK(ignored("**/lib/**", "src/lib/b.c", 0));
	CHECK(ignored("**", "any/thing", 0));
	CHECK(ignored("/**", "x", 0));
}

/* Only "**" between slashes spans directories; elsewhere it is "*". */
static void
t_other_stars(void)
{
	CHECK(ignored("a**b", "axyb", 0));
	CHECK(ignored("a**b", "dir/ab", 0));
	CHECK(verdict1("/p**s", "p/q/s", 0) == -1);
	CHECK(verdict1("a/x**/b", "a/xyz/b", 0) == 1);
	CHECK(verdict1("a/\\x**/b", "a/x/y/b", 0) == -1);
	CHECK(verdict1("a/x?**/b", "a/xy/z/b", 0) == -1);
	/* git matches a pattern with a slash in two parts: its literal head
	 * by strcmp, the rest by wildmatch; a "**" that starts the rest is
	 * at its start, and spans directories (git 2.39 does so). */
	CHECK(verdict1("a/x**/b", "a/x/y/b", 0) == 1);
	CHECK(verdict1("a**/b", "ax/y/b", 0) == 1);
	CHECK(verdict1("a/b**", "a/bc/d", 0) == 1);
	CHECK(verdict1("a**", "ab/c", 0) == -1);
}

static void
t_star_not_slash(void)
{
	CHECK(verdict1("a/*", "a/b", 0) == 1);
	CHECK(verdict1("a/*", "a/b/c", 0) == -1);
	CHECK(ignored("x/*.c", "x/z.c", 0));
	CHECK(!ignored("x/*.c", "x/y/z.c", 0));
	CHECK(verdict1("a?c", "abc", 0) == 1);
	CHECK(verdict1("x/a?c", "x/a/c", 0) == -1);
	CHECK(verdict1("*/b", "a/b", 0) == 1);
	CHECK(verdict1("*/b", "a/x/b", 0) == -1);
}

static void
t_char_classes(void)
{
	CHECK(ignored("debug[0-9].log", "debug0.log", 0));
	CHECK(ignored("debug[0-9].log", "logs/debug7.log", 0));
	CHECK(!ignored("debug[0-9].log", "debuga.log", 0));
	CHECK(ignored("debug[!0-9].log", "debuga.log", 0));
	CHECK(!ignored("debug[!0-9].log", "debug1.log", 0));
	CHECK(ignored("[Mm]akefile", "Makefile", 0));
	CHECK(ignored("a\\[b]c", "a[b]c", 0));
	CHECK(!ignored("a\\[b]c", "abc", 0));
	CHECK(ignored("a[b]c", "abc", 0));
}

static void
t_escapes_and_comments(void)
{
	CHECK(count_of("# a comment") == 0);
	CHECK(!ignored("#hash", "#hash", 0));
	CHECK(ignored("\\#hash", "#hash", 0));
	CHECK(ignored("\\!bang", "!bang", 0));
	CHECK(verdict1("\\!bang", "!bang", 0) == 1);
	CHECK(verdict1("!bang", "bang", 0) == 0);
	CHECK(ignored("a#b", "a#b", 0));
	CHECK(count_of("\n\n   \n# c\n*.c\n\t") == 2);
	CHECK(count_of("!\n/\n!/") == 0);
}

static void
t_trailing_spaces(void)
{
	CHECK(ignored("sp   ", "sp", 0));
	CHECK(!ignored("sp   ", "sp ", 0));
	CHECK(ignored("sp\\ ", "sp ", 0));
	CHECK(!ignored("sp\\ ", "sp", 0));
	CHECK(ignored("sp\\  ", "sp ", 0));
	CHECK(ignored("s p", "s p", 0));
	CHECK(ignored("\\ lead", " lead", 0));
	CHECK(ignored("build/  ", "build", 1));
	CHECK(!ignored("build/  ", "build", 0));
}

static void
t_crlf(void)
{
	const char *dos = "*.log\r\n!keep.log\r\nbuild/\r\n# c\r\n\r\n";

	CHECK(count_of(dos) == 3);
	CHECK(ignored(dos, "a.log", 0));
	CHECK(!ignored(dos, "keep.log", 0));
	CHECK(ignored(dos, "build", 1));
	CHECK(!ignored(dos, "build", 0));
	CHECK(ignored("sp  \r", "sp", 0));
}

static void
t_empty(void)
{
	struct sbx_ignore *ig = sbx_ignore_new();

	CHECK(sbx_ignore_count(ig) == 0);
	CHECK(sbx_ignore_match(ig, "a.c", 0) == 0);
	CHECK(sbx_ignore_match1(ig, "a.c", 0) == -1);
	sbx_ignore_add(ig, "*.c");
	sbx_ignore_add(ig, "!a.c");
	CHECK(sbx_ignore_count(ig) == 2);
	sbx_ignore_free(ig);
	sbx_ignore_free(NULL);
}

static void
t_load_file(void)
{
	static const char text[] = "# made on Windows\r\n*.o\r\n\r\n"
	    "build/\n!keep.o\n/node_modules";
	struct sbx_ignore *ig = sbx_ignore_new();
	struct sbx_err err = {0};
	char *path = temp_with(text, sizeof text - 1);

	CHECK(sbx_ignore_load(ig, path, &err) == 0);
	unlink(path);
	free(path);
	CHECK(sbx_ignore_count(ig) == 4);
	CHECK(sbx_ignore_match(ig, "src/a.o", 0) == 1);
	CHECK(sbx_ignore_match(ig, "keep.o", 0) == 0);
	CHECK(sbx_ignore_match(ig, "build", 1) == 1);
	/* The last line has no newline, and still counts. */
	CHECK(sbx_ignore_match(ig, "node_modules", 1) == 1);
	CHECK(sbx_ignore_match(ig, "src/node_modules", 1) == 0);
	sbx_ignore_free(ig);
}

static void
t_load_missing(void)
{
	struct sbx_ignore *ig = sbx_ignore_new();
	struct sbx_err err = {0};

	CHECK(sbx_ignore_load(ig, "/nonexistent/sbx/.sbxignore", &err) == 0);
	CHECK(sbx_ignore_count(ig) == 0);
	CHECK(err.msg[0] == '\0');
	sbx_ignore_free(ig);
}

static void
t_load_error(void)
{
	struct sbx_ignore *ig = sbx_ignore_new();
	struct sbx_err err = {0};

	CHECK(sbx_ignore_load(ig, "/tmp", &err) == -1);
	CHECK(err.code == SBX_EX_FAIL);
	CHECK(!strcmp(err.msg, "cannot read '/tmp': Is a directory"));
	CHECK(sbx_ignore_count(ig) == 0);
	sbx_ignore_free(ig);
}

/* 10,000 paths against 20 patterns: what one sync of a mid-sized tree
 * asks; a generous bound, to catch a blowup and not to benchmark. */
static void
t_many_paths(void)
{
	static const char *pats[] = {"*.o", "*.a", "build/", "/dist",
	    "node_modules/", "**/tmp/**", "*.log", "!keep.log", ".git/",
	    "src/**/gen_*.c", "*.sw[op]", "__pycache__/", "*.pyc", "/out/*",
	    "!out/keep", "docs/_build/", "*~", "coverage/", ".DS_Store",
	    "vendor/**/*.test"};
	struct sbx_ignore *ig = sbx_ignore_new();
	char path[128];
	size_t i, hits = 0;

	for (i = 0; i < sizeof pats / sizeof pats[0]; i++)
		sbx_ignore_add(ig, pats[i]);
	CHECK(sbx_ignore_count(ig) == 20);
	for (i = 0; i < 10000; i++) {
		snprintf(path, sizeof path, "src/mod%zu/sub%zu/file%zu.%s",
		    i % 50, i % 7, i, i % 10 ? "c" : "o");
		hits += sbx_ignore_match(ig, path, 0) == 1;
	}
	CHECK(hits == 1000);
	sbx_ignore_free(ig);
}

/* The pattern a sandbox could plant in .sbxignore: nine "**" then "*"
 * segments; a backtracking matcher takes minutes on a deep path. The
 * alarm fails the test rather than hang the suite. */
static void
t_bomb(void)
{
	char bomb[128] = "", path[4096] = "", deep[4096];
	struct sbx_ignore *ig = sbx_ignore_new();
	size_t i, len = 0;

	alarm(10);
	for (i = 0; i < 9; i++)
		len += snprintf(bomb + len, sizeof bomb - len, "**/*/");
	snprintf(bomb + len, sizeof bomb - len, "nomatch");
	sbx_ignore_add(ig, bomb);
	snprintf(bomb + len, sizeof bomb - len, "f.txt");
	sbx_ignore_add(ig, bomb);
	for (i = 0, len = 0; i < 200; i++)
		len += snprintf(path + len, sizeof path - len, "d%zu/", i);
	snprintf(deep, sizeof deep, "%sf.txt", path);
	CHECK(sbx_ignore_match1(ig, deep, 0) == 1);
	CHECK(sbx_ignore_match(ig, deep, 0) == 1);
	snprintf(deep, sizeof deep, "%sg.txt", path);
	CHECK(sbx_ignore_match1(ig, deep, 0) == -1);
	CHECK(sbx_ignore_match(ig, deep, 0) == 0);
	/* Eight directories are one too few for nine "*". */
	CHECK(sbx_ignore_match1(ig, "1/2/3/4/5/6/7/8/f.txt", 0) == -1);
	CHECK(sbx_ignore_match1(ig, "1/2/3/4/5/6/7/8/9/f.txt", 0) == 1);
	sbx_ignore_free(ig);
	/* Star runs in one name, and a class between each. */
	ig = ig_of("*a*a*a*a*a*a*a*a*a*a*a*a*b\n*[a]*[a]*[a]*[a]*[a]*[a]*c");
	memset(deep, 'a', 250);
	deep[250] = '\0';
	CHECK(sbx_ignore_match(ig, deep, 0) == 0);
	deep[249] = 'c';
	CHECK(sbx_ignore_match(ig, deep, 0) == 1);
	sbx_ignore_free(ig);
}

/* A pattern file is at most 64 KiB: one byte more is a usage error
 * that adds nothing. */
static void
t_load_cap(void)
{
	size_t max = 64 * 1024;
	char *text = sbx_xmalloc(max + 1), *path;
	struct sbx_ignore *ig = sbx_ignore_new();
	struct sbx_err err = {0};
	char want[600];

	memset(text, '\n', max + 1);
	memcpy(text, "*.o\n", 4);
	path = temp_with(text, max);
	CHECK(sbx_ignore_load(ig, path, &err) == 0);
	CHECK(sbx_ignore_count(ig) == 1);
	unlink(path);
	free(path);
	sbx_ignore_free(ig);
	ig = sbx_ignore_new();
	path = temp_with(text, max + 1);
	CHECK(sbx_ignore_load(ig, path, &err) == -1);
	CHECK(err.code == SBX_EX_USAGE);
	snprintf(want, sizeof want, "'%s' is larger than 64 KiB", path);
	CHECK(!strcmp(err.msg, want));
	CHECK(sbx_ignore_count(ig) == 0);
	unlink(path);
	free(path);
	free(text);
	sbx_ignore_free(ig);
}

/* --- against git itself ------------------------------------------------- */

/* The tree the cross-check asks about: directories, then files in each. */
static const char *xdirs[] = {"a", "b", "ab", "a/b", "a/b/c", "b/a",
    "ab/ba", "ab/ba/a", "x", "x/y", "x/y/z", "x/y/z/w", "a/a", "a/a/a",
    "a/a/a/a"};
static const char *xfiles[] = {"a", "b", "ab", "x.c", "*", "[a]", "a b",
    "!a", "#a", "ba"};
/* Pattern pieces: stars in every arrangement, classes, escapes, broken
 * classes, names of the tree. */
static const char *xatoms[] = {"a", "b", "ab", "ba", "x", "y", "z", "w",
    "c", "x.c", "*", "**", "***", "?", "a*", "*b", "a**", "**a", "*a*",
    "a?", "?b", "[ab]", "[!a]", "[^b]", "[a-b]", "[b-a]", "[]a]", "[!]]",
    "[[:alpha:]]", "[[:digit:]]", "[[:nope:]]", "[a", "[\\]]", "\\a",
    "\\*", "\\[a]", "\\", "*.c", "[*]", "\\!a", "\\#a", "a\\ b", "a b",
    "[a-]", "[-a]", "[[]", "[[:]"};

static uint32_t xseed = 20;

static uint32_t
xrand(uint32_t n)
{
	xseed = xseed * 1103515245 + 12345;
	return (xseed >> 8) % n;
}

/* One random pattern line into buf. */
static void
xpattern(char *buf, size_t size)
{
	size_t n = 1 + xrand(4), i, len = 0;
	const char *sep = "";

	buf[0] = '\0';
	if (!xrand(5))
		len += snprintf(buf + len, size - len, "!");
	if (!xrand(4))
		len += snprintf(buf + len, size - len, "/");
	for (i = 0; i < n; i++, sep = "/")
		len += snprintf(buf + len, size - len, "%s%s", sep,
		    xatoms[xrand(sizeof xatoms / sizeof xatoms[0])]);
	if (!xrand(4))
		snprintf(buf + len, size - len, "/");
}

/* Run argv in dir, stdin from in, stdout to out; its exit status. */
static int
xrun(const char *dir, char *const argv[], const char *in, const char *out)
{
	int status;
	pid_t pid;

	fflush(NULL);
	if ((pid = fork()) == 0) {
		if (chdir(dir) < 0 || !freopen(in, "r", stdin) ||
		    !freopen(out, "w", stdout))
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* git check-ignore's verdict on every path of the tree, for the lines in
 * .gitignore, against ours; 300 random sets of 1 to 4 lines. */
static void
t_same_as_git(void)
{
	char root[] = "/tmp/sbx-unit-ignore-git.XXXXXX", p[512], in[600],
	    out[600], lines[4][128], text[600], got[64 * 1024];
	char *init[] = {"git", "init", "-q", ".", NULL};
	char *ci[] = {"git", "check-ignore", "--no-index", "-z", "-v", "-n",
	    "--stdin", NULL};
	size_t i, j, k, npaths = 0, nlines, len, off, bad = 0;
	const char *paths[256], *f[4];
	int isdir[256], rc, want, mine;
	struct sbx_ignore *ig;
	FILE *fp;

	CHECK(mkdtemp(root) != NULL);
	snprintf(in, sizeof in, "%s/.paths", root);
	snprintf(out, sizeof out, "%s/.out", root);
	CHECK(xrun(root, init, "/dev/null", out) == 0);
	for (i = 0; i < sizeof xdirs / sizeof xdirs[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", root, xdirs[i]);
		CHECK(mkdir(p, 0755) == 0 || errno == EEXIST);
		paths[npaths] = xdirs[i];
		isdir[npaths++] = 1;
	}
	for (i = 0; i < sizeof xdirs / sizeof xdirs[0] + 1; i++)
		for (j = 0; j < sizeof xfiles / sizeof xfiles[0]; j++) {
			snprintf(p, sizeof p, "%s%s%s", i ? xdirs[i - 1] : "",
			    i ? "/" : "", xfiles[j]);
			paths[npaths] = sbx_xstrdup(p);
			snprintf(p, sizeof p, "%s/%s", root, paths[npaths]);
			/* "a" is a file at the top and a directory below. */
			isdir[npaths] = mkdir(p, 0755) < 0 && errno == EEXIST;
			if (!isdir[npaths])
				CHECK(rmdir(p) == 0 && close(open(p, O_CREAT |
				    O_WRONLY, 0644)) == 0);
			npaths++;
		}
	CHECK((fp = fopen(in, "w")) != NULL);
	for (i = 0; i < npaths; i++)
		fwrite(paths[i], 1, strlen(paths[i]) + 1, fp);
	fclose(fp);
	for (k = 0; k < 300 && bad < 10; k++) {
		nlines = 1 + xrand(4);
		len = 0;
		ig = sbx_ignore_new();
		for (i = 0; i < nlines; i++) {
			xpattern(lines[i], sizeof lines[i]);
			sbx_ignore_add(ig, lines[i]);
			len += snprintf(text + len, sizeof text - len, "%s\n",
			    lines[i]);
		}
		snprintf(p, sizeof p, "%s/.gitignore", root);
		CHECK((fp = fopen(p, "w")) && fputs(text, fp) >= 0 &&
		    fclose(fp) == 0);
		/* 0: some path ignored, 1: none; both are answers. */
		rc = xrun(root, ci, in, out);
		CHECK(rc == 0 || rc == 1);
		CHECK((fp = fopen(out, "r")) != NULL);
		len = fread(got, 1, sizeof got - 1, fp);
		fclose(fp);
		got[len] = '\0';
		/* source, line, pattern, path: each ending in a NUL. */
		for (off = 0, i = 0; off < len && i < npaths; i++) {
			for (j = 0; j < 4; j++) {
				f[j] = got + off;
				off += strlen(got + off) + 1;
			}
			want = *f[2] && *f[2] != '!';
			mine = sbx_ignore_match(ig, paths[i], isdir[i]);
			CHECK(!strcmp(f[3], paths[i]));
			if (want != mine && bad++ < 10)
				printf("# git %s, sbx %s: '%s'%s for:\n%s",
				    want ? "ignores" : "keeps", mine ?
				    "ignores" : "keeps", paths[i], isdir[i] ?
				    " (dir)" : "", text);
		}
		CHECK(i == npaths);
		sbx_ignore_free(ig);
	}
	CHECK(bad == 0);
	for (i = sizeof xdirs / sizeof xdirs[0]; i < npaths; i++)
		free((char *)paths[i]);
	CHECK(nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

static const struct tap_test tests[] = {
	{"a pattern without a slash matches the basename at any depth",
	    t_basename_any_depth},
	{"a slash at the start or in the middle anchors to the root",
	    t_anchored},
	{"a trailing slash matches directories only", t_dir_only},
	{"! re-includes, and the last matching pattern wins",
	    t_negation_last_wins},
	{"a file under an excluded directory cannot be re-included",
	    t_no_reinclude_under_excluded_dir},
	{"**/x, a/** and a/**/b span directories", t_double_star},
	{"other consecutive stars are a single star", t_other_stars},
	{"* and ? do not match a slash", t_star_not_slash},
	{"[...] classes, ranges and negated classes", t_char_classes},
	{"# comments, \\# and \\! escapes, blank lines",
	    t_escapes_and_comments},
	{"trailing spaces go unless escaped", t_trailing_spaces},
	{"a trailing CR is removed (CRLF files)", t_crlf},
	{"an empty matcher matches nothing; count counts patterns", t_empty},
	{"sbx_ignore_load reads a file, last line without newline too",
	    t_load_file},
	{"sbx_ignore_load takes a missing file as empty", t_load_missing},
	{"sbx_ignore_load fails on a directory, naming it", t_load_error},
	{"10,000 paths against 20 patterns", t_many_paths},
	{"nine **/*/ segments on a 200-deep path, and star runs, are quick",
	    t_bomb},
	{"a pattern file past 64 KiB is a usage error", t_load_cap},
	{"the same verdicts as git check-ignore on random patterns",
	    t_same_as_git},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
