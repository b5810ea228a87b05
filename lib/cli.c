/* cli.c - what every command does: usage, common options, option values,
 * stdout */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

void
sbx_usage(const char *text, int code)
{
	/* A usage error already has its one line on stderr (getopt's). */
	if (!code)
		fputs(text, stdout);
	exit(code ? code : sbx_out_close(0));
}

void
sbx_usage_error(const char *text, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", sbx_prog_get());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	(void)text;
	exit(SBX_EX_USAGE);
}

void
sbx_version(void)
{
	printf("%s %s\n", sbx_prog_get(), SBX_VERSION);
	exit(sbx_out_close(0));
}

int
sbx_opt_common(int c, const char *usage)
{
	switch (c) {
	case SBX_OPT_HELP:
		sbx_help_opt(c);
		sbx_usage(usage, 0);
	case '?':
		return sbx_help_opt(c);
	case 'h':
		sbx_usage(usage, 0);
	case 'q':
		sbx_quiet = 1;
		return 1;
	case 'v':
		sbx_verbose = 1;
		return 1;
	case 'V':
		sbx_version();
	default:
		return 0;
	}
}

int
sbx_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int
sbx_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	char *end;
	unsigned long long v;
	const char *u;
	int shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end && (u = strchr(units, tolower((unsigned char)*end)))) {
		shift = 10 * (int)(u - units + 1);
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		else if (*end == 'B' || *end == 'b')
			end++;
	} else if (*end == 'B' || *end == 'b') {
		end++;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int
sbx_parse_milli(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t whole = 0, frac = 0;
	int digits = 0;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		/* whole <= UINT64_MAX / 1000 here: no overflow below. */
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > max || whole > UINT64_MAX / 1000)
			return -1;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++)
			if (digits < 3) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				digits++;
			}
		if (!digits)
			return -1;
	}
	if (*p)
		return -1;
	while (digits++ < 3)
		frac *= 10;
	whole *= 1000;
	if (frac > UINT64_MAX - whole)
		return -1;
	whole += frac;
	if (whole < min || whole / 1000 > max ||
	    (whole / 1000 == max && whole % 1000))
		return -1;
	*out = whole;
	return 0;
}

int
sbx_parse_duration(const char *s, uint64_t *seconds)
{
	static const char units[] = "dhms";
	static const uint64_t mult[] = {86400, 3600, 60, 1};
	uint64_t total = 0, v, d;
	const char *p = s, *u;
	size_t next = 0; /* the units must come largest first, once each */

	if (!s || !isdigit((unsigned char)*p))
		return -1;
	while (*p) {
		if (!isdigit((unsigned char)*p))
			return -1;
		for (v = 0; isdigit((unsigned char)*p); p++) {
			d = (uint64_t)(*p - '0');
			if (v > UINT64_MAX / 10 || v * 10 > UINT64_MAX - d)
				return -1;
			v = v * 10 + d;
		}
		/* A bare number is seconds, but only as the whole value:
		 * "1h30" could mean seconds or minutes. */
		if (!*p && total == 0 && next == 0) {
			*seconds = v;
			return 0;
		}
		if (!*p || !(u = strchr(units, *p)) ||
		    (size_t)(u - units) < next)
			return -1;
		next = (size_t)(u - units) + 1;
		if (v > (UINT64_MAX - total) / mult[u - units])
			return -1;
		total += v * mult[u - units];
		p++;
	}
	*seconds = total;
	return 0;
}

char *
sbx_fmt_duration(uint64_t secs, char *buf, size_t n)
{
	static const char units[] = "dhms";
	static const uint64_t mult[] = {86400, 3600, 60, 1};
	size_t len = 0, i;
	int w;

	if (n)
		*buf = '\0';
	if (!secs) {
		snprintf(buf, n, "0s");
		return buf;
	}
	for (i = 0; i < 4; i++) {
		if (secs < mult[i])
			continue;
		w = snprintf(buf + len, n - len, "%llu%c",
		    (unsigned long long)(secs / mult[i]), units[i]);
		if (w < 0 || (size_t)w >= n - len)
			break;
		len += (size_t)w;
		secs %= mult[i];
	}
	return buf;
}

