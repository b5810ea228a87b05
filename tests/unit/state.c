/* state.c - TAP unit tests of the state file: open, read, save, segments */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"
#include "tap.h"

/* Each test works in a directory of its own under one mkdtemp one. */
static char top[] = "/tmp/sbx-unit-state.XXXXXX";

static char *
path_in(const char *dir, const char *name)
{
	return sbx_xasprintf("%s/%s", dir, name);
}

static void
put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		printf("# cannot write %s\n", path);
		fails++;
	}
	if (fd >= 0)
		close(fd);
}

/* The whole file, or NULL. */
static char *
get(const char *path)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char chunk[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		sbx_buf_add(&b, chunk, (size_t)n);
	close(fd);
	sbx_buf_add(&b, "", 0);
	return b.data ? b.data : sbx_xstrdup("");
}

static int
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The names in dir, sorted, joined by spaces. */
static char *
listing(const char *dir)
{
	struct dirent **ents;
	struct sbx_buf b = SBX_BUF_INIT;
	int n, i;

	n = scandir(dir, &ents, NULL, alphasort);
	for (i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name,
		    "..")) {
			if (b.len)
				sbx_buf_add(&b, " ", 1);
			sbx_buf_add(&b, ents[i]->d_name,
			    strlen(ents[i]->d_name));
		}
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	sbx_buf_add(&b, "", 0);
	return b.data ? b.data : sbx_xstrdup("");
}

/* A fresh directory for one test. */
static char *
test_dir(const char *name)
{
	char *d = path_in(top, name);

	if (mkdir(d, 0700) < 0) {
		printf("# cannot create %s\n", d);
		fails++;
	}
	return d;
}

