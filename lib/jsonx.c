/* jsonx.c - thin helpers over jansson, times, mkdir -p and rm -rf, atomic
 * file writes */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

json_t *
sbx_json_load_object(const char *path, struct sbx_err *err)
{
	json_error_t je;
	struct stat sb;
	json_t *o;

	if (access(path, F_OK) < 0) {
		sbx_err_set(err, errno == ENOENT ? SBX_EX_NOSANDBOX :
		    SBX_EX_FAIL, "cannot open '%s':", path);
		return NULL;
	}
	o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		int st = stat(path, &sb);

		if (je.position == 0 && access(path, R_OK) < 0)
			sbx_err_set(err, SBX_EX_FAIL, "cannot read '%s':",
			    path);
		else if (st == 0 && S_ISDIR(sb.st_mode))
			sbx_err_set(err, SBX_EX_DATA, "'%s' is a directory, not "
			    "a JSON file", path);
		else if (st == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
			sbx_err_set(err, SBX_EX_DATA, "'%s' is empty", path);
		else
			sbx_err_set(err, SBX_EX_DATA,
			    "'%s' is not valid JSON: %s (line %d)", path,
			    je.text, je.line);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		sbx_err_set(err, SBX_EX_DATA, "'%s' does not hold a JSON object",
		    path);
		return NULL;
	}
	return o;
}

const char *
sbx_json_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

long long
sbx_json_int(const json_t *obj, const char *key, long long def)
{
	json_t *v = json_object_get(obj, key);

	return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

/* A name a sync may write: relative, no empty, "." or ".." part, within
 * the limits of the filesystem. */
int
sbx_path_valid(const char *p)
{
	const char *s = p, *slash;
	size_t n;

	if (!*p || *p == '/' || strlen(p) >= 4096)
		return 0;
	for (;;) {
		slash = strchr(s, '/');
		n = slash ? (size_t)(slash - s) : strlen(s);
		if (!n || n > 255 || (n == 1 && s[0] == '.') ||
		    (n == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (!slash)
			return 1;
		s = slash + 1;
	}
}

int
sbx_path_plain(const char *p)
{
	return p && p[0] == '/' && sbx_path_valid(p + 1);
}

void
sbx_path_trim(char *p)
{
	for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
		p[n - 1] = '\0';
}

/* Length of the valid UTF-8 sequence at p, or 0. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
	size_t len, i;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

json_t *
sbx_json_bytes(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	struct sbx_buf b = SBX_BUF_INIT;
	size_t i = 0, k;
	json_t *j;

	while (i < n) {
		if ((k = utf8_len(p + i, n - i))) {
			sbx_buf_add(&b, p + i, k);
			i += k;
		} else {
			sbx_buf_add(&b, "\xef\xbf\xbd", 3);
			i++;
		}
	}
	j = json_stringn(b.data ? b.data : "", b.len);
	sbx_buf_release(&b);
	return j;
}

void
sbx_time_fmt(long long epoch, char *buf, size_t n)
{
	long long days, secs, era, doe, yoe, doy, mp, y, m, d;

	/* Not strftime, nor gmtime_r: glibc's reads the local time zone
	 * (/etc/localtime, six system calls of each command that writes a
	 * state or a log line) on its first call, which a UTC time does
	 * not need. Days to a date: H. Hinnant's civil_from_days. */
	days = epoch / 86400;
	secs = epoch % 86400;
	if (secs < 0) {
		secs += 86400;
		days--;
	}
	days += 719468;
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y = yoe + era * 400 + (m <= 2);
	snprintf(buf, n, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", y, m, d,
	    secs / 3600, secs / 60 % 60, secs % 60);
}

int
sbx_labels_ours(const json_t *labels, const char *id, const char *what,
    struct sbx_err *err)
{
	const char *m = sbx_json_str(labels, SBX_MANAGED);

	if (m && !strcmp(m, "1"))
		return 0;
	return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox: '%s' "
	    SBX_NOT_OURS "%s", id, what);
}

long long
sbx_time_parse(const char *s)
{
	struct tm tm = {0};

	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return (long long)timegm(&tm);
}

void
sbx_info_times(json_t *o, long long now, long long created, long long act)
{
	char ts[32];

	sbx_time_fmt(created, ts, sizeof ts);
	json_object_set_new(o, "created_at", json_string(ts));
	json_object_set_new(o, "created_at_epoch", json_integer(created));
	sbx_time_fmt(act, ts, sizeof ts);
	json_object_set_new(o, "last_activity_at", act < 0 ? json_null() :
	    json_string(ts));
	json_object_set_new(o, "last_activity_epoch", act < 0 ? json_null() :
	    json_integer(act));
	json_object_set_new(o, "age", json_integer(now - created));
	json_object_set_new(o, "idle", act < 0 ? json_null() :
	    json_integer(now - act));
}

long long
sbx_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec;
}

int
sbx_mkdirs(const char *path, int mode, struct sbx_err *err)
{
	char *p, *s;
	struct stat st;
	int rc = 0;

	/* There already, as it mostly is: one call that takes no lock,
	 * where a mkdir of each component locked each parent (a fleet's
	 * creates, each making the store's path). */
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	/* Or in a directory that is: one call, not one a component. */
	if (mkdir(path, (mode_t)mode) == 0)
		return 0;
	p = sbx_xstrdup(path);
	for (s = p + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			rc = sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':",
			    p);
			break;
		}
		*s = '/';
	}
	if (!rc && mkdir(p, (mode_t)mode) < 0 && errno != EEXIST)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", p);
	free(p);
	return rc;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	/* A directory we may not read (overlay's work/work, rootless): open
	 * it up and empty it on its own. */
	if (flag == FTW_DNR) {
		if (chmod(path, (st->st_mode & 07777) | 0700) < 0 ||
		    sbx_rmtree(path) < 0)
			return -1;
		return 0;
	}
	if (flag == FTW_DP)
		return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
	return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int
sbx_rmtree(const char *path)
{
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 &&
	    errno != ENOENT)
		return -1;
	return 0;
}

int
sbx_file_write_atomic(const char *path, const char *data, size_t n, int mode,
    int durable, struct sbx_err *err)
{
	char *tmp = sbx_xasprintf("%s.tmpXXXXXX", path), *dup, *dir;
	int fd, rc = -1, dfd;
	size_t off = 0;
	ssize_t w;

	if ((fd = mkstemp(tmp)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot create '%s':", tmp);
		goto out;
	}
	fchmod(fd, (mode_t)mode);
	while (off < n) {
		if ((w = write(fd, data + off, n - off)) < 0) {
			if (errno == EINTR)
				continue;
			sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", tmp);
			goto fail;
		}
		off += (size_t)w;
	}
	if ((durable && fsync(fd) < 0) || close(fd) < 0) {
		fd = -1;
		sbx_err_set(err, SBX_EX_FAIL, "cannot write '%s':", tmp);
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot rename to '%s':", path);
		goto fail;
	}
	if (durable) {
		dup = sbx_xstrdup(path);
		dir = dirname(dup);
		if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			fsync(dfd);
			close(dfd);
		}
		free(dup);
	}
	rc = 0;
	goto out;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
out:
	free(tmp);
	return rc;
}
