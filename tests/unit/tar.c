/* tar.c - TAP unit tests of the tar streams: sbx_tar_write, sbx_tar_extract,
 * sbx_tar_stage against hostile archives, and sbx_path_valid */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "internal.h"
#include "tap.h"

/* Each test runs in a child of its own: a chdir or a crash stays there. */

#define WEIRD "dir with space/new\nline \xc3\xa9\xe2\x82\xac.txt"

static void
fatal(const char *what)
{
	printf("# fatal: %s: %s\n", what, strerror(errno));
	fflush(stdout);
	_exit(2);
}

/* One member of a tar made by hand. */
struct member {
	const char *name;
	unsigned type;        /* AE_IFREG, AE_IFLNK, AE_IFCHR, AE_IFIFO */
	const char *data;     /* a file's content, a symlink's target */
	const char *hardlink; /* or NULL */
	int mode;
	long long sec;
	long nsec;
};

/* A pax tar of the members at path. */
static int
tar_make(const char *path, const struct member *m, size_t n)
{
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();
	size_t i, len;
	int rc = -1;

	archive_write_set_format_pax(a);
	archive_write_set_format_option(a, "pax", "hdrcharset", "BINARY");
	if (archive_write_open_filename(a, path) != ARCHIVE_OK)
		goto out;
	for (i = 0; i < n; i++) {
		archive_entry_clear(ae);
		archive_entry_set_pathname(ae, m[i].name);
		archive_entry_set_filetype(ae, m[i].type);
		archive_entry_set_perm(ae, m[i].mode ? m[i].mode : 0644);
		archive_entry_set_mtime(ae, m[i].sec ? m[i].sec : 1700000000,
		    m[i].nsec);
		len = m[i].data && m[i].type == AE_IFREG ? strlen(m[i].data) : 0;
		if (m[i].type == AE_IFLNK)
			archive_entry_set_symlink(ae, m[i].data);
		if (m[i].type == AE_IFCHR) {
			archive_entry_set_rdevmajor(ae, 1);
			archive_entry_set_rdevminor(ae, 3);
		}
		if (m[i].hardlink)
			archive_entry_set_hardlink(ae, m[i].hardlink);
		archive_entry_set_size(ae, (la_int64_t)len);
		if (archive_write_header(a, ae) != ARCHIVE_OK) {
			printf("# tar_make '%s': %s\n", m[i].name,
			    archive_error_string(a));
			goto out;
		}
		if (len && archive_write_data(a, m[i].data, len) !=
		    (la_ssize_t)len)
			goto out;
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		goto out;
	rc = 0;
out:
	archive_entry_free(ae);
	archive_write_free(a);
	return rc;
}

/* A temp dir holding stage/, project/ (the current directory), outside/
 * and the archive t.tar: whatever lands anywhere but stage/ shows. */
struct fx {
	char base[64], stage[80], project[80], outside[80], tar[80];
	int stage_fd;
};

static void
fx_init(struct fx *f)
{
	snprintf(f->base, sizeof f->base, "/tmp/sbx-unit-tar.XXXXXX");
	if (!mkdtemp(f->base))
		fatal("mkdtemp");
	snprintf(f->stage, sizeof f->stage, "%s/stage", f->base);
	snprintf(f->project, sizeof f->project, "%s/project", f->base);
	snprintf(f->outside, sizeof f->outside, "%s/outside", f->base);
	snprintf(f->tar, sizeof f->tar, "%s/t.tar", f->base);
	if (mkdir(f->stage, 0700) < 0 || mkdir(f->project, 0755) < 0 ||
	    mkdir(f->outside, 0755) < 0 || chdir(f->project) < 0)
		fatal("fixture");
	f->stage_fd = open(f->stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->stage_fd < 0)
		fatal("open stage");
}

static void
fx_release(struct fx *f)
{
	close(f->stage_fd);
	if (chdir("/") < 0 || sbx_rmtree(f->base) < 0)
		fatal("cleanup");
}

/* Entries in a directory, -1 when it cannot be opened. */
static int
dir_count(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* base holds only what the fixture made. */
static int
base_clean(const struct fx *f)
{
	DIR *d = opendir(f->base);
	struct dirent *de;
	int ok = 1;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "stage") &&
		    strcmp(de->d_name, "project") &&
		    strcmp(de->d_name, "outside") &&
		    strcmp(de->d_name, "t.tar")) {
			printf("# stray '%s' in %s\n", de->d_name, f->base);
			ok = 0;
		}
	closedir(d);
	return ok;
}

static int
absent(const char *path)
{
	struct stat st;

	return lstat(path, &st) < 0 && errno == ENOENT;
}

static int
refused(const struct sbx_err *err, const char *name)
{
	char want[600];

	snprintf(want, sizeof want, "refused archive member '%s'", name);
	if (err->code == SBX_EX_DATA && strstr(err->msg, want))
		return 1;
	printf("# code %d, msg: %s\n", err->code, err->msg);
	return 0;
}

/* want() accepts each listed name once, as slot base + its index. */
struct asked {
	const char *names[8];
	size_t n;
	long base;
	int taken[8];
	int got[8];
	struct sbx_fentry e[8];
};

static long
want(const char *name, void *arg)
{
	struct asked *a = arg;
	size_t i;

	for (i = 0; i < a->n; i++)
		if (!strcmp(a->names[i], name)) {
			if (a->taken[i]++)
				return -1;
			return a->base + (long)i;
		}
	return -1;
}

