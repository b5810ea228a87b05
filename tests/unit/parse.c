/* parse.c - TAP unit tests of the value parsers, sbx_json_bytes and sbx_buf */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx.h"
#include "tap.h"

/* Each test runs in a child of its own, so that a crash fails one test
 * and the rest still run. */

static int
size_is(const char *s, uint64_t want)
{
	uint64_t v = 0;

	return sbx_parse_size(s, &v) == 0 && v == want;
}

static int
size_bad(const char *s)
{
	uint64_t v = 0;

	return sbx_parse_size(s, &v) == -1;
}

static int
milli_is(const char *s, uint64_t min, uint64_t max, uint64_t want)
{
	uint64_t v = 0;

	return sbx_parse_milli(s, min, max, &v) == 0 && v == want;
}

static int
milli_bad(const char *s, uint64_t min, uint64_t max)
{
	uint64_t v = 0;

	return sbx_parse_milli(s, min, max, &v) == -1;
}

static int
u64_is(const char *s, uint64_t min, uint64_t max, uint64_t want)
{
	uint64_t v = 0;

	return sbx_parse_u64(s, min, max, &v) == 0 && v == want;
}

static int
u64_bad(const char *s, uint64_t min, uint64_t max)
{
	uint64_t v = 0;

	return sbx_parse_u64(s, min, max, &v) == -1;
}

/* The string sbx_json_bytes makes of n bytes at p equals want. */
static int
bytes_are(const char *p, size_t n, const char *want)
{
	json_t *j = sbx_json_bytes(p, n);
	int ok = json_is_string(j) && json_string_length(j) == strlen(want) &&
	    !memcmp(json_string_value(j), want, strlen(want));

	json_decref(j);
	return ok;
}
#define BYTES_ARE(lit, want) bytes_are(lit, sizeof(lit) - 1, want)

#define FFFD "\xef\xbf\xbd"

/* A label parsed into a fresh object gives key -> value. */
static int
label_is(const char *s, const char *key, const char *value)
{
	json_t *o = json_object();
	struct sbx_err err = {0};
	const char *v;
	int ok;

	ok = sbx_parse_label(s, o, &err) == 0 && json_object_size(o) == 1 &&
	    (v = sbx_json_str(o, key)) && !strcmp(v, value);
	json_decref(o);
	return ok;
}

/* A label that fails with SBX_EX_USAGE and leaves the object empty. */
static int
label_bad(const char *s)
{
	json_t *o = json_object();
	struct sbx_err err = {0};
	int ok;

	ok = sbx_parse_label(s, o, &err) == -1 && err.code == SBX_EX_USAGE &&
	    err.msg[0] && json_object_size(o) == 0;
	json_decref(o);
	return ok;
}

static int
env_is(const char *s, const char *want)
{
	struct sbx_err err = {0};
	char *r = sbx_parse_env(s, &err);
	int ok = r && !strcmp(r, want);

	free(r);
	return ok;
}

static int
env_bad(const char *s)
{
	struct sbx_err err = {0};
	char *r = sbx_parse_env(s, &err);
	int ok = !r && err.code == SBX_EX_USAGE && err.msg[0];

	free(r);
	return ok;
}

static void
t_size_units(void)
{
	CHECK(size_is("4096", 4096));
	CHECK(size_is("0", 0));
	CHECK(size_is("512M", 512ULL << 20));
	CHECK(size_is("1G", 1ULL << 30));
	CHECK(size_is("2KiB", 2048));
	CHECK(size_is("1T", 1ULL << 40));
	CHECK(size_is("3k", 3072));
	CHECK(size_is("1KB", 1024));
	CHECK(size_is("10B", 10));
	CHECK(size_is("4MiB", 4ULL << 20));
}

/* The code reads any case and an optional B: "mb" is a binary megabyte. */
static void
t_size_lowercase_mb(void)
{
	CHECK(size_is("1mb", 1ULL << 20));
	CHECK(size_is("1g", 1ULL << 30));
	CHECK(size_is("1Mb", 1ULL << 20));
}