/* "YYYY-MM-DDTHH:MM:SSZ" */
static int
rfc3339z(const char *s)
{
	static const char pat[] = "dddd-dd-ddTdd:dd:ddZ";
	size_t i;

	if (!s || strlen(s) != sizeof pat - 1)
		return 0;
	for (i = 0; pat[i]; i++)
		if (pat[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != pat[i])
			return 0;
	return 1;
}

/* A state as sbx-create makes it for a host sandbox with one label. */
static json_t *
sample_root(void)
{
	json_t *ref = json_pack("{ssssss}", "backend", "local", "id",
	    "0123456789ab", "dir", "/nonexistent/0123456789ab");
	json_t *labels = json_pack("{ss}", "team", "a");
	struct sbx_spec spec = {.image = "host", .workdir = "/workspace",
	    .timeout = 600, .labels = labels};
	json_t *root = sbx_state_new_root(ref, &spec);

	json_decref(ref);
	json_decref(labels);
	return root;
}

static const char good_state[] =
    "{\"schema\": 1, \"ref\": {\"backend\": \"local\", \"id\": "
    "\"0123456789ab\"}, \"status\": \"running\", "
    "\"segments\": [[1000, null]], "
    "\"x-future\": {\"a\": [1, \"b\", null], \"n\": 2.5}, "
    "\"zzz\": true}\n";

static void
t_open_missing(void)
{
	char *d = test_dir("missing"), *p = path_in(d, "a/b/state.json");
	char *parent = path_in(d, "a/b");
	struct sbx_state st;
	struct sbx_err err = {0};

	CHECK(sbx_state_open(&st, p, &err) == 0);
	CHECK(json_is_object(st.root));
	CHECK(json_object_size(st.root) == 0);
	CHECK(st.lockfd >= 0);
	CHECK(st.path && !strcmp(st.path, p));
	CHECK(exists(parent));
	CHECK(!exists(p));
	sbx_state_release(&st);
	CHECK(!exists(p));
	free(parent);
	free(p);
	free(d);
}

static void
t_lock(void)
{
	char *d = test_dir("lock"), *p = path_in(d, "state.json");
	char *lock = path_in(d, "state.json.lock");
	struct sbx_state st;
	struct sbx_err err = {0};
	int fd;

	CHECK(sbx_state_open(&st, p, &err) == 0);
	CHECK(exists(lock));
	fd = open(lock, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(flock(fd, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK);
	sbx_state_release(&st);
	CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0);
	if (fd >= 0)
		close(fd);
	free(lock);
	free(p);
	free(d);
}

static void
t_save(void)
{
	char *d = test_dir("save"), *p = path_in(d, "state.json"), *text;
	struct sbx_state st;
	struct sbx_err err = {0};
	json_t *back;
	long long before, after, at;
	char ts[32];
	struct stat sb;

	CHECK(sbx_state_open(&st, p, &err) == 0);
	json_decref(st.root);
	st.root = sample_root();
	json_object_set_new(st.root, "updated_at",
	    json_string("2000-01-01T00:00:00Z"));
	json_object_set_new(st.root, "updated_at_epoch", json_integer(946684800));
	before = sbx_now();
	CHECK(sbx_state_save(&st, &err) == 0);
	after = sbx_now();
	sbx_state_release(&st);

	back = json_load_file(p, 0, NULL);
	CHECK(json_is_object(back));
	CHECK(sbx_json_int(back, "schema", 0) == 1);
	CHECK(rfc3339z(sbx_json_str(back, "updated_at")));
	at = sbx_json_int(back, "updated_at_epoch", 0);
	CHECK(at >= before && at <= after);
	sbx_time_fmt(at, ts, sizeof ts);
	CHECK(sbx_json_str(back, "updated_at") &&
	    !strcmp(sbx_json_str(back, "updated_at"), ts));
	CHECK(sbx_json_str(json_object_get(back, "ref"), "id") &&
	    !strcmp(sbx_json_str(json_object_get(back, "ref"), "id"),
	    "0123456789ab"));
	text = get(p);
	CHECK(text && text[0] && text[strlen(text) - 1] == '\n');
	CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	free(text);
	json_decref(back);
	free(p);
	free(d);
}

/* sbx_time_fmt does its own arithmetic (gmtime_r reads the time zone):
 * the same text as strftime on gmtime_r's, over leap days, centuries
 * and before 1970. */
static void
t_time_fmt(void)
{
	static const long long at[] = {0, -1, 59, 86399, 86400, 951782399,
	    951782400, 951868800, 4107542399LL, 4107542400LL, 1796676212,
	    -86401, -2208988800LL, 253402300799LL};
	char mine[32], want[32];
	struct tm tm;
	time_t t;
	size_t i;
	long long e;

	for (i = 0; i < sizeof at / sizeof at[0]; i++) {
		t = (time_t)at[i];
		sbx_time_fmt(at[i], mine, sizeof mine);
		strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%SZ",
		    gmtime_r(&t, &tm));
		CHECK(!strcmp(mine, want));
	}
	for (e = -400LL * 366 * 86400; e < 500LL * 366 * 86400;
	    e += 86400 * 7 + 3607) {
		t = (time_t)e;
		sbx_time_fmt(e, mine, sizeof mine);
		strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%SZ",
		    gmtime_r(&t, &tm));
		if (strcmp(mine, want)) {
			CHECK(!strcmp(mine, want));
			break;
		}
	}
}

static void
t_save_no_temp(void)
{
	char *d = test_dir("notemp"), *p = path_in(d, "state.json"), *ls;
	struct sbx_state st;
	struct sbx_err err = {0};

	CHECK(sbx_state_open(&st, p, &err) == 0);
	json_decref(st.root);
	st.root = sample_root();
	CHECK(sbx_state_save(&st, &err) == 0);
	CHECK(sbx_state_save(&st, &err) == 0);
	sbx_state_release(&st);
	ls = listing(d);
	CHECK(!strcmp(ls, "state.json state.json.lock"));
	if (strcmp(ls, "state.json state.json.lock"))
		printf("# directory holds: %s\n", ls);
	free(ls);
	free(p);
	free(d);
}

/* A killed writer's temp is looked for only when the lock file says one
 * may be there: the open of one state file among thousands reads no
 * directory, and the saves leave the lock file unmarked. */