static void
got(long slot, const struct sbx_fentry *e, void *arg)
{
	struct asked *a = arg;
	long i = slot - a->base;

	if (i < 0 || (size_t)i >= a->n) {
		printf("# got() of slot %ld never given\n", slot);
		fails++;
		return;
	}
	a->got[i]++;
	a->e[i] = *e;
}

/* The members, staged with want() taking names, fail on member bad with
 * SBX_EX_DATA; stage/ then holds nstaged entries and nothing else moved. */
static int
stage_refused(const struct member *m, size_t n, const char *const *names,
    size_t nnames, const char *bad, int nstaged)
{
	struct fx f;
	struct asked a = {.base = 100};
	struct sbx_err err = {0};
	char evil[96];
	int fd, ok = 1, rc;
	size_t i;

	fx_init(&f);
	for (i = 0; i < nnames; i++)
		a.names[a.n++] = names[i];
	if (tar_make(f.tar, m, n) < 0) {
		printf("# cannot make the archive for '%s'\n", bad);
		fx_release(&f);
		return 0;
	}
	if ((fd = open(f.tar, O_RDONLY | O_CLOEXEC)) < 0)
		fatal("open tar");
	rc = sbx_tar_stage(fd, f.stage_fd, want, got, &a, &err);
	close(fd);
	snprintf(evil, sizeof evil, "%s/evil", f.base);
	if (rc != -1 || !refused(&err, bad))
		ok = 0;
	if (dir_count(f.project) != 0 || dir_count(f.outside) != 0 ||
	    !base_clean(&f) || !absent(evil) || !absent("/tmp/evil") ||
	    !absent("/evil")) {
		printf("# something was written outside the stage\n");
		ok = 0;
	}
	if (dir_count(f.stage) != nstaged) {
		printf("# stage holds %d, not %d\n", dir_count(f.stage),
		    nstaged);
		ok = 0;
	}
	if (!ok)
		printf("# ^ while staging member '%s'\n", bad);
	fx_release(&f);
	return ok;
}
#define NAMES(...) (const char *const[]){__VA_ARGS__}, \
	sizeof (const char *const[]){__VA_ARGS__} / sizeof (const char *)
#define MEMBERS(...) (const struct member[]){__VA_ARGS__}, \
	sizeof (const struct member[]){__VA_ARGS__} / sizeof (struct member)

/* A directory outside every fixture for members to aim at; the caller
 * removes it. */
static void
aim_init(char *dir, size_t n)
{
	snprintf(dir, n, "/tmp/sbx-unit-tar-aim.XXXXXX");
	if (!mkdtemp(dir))
		fatal("mkdtemp");
}