int
sbx_opt_duration(const char *opt, const char *s, uint64_t min, uint64_t max,
    uint64_t *out, struct sbx_err *err)
{
	char lim[SBX_DURATION_LEN];
	uint64_t v;

	if (sbx_parse_duration(s, &v) < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "%s: invalid duration "
		    "'%s' (want 90, 90s, 15m, 1h, 2d)", opt, s);
	if (v > max)
		return sbx_err_set(err, SBX_EX_USAGE, "%s: %s is over the "
		    "maximum, %s", opt, s, sbx_fmt_duration(max, lim,
		    sizeof lim));
	if (v < min)
		return sbx_err_set(err, SBX_EX_USAGE, "%s: %s is under the "
		    "minimum, %s", opt, s, sbx_fmt_duration(min, lim,
		    sizeof lim));
	*out = v;
	return 0;
}

static int
valid_key(const char *k, size_t n)
{
	size_t i;

	if (n == 0 || n > 63)
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)k[i]) && !strchr("_.-/", k[i]))
			return 0;
	return 1;
}

int
sbx_parse_label(const char *s, json_t *obj, struct sbx_err *err)
{
	const char *eq = strchr(s, '=');
	char key[64];

	if (!eq || !valid_key(s, (size_t)(eq - s)))
		return sbx_err_set(err, SBX_EX_USAGE,
		    "invalid label '%s' (want key=value)", s);
	if (strlen(eq + 1) > 255)
		return sbx_err_set(err, SBX_EX_USAGE,
		    "label value too long in '%s'", s);
	memcpy(key, s, (size_t)(eq - s));
	key[eq - s] = '\0';
	if (json_object_set_new(obj, key, sbx_json_bytes(eq + 1,
	    strlen(eq + 1))) < 0)
		return sbx_err_set(err, SBX_EX_USAGE, "invalid label '%s'", s);
	return 0;
}

char *
sbx_parse_env(const char *s, struct sbx_err *err)
{
	const char *eq = strchr(s, '='), *v;
	size_t n = eq ? (size_t)(eq - s) : strlen(s), i;

	for (i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_') ||
		    (i == 0 && isdigit((unsigned char)s[i])))
			break;
	if (n == 0 || i < n) {
		sbx_err_set(err, SBX_EX_USAGE,
		    "invalid environment variable name in '%.*s'", (int)n, s);
		return NULL;
	}
	if (eq)
		return sbx_xstrdup(s);
	if (!(v = getenv(s))) {
		sbx_err_set(err, SBX_EX_USAGE,
		    "environment variable '%s' is not set", s);
		return NULL;
	}
	return sbx_xasprintf("%s=%s", s, v);
}

int
sbx_out_close(int rc)
{
	if (fflush(stdout) == EOF || ferror(stdout)) {
		if (errno == EPIPE)
			return rc;
		sbx_warn("write error on stdout:");
		return rc ? rc : SBX_EX_FAIL;
	}
	return rc;
}

void
sbx_fmt_bytes(const json_t *v, char *buf, size_t n)
{
	double b;

	if (!json_is_integer(v)) {
		snprintf(buf, n, "-");
		return;
	}
	b = (double)json_integer_value(v);
	if (b < 1024 * 1024)
		snprintf(buf, n, "%.0fK", b / 1024);
	else if (b < 1024.0 * 1024 * 1024)
		snprintf(buf, n, "%.1fM", b / (1024 * 1024));
	else
		snprintf(buf, n, "%.1fG", b / (1024.0 * 1024 * 1024));
}

void
sbx_out_json(json_t *obj)
{
	json_dumpf(obj, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER |
	    JSON_REAL_PRECISION(15));
	putchar('\n');
}