static void
t_temps_by_mark(void)
{
	char *d = test_dir("mark"), *p = path_in(d, "state.json");
	char *lock = path_in(d, "state.json.lock");
	char *tmp = path_in(d, "state.json.tmpAbC123");
	struct sbx_state st;
	struct sbx_err err = {0};
	struct stat sb;

	CHECK(sbx_state_open(&st, p, &err) == 0);
	json_decref(st.root);
	st.root = sample_root();
	CHECK(sbx_state_save(&st, &err) == 0);
	CHECK(fstat(st.lockfd, &sb) == 0 && sb.st_size == 0);
	sbx_state_release(&st);
	/* Unmarked: a temp file there is no writer's of ours. */
	put(tmp, "x");
	CHECK(sbx_state_open(&st, p, &err) == 0);
	sbx_state_release(&st);
	CHECK(exists(tmp));
	/* Marked (a writer killed before its rename): removed, unmarked. */
	put(lock, "w");
	CHECK(sbx_state_open(&st, p, &err) == 0);
	CHECK(!exists(tmp));
	CHECK(fstat(st.lockfd, &sb) == 0 && sb.st_size == 0);
	sbx_state_release(&st);
	free(tmp);
	free(lock);
	free(p);
	free(d);
}

static void
t_unknown_fields(void)
{
	char *d = test_dir("unknown"), *p = path_in(d, "state.json");
	struct sbx_state st;
	struct sbx_err err = {0};
	json_t *orig = json_loads(good_state, 0, NULL), *back;

	put(p, good_state);
	CHECK(sbx_state_open(&st, p, &err) == 0);
	if (st.root)
		sbx_state_set_status(st.root, "killed");
	CHECK(st.root && sbx_state_save(&st, &err) == 0);
	sbx_state_release(&st);
	back = json_load_file(p, 0, NULL);
	CHECK(json_is_object(back));
	CHECK(json_equal(json_object_get(back, "x-future"),
	    json_object_get(orig, "x-future")));
	CHECK(json_is_true(json_object_get(back, "zzz")));
	CHECK(json_equal(json_object_get(back, "ref"), json_object_get(orig,
	    "ref")));
	CHECK(sbx_json_str(back, "status") && !strcmp(sbx_json_str(back,
	    "status"), "killed"));
	json_decref(back);
	json_decref(orig);
	free(p);
	free(d);
}

/* open and read fail with SBX_EX_DATA and leave the file as it was. */
static void
refuse(const char *dir, const char *name, const char *text)
{
	char *p = path_in(dir, name), *after;
	struct sbx_state st;
	struct sbx_err err = {0};

	put(p, text);
	err.code = 0;
	if (sbx_state_open(&st, p, &err) != -1 || err.code != SBX_EX_DATA ||
	    !err.msg[0]) {
		printf("# sbx_state_open accepted %s (code %d)\n", name,
		    err.code);
		fails++;
	}
	CHECK(st.root == NULL);
	memset(&err, 0, sizeof err);
	if (sbx_state_read(&st, p, &err) != -1 || err.code != SBX_EX_DATA) {
		printf("# sbx_state_read accepted %s (code %d)\n", name,
		    err.code);
		fails++;
	}
	after = get(p);
	if (!after || strcmp(after, text)) {
		printf("# %s was changed\n", name);
		fails++;
	}
	free(after);
	free(p);
}

static void
t_malformed(void)
{
	char *d = test_dir("malformed"), *ls;

	refuse(d, "truncated.json", "{\"schema\": 1, \"ref\": {");
	refuse(d, "garbage.json", "not json at all\n");
	refuse(d, "array.json", "[1, 2]\n");
	refuse(d, "dupkeys.json", "{\"schema\": 1, \"schema\": 1, "
	    "\"ref\": {\"backend\": \"local\", \"id\": \"x\"}}\n");
	ls = listing(d);
	/* Nothing but the files and their locks: no temp file. */
	CHECK(!strstr(ls, "tmp"));
	free(ls);
	free(d);
}

/* An empty state file, what a crash leaves of one written without fsync:
 * a writer takes it for none (an empty root), a reader refuses it (6,
 * "is empty"), neither changes it. */
static void
t_empty(void)
{
	char *d = test_dir("empty"), *p = path_in(d, "empty.json"), *after;
	struct sbx_state st;
	struct sbx_err err = {0};

	put(p, "");
	CHECK(sbx_state_open(&st, p, &err) == 0);
	CHECK(json_is_object(st.root) && json_object_size(st.root) == 0);
	sbx_state_release(&st);
	memset(&err, 0, sizeof err);
	CHECK(sbx_state_read(&st, p, &err) == -1);
	CHECK(err.code == SBX_EX_DATA && strstr(err.msg, "is empty"));
	after = get(p);
	CHECK(after && !*after);
	free(after);
	free(p);
	free(d);
}