static void
t_size_junk(void)
{
	CHECK(size_bad("12Q"));
	CHECK(size_bad(""));
	CHECK(size_bad(NULL));
	CHECK(size_bad("M"));
	CHECK(size_bad("1.5G"));
	CHECK(size_bad("-1"));
	CHECK(size_bad("+1"));
	CHECK(size_bad(" 1"));
	CHECK(size_bad("1 M"));
	CHECK(size_bad("1K "));
	CHECK(size_bad("1iB"));
	CHECK(size_bad("0x10"));
	CHECK(size_bad("1KK"));
	CHECK(size_bad("1Kib"));
}

static void
t_size_double_suffix(void)
{
	CHECK(size_bad("1KiBB"));
	CHECK(size_bad("1KiBb"));
	CHECK(size_bad("1BB"));
}

static void
t_size_overflow(void)
{
	CHECK(size_bad("99999999999T"));
	CHECK(size_bad("16777216T"));
	CHECK(size_bad("17179869184G"));
	CHECK(size_bad("18446744073709551616"));
	CHECK(size_bad("99999999999999999999999"));
	CHECK(size_is("16777215T", 16777215ULL << 40));
	CHECK(size_is("18446744073709551615", UINT64_MAX));
}

/* The bounds sbx-create uses for --cpus: 1 milli to 4096 CPUs. */
static void
t_milli_values(void)
{
	CHECK(milli_is("0.5", 1, 4096, 500));
	CHECK(milli_is("2", 1, 4096, 2000));
	CHECK(milli_is("1.2345", 1, 4096, 1234));
	CHECK(milli_is("0.001", 1, 4096, 1));
	CHECK(milli_is("10.25", 1, 4096, 10250));
	CHECK(milli_is("007", 1, 4096, 7000));
	CHECK(milli_is("4096", 1, 4096, 4096000));
	CHECK(milli_is("0.999999", 1, 4096, 999));
}

static void
t_milli_junk(void)
{
	CHECK(milli_bad("abc", 1, 4096));
	CHECK(milli_bad(".5", 1, 4096));
	CHECK(milli_bad("1.", 1, 4096));
	CHECK(milli_bad("", 1, 4096));
	CHECK(milli_bad(NULL, 1, 4096));
	CHECK(milli_bad("-1", 1, 4096));
	CHECK(milli_bad("+1", 1, 4096));
	CHECK(milli_bad(" 1", 1, 4096));
	CHECK(milli_bad("1e3", 1, 4096));
	CHECK(milli_bad("1,5", 1, 4096));
	CHECK(milli_bad("0.5x", 1, 4096));
	CHECK(milli_bad("1..5", 1, 4096));
}

static void
t_milli_range(void)
{
	CHECK(milli_bad("0", 1, 4096));
	CHECK(milli_bad("0.0004", 1, 4096));
	CHECK(milli_bad("4096.001", 1, 4096));
	CHECK(milli_bad("4097", 1, 4096));
	CHECK(milli_bad("99999999999999999999999", 1, 4096));
	CHECK(milli_is("0", 0, 4096, 0));
}

/* A range-checked helper must not wrap around, whatever max it is given. */
static void
t_milli_overflow(void)
{
	CHECK(milli_bad("99999999999999999999", 0, UINT64_MAX));
	CHECK(milli_bad("18446744073709552", 0, UINT64_MAX));
	CHECK(milli_is("18446744073709551", 0, UINT64_MAX,
	    18446744073709551000ULL));
}

static void
t_u64_range(void)
{
	CHECK(u64_is("0", 0, 10, 0));
	CHECK(u64_is("1", 1, 10, 1));
	CHECK(u64_is("10", 1, 10, 10));
	CHECK(u64_is("0010", 1, 10, 10));
	CHECK(u64_is("18446744073709551615", 0, UINT64_MAX, UINT64_MAX));
	CHECK(u64_bad("0", 1, 10));
	CHECK(u64_bad("11", 1, 10));
	CHECK(u64_bad("18446744073709551616", 0, UINT64_MAX));
	CHECK(u64_bad("99999999999999999999999", 0, UINT64_MAX));
}

static void
t_u64_junk(void)
{
	CHECK(u64_bad("", 0, 10));
	CHECK(u64_bad(NULL, 0, 10));
	CHECK(u64_bad("-1", 0, UINT64_MAX));
	CHECK(u64_bad("+1", 0, 10));
	CHECK(u64_bad(" 1", 0, 10));
	CHECK(u64_bad("1 ", 0, 10));
	CHECK(u64_bad("1x", 0, 10));
	CHECK(u64_bad("1.0", 0, 10));
	CHECK(u64_bad("0x1", 0, 10));
}