static void
t_stage_absolute(void)
{
	char aim[64], abs[96];

	aim_init(aim, sizeof aim);
	snprintf(abs, sizeof abs, "%s/evil", aim);
	CHECK(stage_refused(MEMBERS({abs, AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES(abs, "ok"), abs, 0));
	CHECK(absent(abs) && dir_count(aim) == 0);
	CHECK(stage_refused(MEMBERS({"/evil", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES("/evil"), "/evil", 0));
	sbx_rmtree(aim);
}

static void
t_stage_dotdot(void)
{
	CHECK(stage_refused(MEMBERS({"../evil", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES("../evil"), "../evil", 0));
	CHECK(stage_refused(MEMBERS({"a/../../evil", AE_IFREG, "x", NULL, 0, 0,
	    0}), NAMES("a/../../evil"), "a/../../evil", 0));
	CHECK(stage_refused(MEMBERS({"a/..", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES("a/.."), "a/..", 0));
	CHECK(stage_refused(MEMBERS({"..", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES(".."), "..", 0));
}

/* The symlink itself is staged (slot 100), the member through it not. */
static void
t_stage_through_symlink(void)
{
	char aim[64];

	aim_init(aim, sizeof aim);
	CHECK(stage_refused(MEMBERS({"l", AE_IFLNK, aim, NULL, 0, 0, 0},
	    {"l/x", AE_IFREG, "pwned", NULL, 0, 0, 0}), NAMES("l", "l/x"),
	    "l/x", 1));
	CHECK(stage_refused(MEMBERS({"d/l", AE_IFLNK, aim, NULL, 0, 0, 0},
	    {"d/l/sub/x", AE_IFREG, "pwned", NULL, 0, 0, 0}),
	    NAMES("d/l", "d/l/sub/x"), "d/l/sub/x", 1));
	/* Among others, deep: a name that only starts like a link's is
	 * not through it; one under it, however deep, is. */
	CHECK(stage_refused(MEMBERS({"x", AE_IFLNK, aim, NULL, 0, 0, 0},
	    {"a/b", AE_IFLNK, aim, NULL, 0, 0, 0},
	    {"a/bc", AE_IFREG, "ok", NULL, 0, 0, 0},
	    {"a/b.c/x", AE_IFREG, "ok", NULL, 0, 0, 0},
	    {"a/b/c/d", AE_IFREG, "pwned", NULL, 0, 0, 0}),
	    NAMES("x", "a/b", "a/bc", "a/b.c/x", "a/b/c/d"), "a/b/c/d", 4));
	/* A symlink through a symlink is refused as well. */
	CHECK(stage_refused(MEMBERS({"l", AE_IFLNK, aim, NULL, 0, 0, 0},
	    {"l/m", AE_IFLNK, "/etc", NULL, 0, 0, 0}), NAMES("l", "l/m"),
	    "l/m", 1));
	CHECK(dir_count(aim) == 0);
	sbx_rmtree(aim);
}

static void
t_stage_hardlink(void)
{
	struct stat before, after;

	if (stat("/etc/passwd", &before) < 0)
		fatal("stat /etc/passwd");
	CHECK(stage_refused(MEMBERS({"h", AE_IFREG, NULL, "/etc/passwd", 0, 0,
	    0}), NAMES("h"), "h", 0));
	CHECK(stage_refused(MEMBERS({"a", AE_IFREG, "x", NULL, 0, 0, 0},
	    {"h", AE_IFREG, NULL, "a", 0, 0, 0}), NAMES("a", "h"), "h", 1));
	CHECK(stat("/etc/passwd", &after) == 0);
	CHECK(after.st_nlink == before.st_nlink);
	CHECK(after.st_size == before.st_size);
}

static void
t_stage_special(void)
{
	CHECK(stage_refused(MEMBERS({"dev", AE_IFCHR, NULL, NULL, 0666, 0, 0}),
	    NAMES("dev"), "dev", 0));
	CHECK(stage_refused(MEMBERS({"blk", AE_IFBLK, NULL, NULL, 0666, 0, 0}),
	    NAMES("blk"), "blk", 0));
	CHECK(stage_refused(MEMBERS({"fifo", AE_IFIFO, NULL, NULL, 0644, 0, 0}),
	    NAMES("fifo"), "fifo", 0));
	/* libarchive names a directory "d/", refused for its empty part. */
	CHECK(stage_refused(MEMBERS({"d", AE_IFDIR, NULL, NULL, 0755, 0, 0}),
	    NAMES("d", "d/"), "d/", 0));
}

static void
t_stage_not_asked(void)
{
	CHECK(stage_refused(MEMBERS({"other", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES("a", "b"), "other", 0));
	CHECK(stage_refused(MEMBERS({"a", AE_IFREG, "x", NULL, 0, 0, 0},
	    {"other", AE_IFREG, "x", NULL, 0, 0, 0}), NAMES("a"), "other", 1));
}

/* want() refuses a name the second time (as sbx-sync's does). */
static void
t_stage_twice(void)
{
	CHECK(stage_refused(MEMBERS({"a", AE_IFREG, "one", NULL, 0, 0, 0},
	    {"a", AE_IFREG, "two", NULL, 0, 0, 0}), NAMES("a"), "a", 1));
}

static void
t_stage_odd_names(void)
{
	CHECK(stage_refused(MEMBERS({"", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES(""), "", 0));
	CHECK(stage_refused(MEMBERS({"a//b", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES("a//b"), "a//b", 0));
	CHECK(stage_refused(MEMBERS({"./a", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES("./a"), "./a", 0));
	CHECK(stage_refused(MEMBERS({"a/./b", AE_IFREG, "x", NULL, 0, 0, 0}),
	    NAMES("a/./b"), "a/./b", 0));
}

/* A good stream: each member under its slot, with got() told the truth. */
static void
t_stage_good(void)
{
	static const struct member m[] = {
		{"bin/run", AE_IFREG, "#!/bin/sh\necho hi\n", NULL, 0755,
		    1700000000, 123456789},
		{"empty", AE_IFREG, "", NULL, 0600, 1600000000, 1},
		{"link", AE_IFLNK, "bin/run", NULL, 0777, 1650000000, 999999999},
		{WEIRD, AE_IFREG, "weird\n", NULL, 0640, 1700000001, 500},
	};
	struct asked a = {.names = {"bin/run", "empty", "link", WEIRD},
	    .n = 4, .base = 7};
	struct sbx_err err = {0};
	struct stat st;
	struct fx f;
	char buf[64];
	ssize_t n;
	int fd;

	fx_init(&f);
	CHECK(tar_make(f.tar, m, 4) == 0);
	if ((fd = open(f.tar, O_RDONLY | O_CLOEXEC)) < 0)
		fatal("open tar");
	CHECK(sbx_tar_stage(fd, f.stage_fd, want, got, &a, &err) == 0);
	if (err.msg[0])
		printf("# %s\n", err.msg);
	close(fd);
	CHECK(a.got[0] == 1 && a.got[1] == 1 && a.got[2] == 1 &&
	    a.got[3] == 1);

	CHECK(a.e[0].type == 'f' && a.e[0].mode == 0755 && a.e[0].size == 18);
	CHECK(a.e[0].mtime == 1700000000LL * 1000000000 + 123456789);
	CHECK(fstatat(f.stage_fd, "7", &st, AT_SYMLINK_NOFOLLOW) == 0);
	CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0755);
	CHECK(st.st_size == 18);
	CHECK(st.st_mtim.tv_sec == 1700000000 &&
	    st.st_mtim.tv_nsec == 123456789);
	fd = openat(f.stage_fd, "7", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
	CHECK(n == 18 && !memcmp(buf, "#!/bin/sh\necho hi\n", 18));
	if (fd >= 0)
		close(fd);

	CHECK(a.e[1].type == 'f' && a.e[1].mode == 0600 && a.e[1].size == 0);
	CHECK(a.e[1].mtime == 1600000000LL * 1000000000 + 1);
	CHECK(fstatat(f.stage_fd, "8", &st, AT_SYMLINK_NOFOLLOW) == 0);
	CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
	CHECK(st.st_size == 0 && st.st_mtim.tv_nsec == 1);

	CHECK(a.e[2].type == 'l' && a.e[2].mode == 0777 && a.e[2].size == 7);
	CHECK(a.e[2].mtime == 1650000000LL * 1000000000 + 999999999);
	n = readlinkat(f.stage_fd, "9", buf, sizeof buf);
	CHECK(n == 7 && !memcmp(buf, "bin/run", 7));

	CHECK(a.e[3].type == 'f' && a.e[3].mode == 0640 && a.e[3].size == 6);
	CHECK(a.e[3].mtime == 1700000001LL * 1000000000 + 500);
	fd = openat(f.stage_fd, "10", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
	CHECK(n == 6 && !memcmp(buf, "weird\n", 6));
	if (fd >= 0)
		close(fd);

	/* Only the slots, flat: no member's name made it to disk. */
	CHECK(dir_count(f.stage) == 4);
	CHECK(dir_count(f.project) == 0 && dir_count(f.outside) == 0);
	CHECK(base_clean(&f));
	fx_release(&f);
}

static void
t_stage_not_tar(void)
{
	struct asked a = {.names = {"a"}, .n = 1};
	struct sbx_err err = {0};
	struct fx f;
	int fd;

	fx_init(&f);
	if ((fd = open(f.tar, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0 ||
	    write(fd, "this is not a tar stream at all\n", 32) != 32)
		fatal("write junk");
	close(fd);
	if ((fd = open(f.tar, O_RDONLY | O_CLOEXEC)) < 0)
		fatal("open tar");
	CHECK(sbx_tar_stage(fd, f.stage_fd, want, got, &a, &err) == -1);
	CHECK(err.code == SBX_EX_DATA);
	CHECK(dir_count(f.stage) == 0 && dir_count(f.project) == 0);
	close(fd);
	fx_release(&f);
}

/* A writer that pads after the archive's end (tar fills its last record,
 * a compressor adds its trailer) must be able to send it all: the stream
 * is read to its end. Here the padding is more than a pipe holds, so a
 * reader that stopped at the end marker leaves the writer with EPIPE,
 * whatever the timing. The writer's pid; *fd: the pipe's reading end. */
static pid_t
tail_writer(const char *tar, int *fd)
{
	static char zeros[256 * 1024];
	char buf[65536];
	int p[2], in, ok = 1;
	ssize_t n;
	pid_t pid;

	if (pipe(p) < 0)
		fatal("pipe");
	if ((pid = fork()) < 0)
		fatal("fork");
	if (pid == 0) {
		signal(SIGPIPE, SIG_IGN);
		close(p[0]);
		if ((in = open(tar, O_RDONLY | O_CLOEXEC)) < 0)
			_exit(2);
		while ((n = read(in, buf, sizeof buf)) > 0)
			if (write(p[1], buf, (size_t)n) != n)
				ok = 0;
		if (n < 0 || write(p[1], zeros, sizeof zeros) !=
		    (ssize_t)sizeof zeros)
			ok = 0;
		_exit(ok ? 0 : 1);
	}
	close(p[1]);
	*fd = p[0];
	return pid;
}

/* Whether the writer sent everything. */
static int
tail_sent(pid_t pid)
{
	int status = -1;

	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0;
}

static void
t_stage_tail(void)
{
	static const struct member m[] = {
		{"a", AE_IFREG, "a\n", NULL, 0644, 0, 0},
	};
	struct asked a = {.names = {"a"}, .n = 1};
	struct sbx_err err = {0};
	struct fx f;
	pid_t pid;
	int fd;

	fx_init(&f);
	CHECK(tar_make(f.tar, m, 1) == 0);
	pid = tail_writer(f.tar, &fd);
	CHECK(sbx_tar_stage(fd, f.stage_fd, want, got, &a, &err) == 0);
	if (err.msg[0])
		printf("# %s\n", err.msg);
	close(fd);
	CHECK(tail_sent(pid));
	CHECK(a.got[0] == 1);
	fx_release(&f);
}

/* --- sbx_tar_write and sbx_tar_extract -------------------------------- */

static void
put(const char *path, const char *data, int mode, long long sec, long nsec)
{
	struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t len = strlen(data);

	if (fd < 0 || write(fd, data, len) != (ssize_t)len ||
	    fchmod(fd, (mode_t)mode) < 0 || futimens(fd, ts) < 0 ||
	    close(fd) < 0)
		fatal(path);
}

/* The tree the round trip carries, made in the current directory. */
static void
tree_make(void)
{
	struct timespec ts[2] = {{1500000000, 424242424},
	    {1500000000, 424242424}};

	if (mkdir("bin", 0755) < 0 || mkdir("dir with space", 0755) < 0)
		fatal("mkdir");
	put("a.txt", "hello\n", 0644, 1600000000, 987654321);
	put("bin/run", "#!/bin/sh\nexit 0\n", 0755, 1700000000, 1);
	put("secret", "s", 0600, 1700000000, 999999999);
	put("empty", "", 0640, 1234567890, 0);
	put(WEIRD, "odd\n", 0644, 1700000002, 20);
	if (symlink("a.txt", "ln") < 0 ||
	    utimensat(AT_FDCWD, "ln", ts, AT_SYMLINK_NOFOLLOW) < 0)
		fatal("symlink");
	if (symlink("/etc/passwd", "abs") < 0)
		fatal("symlink");
}

static const char *const tree_paths[] = {
	"a.txt", "bin/run", "secret", "empty", WEIRD, "ln", "abs",
};
#define NTREE (sizeof tree_paths / sizeof tree_paths[0])

static void
manifest_of(struct sbx_manifest *m, const char *const *paths, size_t n)
{
	struct stat st;
	size_t i;

	for (i = 0; i < n; i++) {
		if (lstat(paths[i], &st) < 0)
			fatal(paths[i]);
		CHECK(sbx_fentry_stat(sbx_manifest_add(m, paths[i]), &st));
	}
	sbx_manifest_sort(m);
}

/* path under dir a and under dir b: the same type, mode, mtime, content. */
static int
same_file(const char *a, const char *b, const char *path)
{
	char pa[PATH_MAX], pb[PATH_MAX], ca[256], cb[256];
	struct stat sa, sb;
	ssize_t na, nb;
	int fa, fb;

	snprintf(pa, sizeof pa, "%s/%s", a, path);
	snprintf(pb, sizeof pb, "%s/%s", b, path);
	if (lstat(pa, &sa) < 0 || lstat(pb, &sb) < 0) {
		printf("# '%s' missing\n", pb);
		return 0;
	}
	if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
		printf("# '%s': type differs\n", path);
		return 0;
	}
	if (S_ISLNK(sa.st_mode)) {
		na = readlink(pa, ca, sizeof ca);
		nb = readlink(pb, cb, sizeof cb);
		if (na < 0 || na != nb || memcmp(ca, cb, (size_t)na)) {
			printf("# '%s': symlink target differs\n", path);
			return 0;
		}
		return 1;
	}
	if ((sa.st_mode & 07777) != (sb.st_mode & 07777)) {
		printf("# '%s': mode %o, not %o\n", path, sb.st_mode & 07777,
		    sa.st_mode & 07777);
		return 0;
	}
	if (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
	    sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec) {
		printf("# '%s': mtime %lld.%09ld, not %lld.%09ld\n", path,
		    (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec,
		    (long long)sa.st_mtim.tv_sec, sa.st_mtim.tv_nsec);
		return 0;
	}
	if ((fa = open(pa, O_RDONLY | O_CLOEXEC)) < 0)
		fatal(pa);
	if ((fb = open(pb, O_RDONLY | O_CLOEXEC)) < 0)
		fatal(pb);
	na = read(fa, ca, sizeof ca);
	nb = read(fb, cb, sizeof cb);
	close(fa);
	close(fb);
	if (na < 0 || na != nb || memcmp(ca, cb, (size_t)na)) {
		printf("# '%s': content differs\n", path);
		return 0;
	}
	return 1;
}

/* The tree written with z (through a pipe when piped) and extracted in a
 * second directory comes out the same. */
static void
roundtrip(enum sbx_compress z, int piped)
{
	static const unsigned char gz[] = {0x1f, 0x8b},
	    zst[] = {0x28, 0xb5, 0x2f, 0xfd};
	struct sbx_manifest m = {0};
	struct sbx_err err = {0};
	char src[80], dst[80], tar[80];
	unsigned char head[8] = {0};
	struct stat st;
	int fd, p[2], status;
	size_t i;
	pid_t pid;

	struct fx f;

	fx_init(&f);
	snprintf(src, sizeof src, "%s/outside", f.base);
	snprintf(dst, sizeof dst, "%s/project", f.base);
	snprintf(tar, sizeof tar, "%s", f.tar);
	if (chdir(src) < 0)
		fatal("chdir");
	tree_make();
	manifest_of(&m, tree_paths, NTREE);
	if (piped) {
		if (pipe(p) < 0 || (pid = fork()) < 0)
			fatal("pipe");
		if (pid == 0) {
			close(p[0]);
			status = sbx_tar_write(p[1], &m, z, &err);
			if (status)
				printf("# %s\n", err.msg);
			fflush(stdout);
			_exit(status ? 1 : 0);
		}
		close(p[1]);
		if (chdir(dst) < 0)
			fatal("chdir");
		CHECK(sbx_tar_extract(p[0], &err) == 0);
		if (err.msg[0])
			printf("# %s\n", err.msg);
		close(p[0]);
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0);
	} else {
		fd = open(tar, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			fatal("open tar");
		CHECK(sbx_tar_write(fd, &m, z, &err) == 0);
		if (err.msg[0])
			printf("# %s\n", err.msg);
		close(fd);
		if ((fd = open(tar, O_RDONLY | O_CLOEXEC)) < 0)
			fatal("open tar");
		CHECK(read(fd, head, sizeof head) == sizeof head);
		if (z == SBX_COMPRESS_GZIP)
			CHECK(!memcmp(head, gz, sizeof gz));
		else if (z == SBX_COMPRESS_ZSTD)
			CHECK(!memcmp(head, zst, sizeof zst));
		else
			CHECK(memcmp(head, gz, sizeof gz) &&
			    memcmp(head, zst, sizeof zst));
		if (lseek(fd, 0, SEEK_SET) < 0 || chdir(dst) < 0)
			fatal("rewind");
		CHECK(sbx_tar_extract(fd, &err) == 0);
		if (err.msg[0])
			printf("# %s\n", err.msg);
		close(fd);
	}
	for (i = 0; i < NTREE; i++)
		CHECK(same_file(src, dst, tree_paths[i]));
	/* The nanoseconds, spelled out. */
	CHECK(lstat("a.txt", &st) == 0 && st.st_mtim.tv_nsec == 987654321);
	CHECK(lstat("secret", &st) == 0 && st.st_mtim.tv_nsec == 999999999 &&
	    (st.st_mode & 07777) == 0600);
	CHECK(lstat("bin/run", &st) == 0 && st.st_mtim.tv_nsec == 1 &&
	    (st.st_mode & 07777) == 0755);
	CHECK(lstat("ln", &st) == 0 && S_ISLNK(st.st_mode));
	CHECK(base_clean(&f));
	sbx_manifest_release(&m);
	fx_release(&f);
}

static void
t_roundtrip_none(void)
{
	roundtrip(SBX_COMPRESS_NONE, 0);
}

static void
t_roundtrip_gzip(void)
{
	roundtrip(SBX_COMPRESS_GZIP, 0);
}

static void
t_roundtrip_zstd(void)
{
	roundtrip(SBX_COMPRESS_ZSTD, 0);
}

static void
t_roundtrip_pipe(void)
{
	roundtrip(SBX_COMPRESS_NONE, 1);
	roundtrip(SBX_COMPRESS_GZIP, 1);
	roundtrip(SBX_COMPRESS_ZSTD, 1);
}

/* A symlink's own mtime travels too (libarchive sets it with lutimes). */
static void
t_roundtrip_symlink_mtime(void)
{
	struct sbx_manifest m = {0};
	struct sbx_err err = {0};
	struct stat st;
	struct fx f;
	int fd;

	fx_init(&f);
	if (chdir(f.outside) < 0)
		fatal("chdir");
	tree_make();
	manifest_of(&m, NAMES("ln"));
	if ((fd = open(f.tar, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		fatal("open tar");
	CHECK(sbx_tar_write(fd, &m, SBX_COMPRESS_NONE, &err) == 0);
	if (lseek(fd, 0, SEEK_SET) < 0 || chdir(f.project) < 0)
		fatal("rewind");
	CHECK(sbx_tar_extract(fd, &err) == 0);
	close(fd);
	CHECK(lstat("ln", &st) == 0 && S_ISLNK(st.st_mode));
	CHECK(st.st_mtim.tv_sec == 1500000000 &&
	    st.st_mtim.tv_nsec == 424242424);
	sbx_manifest_release(&m);
	fx_release(&f);
}

/* A file that is not what its entry says fails the write. */
static int
write_changed(const struct sbx_manifest *m, const char *name)
{
	struct sbx_err err = {0};
	char want_msg[128];
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC), rc;

	if (fd < 0)
		fatal("/dev/null");
	rc = sbx_tar_write(fd, m, SBX_COMPRESS_NONE, &err);
	close(fd);
	snprintf(want_msg, sizeof want_msg, "'%s' changed while it was read",
	    name);
	if (rc == -1 && err.code == SBX_EX_FAIL && strstr(err.msg, want_msg))
		return 1;
	printf("# rc %d, code %d, msg: %s\n", rc, err.code, err.msg);
	return 0;
}

static void
t_write_changed(void)
{
	struct sbx_manifest m = {0};
	struct fx f;

	fx_init(&f);
	put("a", "hello\n", 0644, 1600000000, 5);
	put("b", "world\n", 0644, 1600000000, 5);
	manifest_of(&m, NAMES("a", "b"));

	/* The same size, another mtime (one nanosecond later). */
	put("b", "WORLD\n", 0644, 1600000000, 6);
	CHECK(write_changed(&m, "b"));
	/* Another size, the same mtime. */
	put("b", "world!\n", 0644, 1600000000, 5);
	CHECK(write_changed(&m, "b"));
	/* Shorter than the entry says. */
	put("a", "hell\n", 0644, 1600000000, 5);
	CHECK(write_changed(&m, "a"));
	sbx_manifest_release(&m);
	fx_release(&f);
}

static void
t_write_missing(void)
{
	struct sbx_manifest m = {0};
	struct sbx_err err = {0};
	struct fx f;
	int fd;

	fx_init(&f);
	put("a", "hello\n", 0644, 1600000000, 5);
	manifest_of(&m, NAMES("a"));
	unlink("a");
	if ((fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
		fatal("/dev/null");
	CHECK(sbx_tar_write(fd, &m, SBX_COMPRESS_NONE, &err) == -1);
	CHECK(err.code == SBX_EX_FAIL && strstr(err.msg, "'a'"));
	close(fd);
	sbx_manifest_release(&m);
	fx_release(&f);
}

/* sbx_tar_extract of the members, in project/: refused, nothing outside. */
static int
extract_refused(const struct member *m, size_t n, const char *bad)
{
	struct sbx_err err = {0};
	char evil[96];
	struct fx f;
	int fd, ok = 1;

	fx_init(&f);
	if (tar_make(f.tar, m, n) < 0) {
		fx_release(&f);
		return 0;
	}
	if ((fd = open(f.tar, O_RDONLY | O_CLOEXEC)) < 0)
		fatal("open tar");
	if (sbx_tar_extract(fd, &err) != -1 || !refused(&err, bad))
		ok = 0;
	close(fd);
	snprintf(evil, sizeof evil, "%s/evil", f.base);
	if (dir_count(f.project) != 0 || dir_count(f.outside) != 0 ||
	    dir_count(f.stage) != 0 || !base_clean(&f) || !absent(evil) ||
	    !absent("/evil") || !absent("/tmp/evil")) {
		printf("# something was written\n");
		ok = 0;
	}
	if (!ok)
		printf("# ^ while extracting member '%s'\n", bad);
	fx_release(&f);
	return ok;
}

static void
t_extract_refuses(void)
{
	char aim[64], abs[96];

	aim_init(aim, sizeof aim);
	snprintf(abs, sizeof abs, "%s/evil", aim);
	CHECK(extract_refused(MEMBERS({"../evil", AE_IFREG, "x", NULL, 0, 0,
	    0}), "../evil"));
	CHECK(extract_refused(MEMBERS({"a/../../evil", AE_IFREG, "x", NULL, 0,
	    0, 0}), "a/../../evil"));
	CHECK(extract_refused(MEMBERS({abs, AE_IFREG, "x", NULL, 0, 0, 0}),
	    abs));
	CHECK(dir_count(aim) == 0);
	sbx_rmtree(aim);
	CHECK(extract_refused(MEMBERS({"/evil", AE_IFREG, "x", NULL, 0, 0, 0}),
	    "/evil"));
	CHECK(extract_refused(MEMBERS({"dev", AE_IFCHR, NULL, NULL, 0666, 0,
	    0}), "dev"));
	CHECK(extract_refused(MEMBERS({"blk", AE_IFBLK, NULL, NULL, 0666, 0,
	    0}), "blk"));
	CHECK(extract_refused(MEMBERS({"fifo", AE_IFIFO, NULL, NULL, 0644, 0,
	    0}), "fifo"));
	CHECK(extract_refused(MEMBERS({"h", AE_IFREG, NULL, "/etc/passwd", 0,
	    0, 0}), "h"));
	CHECK(extract_refused(MEMBERS({"./a", AE_IFREG, "x", NULL, 0, 0, 0}),
	    "./a"));
	CHECK(extract_refused(MEMBERS({"", AE_IFREG, "x", NULL, 0, 0, 0}), ""));
}

/* A symlink out, then a member through it: whatever happens, nothing is
 * written where the symlink points. */
static void
t_extract_through_symlink(void)
{
	struct sbx_err err = {0};
	char target[96];
	struct stat st;
	struct fx f;
	int fd;

	fx_init(&f);
	snprintf(target, sizeof target, "%s/outside", f.base);
	CHECK(tar_make(f.tar, MEMBERS({"l", AE_IFLNK, target, NULL, 0, 0, 0},
	    {"l/x", AE_IFREG, "pwned", NULL, 0, 0, 0})) == 0);
	if ((fd = open(f.tar, O_RDONLY | O_CLOEXEC)) < 0)
		fatal("open tar");
	if (sbx_tar_extract(fd, &err) < 0)
		printf("# (refused: %s)\n", err.msg);
	close(fd);
	CHECK(dir_count(f.outside) == 0);
	CHECK(base_clean(&f));
	/* Either refused, or the link was replaced by a directory. */
	CHECK(lstat("l", &st) == 0);
	CHECK(!S_ISLNK(st.st_mode) || err.code != 0);
	fx_release(&f);
}

/* A pre-existing symlink in the way of a member is not followed. */
static void
t_extract_existing_symlink(void)
{
	struct sbx_err err = {0};
	char target[96];
	struct fx f;
	int fd;

	fx_init(&f);
	snprintf(target, sizeof target, "%s/outside/victim", f.base);
	if (symlink(target, "a") < 0 || symlink("../outside", "d") < 0)
		fatal("symlink");
	CHECK(tar_make(f.tar, MEMBERS({"a", AE_IFREG, "pwned", NULL, 0, 0, 0},
	    {"d/x", AE_IFREG, "pwned", NULL, 0, 0, 0})) == 0);
	if ((fd = open(f.tar, O_RDONLY | O_CLOEXEC)) < 0)
		fatal("open tar");
	if (sbx_tar_extract(fd, &err) < 0)
		printf("# (refused: %s)\n", err.msg);
	close(fd);
	CHECK(dir_count(f.outside) == 0);
	CHECK(base_clean(&f));
	fx_release(&f);
}

static void
t_extract_not_tar(void)
{
	struct sbx_err err = {0};
	struct fx f;
	int fd;

	fx_init(&f);
	if ((fd = open(f.tar, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0 ||
	    write(fd, "this is not a tar stream at all\n", 32) != 32)
		fatal("write junk");
	close(fd);
	if ((fd = open(f.tar, O_RDONLY | O_CLOEXEC)) < 0)
		fatal("open tar");
	CHECK(sbx_tar_extract(fd, &err) == -1);
	CHECK(err.code == SBX_EX_DATA);
	CHECK(dir_count(f.project) == 0);
	close(fd);
	fx_release(&f);
}

static void
t_extract_tail(void)
{
	static const struct member m[] = {
		{"a", AE_IFREG, "a\n", NULL, 0644, 0, 0},
	};
	struct sbx_err err = {0};
	struct fx f;
	pid_t pid;
	int fd;

	fx_init(&f);
	CHECK(tar_make(f.tar, m, 1) == 0);
	pid = tail_writer(f.tar, &fd);
	CHECK(sbx_tar_extract(fd, &err) == 0);
	if (err.msg[0])
		printf("# %s\n", err.msg);
	close(fd);
	CHECK(tail_sent(pid));
	CHECK(dir_count(f.project) == 1);
	fx_release(&f);
}

/* --- sbx_path_valid --------------------------------------------------- */

static char *
repeat(char c, size_t n)
{
	char *s = sbx_xmalloc(n + 1);

	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void
t_path_valid(void)
{
	CHECK(sbx_path_valid("a"));
	CHECK(sbx_path_valid("a/b/c"));
	CHECK(sbx_path_valid("a b"));
	CHECK(sbx_path_valid(".a"));
	CHECK(sbx_path_valid("..a"));
	CHECK(sbx_path_valid("a.."));
	CHECK(sbx_path_valid("..."));
	CHECK(sbx_path_valid("a/.git/b"));
	CHECK(sbx_path_valid("new\nline"));
	CHECK(sbx_path_valid("\xc3\xa9\xe2\x82\xac"));
	CHECK(sbx_path_valid("a\\..\\b"));
	CHECK(sbx_path_valid(WEIRD));

	CHECK(!sbx_path_valid(""));
	CHECK(!sbx_path_valid("/"));
	CHECK(!sbx_path_valid("/a"));
	CHECK(!sbx_path_valid("a/"));
	CHECK(!sbx_path_valid("a//b"));
	CHECK(!sbx_path_valid("."));
	CHECK(!sbx_path_valid("./a"));
	CHECK(!sbx_path_valid("a/."));
	CHECK(!sbx_path_valid("a/./b"));
	CHECK(!sbx_path_valid(".."));
	CHECK(!sbx_path_valid("../a"));
	CHECK(!sbx_path_valid("a/.."));
	CHECK(!sbx_path_valid("a/../b"));
	CHECK(!sbx_path_valid("a/../../evil"));
}

static void
t_path_valid_lengths(void)
{
	char *c255 = repeat('c', 255), *c256 = repeat('c', 256), *p;
	size_t i;

	CHECK(sbx_path_valid(c255));
	CHECK(!sbx_path_valid(c256));
	/* 4095 bytes of 200-byte parts: the longest allowed. */
	p = repeat('p', 4095);
	for (i = 200; i < 4095; i += 201)
		p[i] = '/';
	CHECK(sbx_path_valid(p));
	free(p);
	p = repeat('p', 4096);
	for (i = 200; i < 4096; i += 201)
		p[i] = '/';
	CHECK(!sbx_path_valid(p));
	free(p);
	p = sbx_xasprintf("a/%s/b", c256);
	CHECK(!sbx_path_valid(p));
	free(p);
	free(c255);
	free(c256);
}

static const struct tap_test tests[] = {
	{"sbx_tar_stage refuses absolute names", t_stage_absolute},
	{"sbx_tar_stage refuses names with '..'", t_stage_dotdot},
	{"sbx_tar_stage refuses a member through a symlink of the stream",
	    t_stage_through_symlink},
	{"sbx_tar_stage refuses hard links", t_stage_hardlink},
	{"sbx_tar_stage refuses devices, FIFOs and directories",
	    t_stage_special},
	{"sbx_tar_stage refuses a member not asked for", t_stage_not_asked},
	{"sbx_tar_stage refuses a member want() refuses the second time",
	    t_stage_twice},
	{"sbx_tar_stage refuses '', 'a//b', './a' and 'a/./b'",
	    t_stage_odd_names},
	{"sbx_tar_stage stages files and symlinks under their slots",
	    t_stage_good},
	{"sbx_tar_stage fails on a stream that is not tar (data)",
	    t_stage_not_tar},
	{"sbx_tar_stage reads the padding after the archive, so its writer "
	    "never meets a closed pipe", t_stage_tail},
	{"sbx_tar_write + sbx_tar_extract round trip, uncompressed",
	    t_roundtrip_none},
	{"sbx_tar_write + sbx_tar_extract round trip, gzip", t_roundtrip_gzip},
	{"sbx_tar_write + sbx_tar_extract round trip, zstd", t_roundtrip_zstd},
	{"sbx_tar_write + sbx_tar_extract round trip through a pipe",
	    t_roundtrip_pipe},
	{"sbx_tar_extract keeps a symlink's own nanosecond mtime",
	    t_roundtrip_symlink_mtime},
	{"sbx_tar_write fails when a file changed since its stat",
	    t_write_changed},
	{"sbx_tar_write fails when a file is gone", t_write_missing},
	{"sbx_tar_extract refuses '..', absolute names, devices, hard links",
	    t_extract_refuses},
	{"sbx_tar_extract writes nothing through a symlink of the stream",
	    t_extract_through_symlink},
	{"sbx_tar_extract does not follow a symlink already on disk",
	    t_extract_existing_symlink},
	{"sbx_tar_extract fails on a stream that is not tar (data)",
	    t_extract_not_tar},
	{"sbx_tar_extract reads the padding after the archive, so its writer "
	    "never meets a closed pipe", t_extract_tail},
	{"sbx_path_valid takes plain relative paths, refuses the rest",
	    t_path_valid},
	{"sbx_path_valid limits a part to 255 and a path to 4095 bytes",
	    t_path_valid_lengths},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