static void
t_wrong_schema(void)
{
	char *d = test_dir("schema");

	refuse(d, "v2.json", "{\"schema\": 2, \"ref\": {\"backend\": "
	    "\"local\", \"id\": \"x\"}}\n");
	refuse(d, "noref.json", "{\"schema\": 1}\n");
	refuse(d, "noschema.json", "{\"ref\": {\"backend\": \"local\", "
	    "\"id\": \"x\"}}\n");
	refuse(d, "strschema.json", "{\"schema\": \"1\", \"ref\": "
	    "{\"backend\": \"local\", \"id\": \"x\"}}\n");
	refuse(d, "refstr.json", "{\"schema\": 1, \"ref\": \"x\"}\n");
	free(d);
}

static void
t_read(void)
{
	char *d = test_dir("read"), *p = path_in(d, "state.json");
	char *lock = path_in(d, "state.json.lock");
	struct sbx_state st;
	struct sbx_err err = {0};

	CHECK(sbx_state_read(&st, p, &err) == -1);
	CHECK(err.code == SBX_EX_NOSANDBOX);
	put(p, good_state);
	memset(&err, 0, sizeof err);
	CHECK(sbx_state_read(&st, p, &err) == 0);
	CHECK(st.lockfd == -1);
	CHECK(json_is_true(json_object_get(st.root, "zzz")));
	sbx_state_release(&st);
	CHECK(!exists(lock));
	free(lock);
	free(p);
	free(d);
}

static void
t_new_root(void)
{
	json_t *root = sample_root(), *seg;
	static const char *const keys[] = {"schema", "ref", "status",
	    "template", "workdir", "timeout", "labels", "created_at",
	    "created_at_epoch", "updated_at", "updated_at_epoch", "segments",
	    "accrued_cost", "cost_alerted", "sync"};
	size_t i;

	for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!json_object_get(root, keys[i])) {
			printf("# no \"%s\"\n", keys[i]);
			fails++;
		}
	CHECK(sbx_json_int(root, "schema", 0) == SBX_STATE_SCHEMA);
	CHECK(!strcmp(sbx_json_str(root, "status"), "running"));
	CHECK(!strcmp(sbx_json_str(root, "template"), "host"));
	CHECK(sbx_json_int(root, "timeout", 0) == 600);
	CHECK(!strcmp(sbx_json_str(root, "workdir"), "/workspace"));
	CHECK(!strcmp(sbx_json_str(json_object_get(root, "labels"), "team"),
	    "a"));
	CHECK(!strcmp(sbx_json_str(json_object_get(root, "ref"), "id"),
	    "0123456789ab"));
	CHECK(rfc3339z(sbx_json_str(root, "created_at")));
	seg = json_object_get(root, "segments");
	CHECK(json_array_size(seg) == 1);
	CHECK(json_is_integer(json_array_get(json_array_get(seg, 0), 0)));
	CHECK(json_is_null(json_array_get(json_array_get(seg, 0), 1)));
	json_decref(root);
}

static json_t *
last_seg(json_t *root)
{
	json_t *segs = json_object_get(root, "segments");

	return json_array_get(segs, json_array_size(segs) - 1);
}

static void
t_status_closes(void)
{
	json_t *root = sample_root(), *last;
	long long start;

	start = json_integer_value(json_array_get(last_seg(root), 0));
	sbx_state_set_status(root, "stopped");
	CHECK(!strcmp(sbx_json_str(root, "status"), "stopped"));
	CHECK(json_array_size(json_object_get(root, "segments")) == 1);
	last = last_seg(root);
	CHECK(json_is_integer(json_array_get(last, 1)));
	CHECK(json_integer_value(json_array_get(last, 1)) >= start);
	json_decref(root);
}

static void
t_status_reopens(void)
{
	json_t *root = sample_root(), *segs, *end;

	sbx_state_set_status(root, "paused");
	sbx_state_set_status(root, "running");
	segs = json_object_get(root, "segments");
	CHECK(json_array_size(segs) == 2);
	CHECK(json_is_integer(json_array_get(last_seg(root), 0)));
	CHECK(json_is_null(json_array_get(last_seg(root), 1)));
	/* Already running: no second open segment. */
	sbx_state_set_status(root, "running");
	CHECK(json_array_size(segs) == 2);
	sbx_state_set_status(root, "killed");
	CHECK(json_is_integer(json_array_get(last_seg(root), 1)));
	/* Already closed: the end stays. */
	json_array_set_new(last_seg(root), 1, json_integer(12345));
	sbx_state_set_status(root, "killed");
	end = json_array_get(last_seg(root), 1);
	CHECK(json_array_size(segs) == 2);
	CHECK(json_is_integer(end) && json_integer_value(end) == 12345);
	CHECK(!strcmp(sbx_json_str(root, "status"), "killed"));
	json_decref(root);
}