static void
t_label_good(void)
{
	json_t *o = json_object();
	struct sbx_err err = {0};

	CHECK(label_is("team=a", "team", "a"));
	CHECK(label_is("app.kubernetes.io/name=web", "app.kubernetes.io/name",
	    "web"));
	CHECK(label_is("x_y-z.1=v", "x_y-z.1", "v"));
	CHECK(label_is("k=", "k", ""));
	CHECK(label_is("a=b=c", "a", "b=c"));
	CHECK(label_is("k=with space", "k", "with space"));
	/* A later label with the same key wins; others stay. */
	CHECK(sbx_parse_label("team=a", o, &err) == 0);
	CHECK(sbx_parse_label("env=ci", o, &err) == 0);
	CHECK(sbx_parse_label("team=b", o, &err) == 0);
	CHECK(json_object_size(o) == 2);
	CHECK(sbx_json_str(o, "team") && !strcmp(sbx_json_str(o, "team"), "b"));
	json_decref(o);
}

static void
t_label_no_equals(void)
{
	json_t *o = json_object();
	struct sbx_err err = {0};

	CHECK(label_bad("novalue"));
	CHECK(label_bad(""));
	CHECK(sbx_parse_label("novalue", o, &err) == -1);
	CHECK(strstr(err.msg, "novalue") != NULL);
	json_decref(o);
}

static void
t_label_bad_key(void)
{
	CHECK(label_bad("=v"));
	CHECK(label_bad("a b=1"));
	CHECK(label_bad("k:x=1"));
	CHECK(label_bad("a$=1"));
	CHECK(label_bad("a\n=1"));
	CHECK(label_bad("\xc3\xa9=1"));
	CHECK(label_bad("a,b=1"));
}

static void
t_label_lengths(void)
{
	char key[80], s[400];

	memset(key, 'k', 63);
	key[63] = '\0';
	snprintf(s, sizeof s, "%s=v", key);
	CHECK(label_is(s, key, "v"));
	memset(key, 'k', 64);
	key[64] = '\0';
	snprintf(s, sizeof s, "%s=v", key);
	CHECK(label_bad(s));

	memset(s, 'v', sizeof s);
	memcpy(s, "k=", 2);
	s[2 + 255] = '\0';
	CHECK(label_is(s, "k", s + 2));
	memset(s, 'v', sizeof s);
	memcpy(s, "k=", 2);
	s[2 + 256] = '\0';
	CHECK(label_bad(s));
}

static void
t_label_utf8(void)
{
	CHECK(label_is("k=\xff", "k", FFFD));
	CHECK(label_is("k=caf\xc3\xa9", "k", "caf\xc3\xa9"));
}

static void
t_env_pair(void)
{
	CHECK(env_is("K=V", "K=V"));
	CHECK(env_is("K=", "K="));
	CHECK(env_is("K=a=b", "K=a=b"));
	CHECK(env_is("_A1=x y", "_A1=x y"));
	CHECK(env_is("lower_case=1", "lower_case=1"));
}

static void
t_env_from_environment(void)
{
	setenv("SBX_UNIT_SECRET", "s3cret=1", 1);
	CHECK(env_is("SBX_UNIT_SECRET", "SBX_UNIT_SECRET=s3cret=1"));
	setenv("SBX_UNIT_EMPTY", "", 1);
	CHECK(env_is("SBX_UNIT_EMPTY", "SBX_UNIT_EMPTY="));
	/* An explicit value wins over the environment. */
	CHECK(env_is("SBX_UNIT_SECRET=other", "SBX_UNIT_SECRET=other"));
}

static void
t_env_missing(void)
{
	struct sbx_err err = {0};
	char *r;

	unsetenv("SBX_UNIT_MISSING");
	r = sbx_parse_env("SBX_UNIT_MISSING", &err);
	CHECK(r == NULL);
	CHECK(err.code == SBX_EX_USAGE);
	CHECK(strstr(err.msg, "SBX_UNIT_MISSING") != NULL);
	CHECK(strstr(err.msg, "not set") != NULL);
	free(r);
}