static void
t_status_no_segments(void)
{
	json_t *a = json_object(), *b = json_object();

	sbx_state_set_status(a, "running");
	CHECK(json_array_size(json_object_get(a, "segments")) == 1);
	CHECK(json_is_null(json_array_get(last_seg(a), 1)));
	sbx_state_set_status(b, "killed");
	CHECK(json_is_array(json_object_get(b, "segments")));
	CHECK(json_array_size(json_object_get(b, "segments")) == 0);
	CHECK(!strcmp(sbx_json_str(b, "status"), "killed"));
	json_decref(a);
	json_decref(b);
}

/* A directory that cannot exist: its parent is a regular file. */
static void
t_open_unwritable(void)
{
	char *d = test_dir("unwritable"), *f = path_in(d, "file");
	char *p = path_in(d, "file/sub/state.json"), *ls;
	struct sbx_state st;
	struct sbx_err err = {0};

	put(f, "x");
	CHECK(sbx_state_open(&st, p, &err) == -1);
	CHECK(err.code == SBX_EX_FAIL);
	CHECK(err.msg[0]);
	ls = listing(d);
	CHECK(!strcmp(ls, "file"));
	free(ls);
	free(p);
	free(f);
	free(d);
}

static void
t_save_unwritable(void)
{
	char *d = test_dir("saveunwritable"), *f = path_in(d, "file");
	char *p = path_in(d, "state.json"), *ls;
	struct sbx_state st;
	struct sbx_err err = {0};

	put(f, "x");
	CHECK(sbx_state_open(&st, p, &err) == 0);
	json_decref(st.root);
	st.root = sample_root();
	free(st.path);
	st.path = path_in(d, "file/sub/state.json");
	CHECK(sbx_state_save(&st, &err) == -1);
	CHECK(err.code == SBX_EX_FAIL);
	CHECK(err.msg[0]);
	sbx_state_release(&st);
	ls = listing(d);
	CHECK(!strcmp(ls, "file state.json.lock"));
	if (strcmp(ls, "file state.json.lock"))
		printf("# directory holds: %s\n", ls);
	free(ls);
	free(p);
	free(f);
	free(d);
}

/* The temp file is written, but the rename onto a directory fails. */
static void
t_save_rename_fails(void)
{
	char *d = test_dir("renamefails"), *p = path_in(d, "state.json");
	char *ls;
	struct sbx_state st;
	struct sbx_err err = {0};
	struct stat sb;

	CHECK(sbx_state_open(&st, p, &err) == 0);
	json_decref(st.root);
	st.root = sample_root();
	CHECK(mkdir(p, 0700) == 0);
	CHECK(sbx_state_save(&st, &err) == -1);
	CHECK(err.code == SBX_EX_FAIL);
	sbx_state_release(&st);
	CHECK(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
	ls = listing(d);
	CHECK(!strcmp(ls, "state.json state.json.lock"));
	if (strcmp(ls, "state.json state.json.lock"))
		printf("# directory holds: %s\n", ls);
	free(ls);
	free(p);
	free(d);
}

/* A second opener in a child, given secs to get the lock: 0 when it got
 * it, SIGALRM when it was still waiting. */
static int
open_in_child(const char *p, unsigned secs)
{
	struct sbx_state st;
	struct sbx_err err = {0};
	int status;
	pid_t pid;

	fflush(NULL);
	if ((pid = fork()) == 0) {
		alarm(secs);
		_exit(sbx_state_open(&st, p, &err) == 0 ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
}

/* The lock is exclusive: a shared lock is refused too, and another tool
 * opening the state waits until it is released. */
static void
t_lock_excludes_shared(void)
{
	char *d = test_dir("lockshared"), *p = path_in(d, "state.json");
	char *lock = path_in(d, "state.json.lock");
	struct sbx_state st;
	struct sbx_err err = {0};
	int fd;

	CHECK(sbx_state_open(&st, p, &err) == 0);
	fd = open(lock, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(flock(fd, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK);
	CHECK(open_in_child(p, 1) == SIGALRM);
	sbx_state_release(&st);
	CHECK(flock(fd, LOCK_SH | LOCK_NB) == 0);
	CHECK(flock(fd, LOCK_UN) == 0);
	CHECK(open_in_child(p, 10) == 0);
	if (fd >= 0)
		close(fd);
	free(lock);
	free(p);
	free(d);
}

/* Whether pid waits in /proc/locks (a "->" line of its own). */
static int
waits_for_lock(pid_t pid)
{
	char line[256], want[32];
	FILE *f = fopen("/proc/locks", "re");
	int found = 0;

	if (!f)
		return 0;
	snprintf(want, sizeof want, " %ld ", (long)pid);
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, "->") && strstr(line, want);
	fclose(f);
	return found;
}

/* A release that leaves no state removes the lock file; an opener that
 * was waiting on that file's inode must not hold a lock that a third
 * opener, who makes the file anew, does not see. */
static void
t_lock_removed_while_waiting(void)
{
	char *d = test_dir("lockgone"), *p = path_in(d, "state.json");
	struct sbx_state st, st2;
	struct sbx_err err = {0};
	int got[2], done[2], i;
	char c = 0;
	pid_t pid;

	CHECK(pipe(got) == 0 && pipe(done) == 0);
	CHECK(sbx_state_open(&st, p, &err) == 0);
	fflush(NULL);
	if ((pid = fork()) == 0) {
		alarm(20);
		/* The lock is the open file's: fork shared ours; drop it. */
		close(st.lockfd);
		close(got[0]);
		close(done[1]);
		if (sbx_state_open(&st2, p, &err) < 0)
			_exit(1);
		(void)!write(got[1], "x", 1);
		(void)!read(done[0], &c, 1);
		_exit(0);
	}
	CHECK(pid > 0);
	close(got[1]);
	close(done[0]);
	for (i = 0; i < 2000 && !waits_for_lock(pid); i++)
		usleep(5000);
	CHECK(waits_for_lock(pid));
	sbx_state_release(&st); /* no state file: the lock file goes */
	CHECK(read(got[0], &c, 1) == 1);
	/* The child holds the lock now: a third opener waits. */
	CHECK(open_in_child(p, 1) == SIGALRM);
	(void)!write(done[1], "x", 1);
	CHECK(waitpid(pid, &i, 0) == pid && WIFEXITED(i) &&
	    WEXITSTATUS(i) == 0);
	close(got[0]);
	close(done[1]);
	free(p);
	free(d);
}

/* Each save is a new file renamed over the old: a new inode every time,
 * and a reader that opened the old one still reads it whole. */
static void
t_save_new_inode(void)
{
	char *d = test_dir("inode"), *p = path_in(d, "state.json"), *before;
	struct sbx_state st;
	struct sbx_err err = {0};
	struct stat old, now;
	char buf[65536];
	ssize_t n;
	int i, fd;

	CHECK(sbx_state_open(&st, p, &err) == 0);
	json_decref(st.root);
	st.root = sample_root();
	CHECK(sbx_state_save(&st, &err) == 0);
	for (i = 0; i < 5; i++) {
		before = get(p);
		/* The open file keeps its inode from being reused. */
		fd = open(p, O_RDONLY | O_CLOEXEC);
		CHECK(fd >= 0 && fstat(fd, &old) == 0);
		json_object_set_new(st.root, "x-round", json_integer(i));
		CHECK(sbx_state_save(&st, &err) == 0);
		CHECK(stat(p, &now) == 0);
		CHECK(now.st_ino != old.st_ino);
		n = read(fd, buf, sizeof buf - 1);
		CHECK(before && n == (ssize_t)strlen(before));
		buf[n > 0 ? n : 0] = '\0';
		CHECK(before && !strcmp(buf, before));
		free(before);
		if (fd >= 0)
			close(fd);
	}
	sbx_state_release(&st);
	free(p);
	free(d);
}

/* A reader in another process, reading the state over and over while it
 * is saved 300 times, never sees a missing, empty or partial file. The
 * state is large, so an in-place write would show halfway. */
static void
t_save_reader_sees_whole(void)
{
	char *d = test_dir("reader"), *p = path_in(d, "state.json");
	char *go = path_in(d, "go"), *big = sbx_xmalloc(256 * 1024 + 1);
	struct sbx_state st, rd;
	struct sbx_err err = {0};
	int i, status, bad = 0, reads = 0;
	pid_t pid;

	memset(big, 'x', 256 * 1024);
	big[256 * 1024] = '\0';
	CHECK(sbx_state_open(&st, p, &err) == 0);
	json_decref(st.root);
	st.root = sample_root();
	json_object_set_new(st.root, "x-big", json_string(big));
	st.lazy = 1; /* no fsync: many saves, quickly */
	CHECK(sbx_state_save(&st, &err) == 0);
	fflush(NULL);
	if ((pid = fork()) == 0) {
		/* Until the parent is done: every read a whole state. */
		while (!exists(go) || reads < 10) {
			if (sbx_state_read(&rd, p, &err) < 0 ||
			    strlen(sbx_json_str(rd.root, "x-big") ?
			    sbx_json_str(rd.root, "x-big") : "") != 256 * 1024) {
				if (bad++ < 3)
					printf("# read %d: %s\n", reads,
					    err.msg);
			}
			if (rd.root)
				sbx_state_release(&rd);
			reads++;
		}
		if (bad)
			printf("# %d of %d reads were not a whole state\n",
			    bad, reads);
		fflush(stdout);
		_exit(bad ? 1 : 0);
	}
	for (i = 0; i < 300; i++) {
		json_object_set_new(st.root, "x-round", json_integer(i));
		CHECK(sbx_state_save(&st, &err) == 0);
	}
	put(go, "");
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	sbx_state_release(&st);
	free(big);
	free(go);
	free(p);
	free(d);
}

static const struct tap_test tests[] = {
	{"sbx_state_open of a missing file gives an empty object and makes "
	    "the parent directories", t_open_missing},
	{"sbx_state_open holds an exclusive flock on FILE.lock until release",
	    t_lock},
	{"the lock refuses a shared lock, and a second opener waits for it",
	    t_lock_excludes_shared},
	{"a lock file removed while an opener waited on it: the next opener "
	    "still waits for that one", t_lock_removed_while_waiting},
	{"sbx_state_save makes a new inode each time; an open reader keeps "
	    "the old file whole", t_save_new_inode},
	{"a reader in another process never sees a half-written state",
	    t_save_reader_sees_whole},
	{"sbx_state_save writes valid JSON, mode 0600, with a fresh "
	    "updated_at", t_save},
	{"sbx_state_save leaves no temp file behind", t_save_no_temp},
	{"sbx_state_open removes temp files only when a writer marked the "
	    "lock file, and unmarks it", t_temps_by_mark},
	{"unknown fields survive sbx_state_open and sbx_state_save",
	    t_unknown_fields},
	{"an empty state file is none to a writer, refused (6) by a reader, and stays unchanged",
	    t_empty},
	{"a malformed state file fails with code 6 and stays unchanged",
	    t_malformed},
	{"a state file with the wrong schema fails with code 6 and stays "
	    "unchanged", t_wrong_schema},
	{"sbx_state_read: missing is code 3, and it takes no lock", t_read},
	{"sbx_time_fmt writes what strftime does of gmtime_r", t_time_fmt},
	{"sbx_state_new_root has every documented field", t_new_root},
	{"sbx_state_set_status closes the running segment", t_status_closes},
	{"sbx_state_set_status opens one new segment on running",
	    t_status_reopens},
	{"sbx_state_set_status makes segments when there are none",
	    t_status_no_segments},
	{"sbx_state_open under a regular file fails with code 1, creating "
	    "nothing", t_open_unwritable},
	{"sbx_state_save into a directory that cannot exist fails, leaving "
	    "no temp file", t_save_unwritable},
	{"sbx_state_save whose rename fails leaves no temp file",
	    t_save_rename_fails},
};

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int
main(void)
{
	int bad;

	if (!mkdtemp(top)) {
		printf("1..0 # cannot create a temporary directory\n");
		return 1;
	}
	bad = tap_run(tests, sizeof tests / sizeof tests[0]);
	nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return bad;
}