static void
t_env_bad_name(void)
{
	CHECK(env_bad("1A"));
	CHECK(env_bad("1A=x"));
	CHECK(env_bad("=x"));
	CHECK(env_bad(""));
	CHECK(env_bad("A-B=1"));
	CHECK(env_bad("A B=1"));
	CHECK(env_bad("A.B"));
	CHECK(env_bad("\xc3\xa9=1"));
}

static void
t_bytes_valid(void)
{
	CHECK(BYTES_ARE("hello", "hello"));
	CHECK(BYTES_ARE("", ""));
	CHECK(BYTES_ARE("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
	    "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
	/* The edges of the valid ranges. */
	CHECK(BYTES_ARE("\xc2\x80", "\xc2\x80"));
	CHECK(BYTES_ARE("\xed\x9f\xbf", "\xed\x9f\xbf"));
	CHECK(BYTES_ARE("\xee\x80\x80", "\xee\x80\x80"));
	CHECK(BYTES_ARE("\xf0\x90\x80\x80", "\xf0\x90\x80\x80"));
	CHECK(BYTES_ARE("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"));
	/* Only n bytes are read. */
	CHECK(bytes_are("abcdef", 3, "abc"));
}

static void
t_bytes_invalid(void)
{
	CHECK(BYTES_ARE("a\xff" "b", "a" FFFD "b"));
	CHECK(BYTES_ARE("\x80", FFFD));
	CHECK(BYTES_ARE("\xfe\xfe", FFFD FFFD));
	CHECK(BYTES_ARE("ab\xe2\x82", "ab" FFFD FFFD));
	CHECK(BYTES_ARE("\xe2\x82x", FFFD FFFD "x"));
	CHECK(BYTES_ARE("\xc3", FFFD));
	CHECK(BYTES_ARE("x\xc3\xa9\xff\xc3\xa9", "x\xc3\xa9" FFFD "\xc3\xa9"));
}

static void
t_bytes_overlong(void)
{
	CHECK(BYTES_ARE("\xc0\xaf", FFFD FFFD));
	CHECK(BYTES_ARE("\xc1\xbf", FFFD FFFD));
	CHECK(BYTES_ARE("\xe0\x80\xaf", FFFD FFFD FFFD));
	CHECK(BYTES_ARE("\xe0\x9f\xbf", FFFD FFFD FFFD));
	CHECK(BYTES_ARE("\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD));
	CHECK(BYTES_ARE("\xf0\x8f\xbf\xbf", FFFD FFFD FFFD FFFD));
}

static void
t_bytes_surrogates(void)
{
	CHECK(BYTES_ARE("\xed\xa0\x80", FFFD FFFD FFFD));
	CHECK(BYTES_ARE("\xed\xbf\xbf", FFFD FFFD FFFD));
	CHECK(BYTES_ARE("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD));
	CHECK(BYTES_ARE("\xf5\x80\x80\x80", FFFD FFFD FFFD FFFD));
}

static void
t_bytes_nul(void)
{
	json_t *j = sbx_json_bytes("a\0b\0", 4);
	char *s = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	CHECK(json_is_string(j));
	CHECK(json_string_length(j) == 4);
	CHECK(j && !memcmp(json_string_value(j), "a\0b\0", 4));
	CHECK(s && !strcmp(s, "\"a\\u0000b\\u0000\""));
	free(s);
	json_decref(j);
}

static void
t_buf_grows(void)
{
	struct sbx_buf b = SBX_BUF_INIT;
	char chunk[1000];
	size_t i;
	int same = 1;

	for (i = 0; i < 10; i++) {
		memset(chunk, 'a' + (int)i, sizeof chunk);
		sbx_buf_add(&b, chunk, sizeof chunk);
	}
	CHECK(b.len == 10000);
	CHECK(b.cap > b.len);
	CHECK(!b.truncated);
	for (i = 0; b.data && i < 10000; i++)
		if (b.data[i] != 'a' + (int)(i / 1000))
			same = 0;
	CHECK(b.data && same);
	CHECK(b.data && b.data[10000] == '\0');
	sbx_buf_release(&b);
}

static void
t_buf_limit(void)
{
	struct sbx_buf b = SBX_BUF_INIT;

	b.limit = 5;
	sbx_buf_add(&b, "abc", 3);
	CHECK(b.len == 3 && !b.truncated);
	sbx_buf_add(&b, "defg", 4);
	CHECK(b.len == 5);
	CHECK(b.truncated);
	CHECK(b.data && !strcmp(b.data, "abcde"));
	sbx_buf_add(&b, "x", 1);
	CHECK(b.len == 5 && b.truncated);
	CHECK(b.data && !strcmp(b.data, "abcde"));
	sbx_buf_release(&b);
}

static void
t_buf_exact_limit(void)
{
	struct sbx_buf b = SBX_BUF_INIT;

	b.limit = 3;
	sbx_buf_add(&b, "abc", 3);
	CHECK(b.len == 3);
	CHECK(!b.truncated);
	sbx_buf_add(&b, "", 0);
	CHECK(!b.truncated);
	CHECK(b.data && !strcmp(b.data, "abc"));
	sbx_buf_release(&b);
}

static void
t_buf_release(void)
{
	struct sbx_buf b = SBX_BUF_INIT;

	b.limit = 2;
	sbx_buf_add(&b, "xyz", 3);
	sbx_buf_release(&b);
	CHECK(b.data == NULL);
	CHECK(b.len == 0 && b.cap == 0 && b.limit == 0 && !b.truncated);
}

static int
dur_is(const char *s, uint64_t want)
{
	uint64_t v = 12345;

	return sbx_parse_duration(s, &v) == 0 && v == want;
}

static int
dur_bad(const char *s)
{
	uint64_t v = 12345;

	return sbx_parse_duration(s, &v) == -1 && v == 12345;
}

static void
t_duration_values(void)
{
	CHECK(dur_is("90", 90));
	CHECK(dur_is("0", 0));
	CHECK(dur_is("90s", 90));
	CHECK(dur_is("5m", 300));
	CHECK(dur_is("2h", 7200));
	CHECK(dur_is("1d", 86400));
	CHECK(dur_is("1h30m", 5400));
	CHECK(dur_is("1d2h3m4s", 93784));
	CHECK(dur_is("0s", 0));
	CHECK(dur_is("120m", 7200));
	CHECK(dur_is("007s", 7));
}

static void
t_duration_junk(void)
{
	CHECK(dur_bad(""));
	CHECK(dur_bad(NULL));
	CHECK(dur_bad("5x"));
	CHECK(dur_bad("-1"));
	CHECK(dur_bad("+1"));
	CHECK(dur_bad(" 1"));
	CHECK(dur_bad("1 "));
	CHECK(dur_bad("s"));
	CHECK(dur_bad("h1"));
	CHECK(dur_bad("1.5h"));
	CHECK(dur_bad("1H"));
	CHECK(dur_bad("1h30"));
	CHECK(dur_bad("30m1h"));
	CHECK(dur_bad("1h1h"));
	CHECK(dur_bad("1hm"));
	CHECK(dur_bad("1w"));
}

static void
t_duration_overflow(void)
{
	CHECK(dur_is("18446744073709551615", UINT64_MAX));
	CHECK(dur_bad("18446744073709551616"));
	CHECK(dur_bad("213503982334602d"));
	CHECK(dur_is("213503982334601d", 213503982334601ULL * 86400));
	CHECK(dur_bad("213503982334601d1000000h"));
}

static int
fmt_is(uint64_t secs, const char *want)
{
	char buf[SBX_DURATION_LEN];
	uint64_t back = 1;

	return !strcmp(sbx_fmt_duration(secs, buf, sizeof buf), want) &&
	    sbx_parse_duration(buf, &back) == 0 && back == secs;
}

static void
t_duration_fmt(void)
{
	CHECK(fmt_is(0, "0s"));
	CHECK(fmt_is(1, "1s"));
	CHECK(fmt_is(90, "1m30s"));
	CHECK(fmt_is(3600, "1h"));
	CHECK(fmt_is(5400, "1h30m"));
	CHECK(fmt_is(31536000, "365d"));
	CHECK(fmt_is(93784, "1d2h3m4s"));
	CHECK(fmt_is(UINT64_MAX, "213503982334601d7h15s"));
}

static void
t_duration_opt(void)
{
	struct sbx_err err = {0};
	uint64_t v = 7;

	CHECK(sbx_opt_duration("--timeout", "1h", 1, 86400, &v, &err) == 0);
	CHECK(v == 3600);
	CHECK(sbx_opt_duration("--timeout", "40d", 0, 30 * 86400, &v,
	    &err) == -1 && v == 3600 && err.code == SBX_EX_USAGE);
	CHECK(!strcmp(err.msg, "--timeout: 40d is over the maximum, 30d"));
	CHECK(sbx_opt_duration("-T", "0", 1, 60, &v, &err) == -1);
	CHECK(!strcmp(err.msg, "-T: 0 is under the minimum, 1s"));
	CHECK(sbx_opt_duration("-T", "1y", 1, 60, &v, &err) == -1);
	CHECK(!strcmp(err.msg,
	    "-T: invalid duration '1y' (want 90, 90s, 15m, 1h, 2d)"));
	CHECK(sbx_opt_duration("-T", "30d", 0, 30 * 86400, &v, &err) == 0 &&
	    v == 30 * 86400);
}

static const struct tap_test tests[] = {
	{"sbx_parse_size takes bytes and binary K/M/G/T suffixes", t_size_units},
	{"sbx_parse_size takes lower case units and 'mb'", t_size_lowercase_mb},
	{"sbx_parse_size rejects unknown suffixes, junk and the empty string",
	    t_size_junk},
	{"sbx_parse_size rejects a doubled B after a unit (1KiBB)",
	    t_size_double_suffix},
	{"sbx_parse_size rejects sizes past 64 bits", t_size_overflow},
	{"sbx_parse_milli turns decimals into millis, truncating", t_milli_values},
	{"sbx_parse_milli rejects abc, .5, 1. and other junk", t_milli_junk},
	{"sbx_parse_milli enforces min (millis) and max (units)", t_milli_range},
	{"sbx_parse_milli does not wrap around with max UINT64_MAX",
	    t_milli_overflow},
	{"sbx_parse_u64 accepts values within min..max inclusive", t_u64_range},
	{"sbx_parse_u64 rejects signs, spaces and non-digits", t_u64_junk},
	{"sbx_parse_label adds key=value to the object", t_label_good},
	{"sbx_parse_label rejects a label without '=' (usage, named)",
	    t_label_no_equals},
	{"sbx_parse_label rejects keys with characters outside [A-Za-z0-9_.-/]",
	    t_label_bad_key},
	{"sbx_parse_label takes keys up to 63 and values up to 255 bytes",
	    t_label_lengths},
	{"sbx_parse_label stores invalid UTF-8 values as U+FFFD", t_label_utf8},
	{"sbx_parse_env returns NAME=VALUE as given", t_env_pair},
	{"sbx_parse_env takes a bare NAME's value from the environment",
	    t_env_from_environment},
	{"sbx_parse_env fails on a bare NAME that is not set", t_env_missing},
	{"sbx_parse_env rejects bad names such as 1A", t_env_bad_name},
	{"sbx_json_bytes keeps valid UTF-8 as is", t_bytes_valid},
	{"sbx_json_bytes turns each invalid byte into U+FFFD", t_bytes_invalid},
	{"sbx_json_bytes rejects overlong encodings", t_bytes_overlong},
	{"sbx_json_bytes rejects surrogates and code points past U+10FFFF",
	    t_bytes_surrogates},
	{"sbx_json_bytes keeps NUL bytes (encoded as \\u0000)", t_bytes_nul},
	{"sbx_buf grows without a limit and stays NUL-terminated", t_buf_grows},
	{"sbx_buf stops at its limit and marks itself truncated", t_buf_limit},
	{"sbx_buf filled exactly to its limit is not truncated",
	    t_buf_exact_limit},
	{"sbx_buf_release frees and zeroes the buffer", t_buf_release},
	{"sbx_parse_duration takes 90, 90s, 5m, 2h, 1d and 1h30m",
	    t_duration_values},
	{"sbx_parse_duration rejects 5x, -1, empty, 1h30 and units out of order",
	    t_duration_junk},
	{"sbx_parse_duration rejects durations past 64 bits",
	    t_duration_overflow},
	{"sbx_fmt_duration writes what sbx_parse_duration reads back",
	    t_duration_fmt},
	{"sbx_opt_duration names the option and the limit it passed",
	    t_duration_opt},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
