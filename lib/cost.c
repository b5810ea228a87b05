/* cost.c - the cost model: running time, rates and money (DESIGN.md 6) */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"

/* What a per-vCPU or per-GiB rate assumes when the state does not say. */
#define DEFAULT_VCPU_MILLI 2000
#define DEFAULT_MEMORY_MIB 512
#define DEFAULT_DISK_GIB 10          /* limits.disk's default */
#define MAX_DISK_GIB (1ULL << 20)    /* 1 PiB */
#define MAX_VCPU_MILLI 10000000ULL   /* 10,000 vCPUs */
#define MAX_MEMORY_MIB (1ULL << 30)  /* 1 PiB */

static uint64_t
pow10u(int n)
{
	uint64_t v = 1;

	while (n-- > 0)
		v *= 10;
	return v;
}

int
sbx_cost_parse(const char *s, int decimals, uint64_t *out)
{
	uint64_t whole = 0, frac = 0;
	const char *p = s;
	int n = 0;

	if (!s || !isdigit((unsigned char)*p) || decimals < 0 ||
	    decimals > SBX_RATE_DECIMALS)
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > SBX_COST_MAX_WHOLE)
			return -1;
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, n++) {
			/* 0.10000 is 0.1; 0.12345 is one digit too many. */
			if (n >= decimals) {
				if (*p != '0')
					return -1;
				continue;
			}
			frac = frac * 10 + (uint64_t)(*p - '0');
		}
		if (!n)
			return -1;
	}
	if (*p)
		return -1;
	for (; n < decimals; n++)
		frac *= 10;
	/* whole <= 10^6 and decimals <= 12: no overflow. */
	*out = whole * pow10u(decimals) + frac;
	return 0;
}

void
sbx_cost_fmt(uint64_t units, char *buf, size_t n)
{
	snprintf(buf, n, "%llu.%04llu", (unsigned long long)(units / 10000),
	    (unsigned long long)(units % 10000));
}

/* v / 10^decimals as a short decimal: 1500, 3 -> "1.5". */
static void
fmt_dec(uint64_t v, int decimals, char *buf, size_t n)
{
	uint64_t scale = pow10u(decimals), frac = v % scale;
	int len, d = decimals;

	len = snprintf(buf, n, "%llu", (unsigned long long)(v / scale));
	if (!frac || len < 0 || (size_t)len >= n)
		return;
	while (frac % 10 == 0) {
		frac /= 10;
		d--;
	}
	snprintf(buf + len, n - (size_t)len, ".%0*llu", d,
	    (unsigned long long)frac);
}

int
sbx_cost_running(const json_t *root, long long now, uint64_t *seconds,
    struct sbx_err *err)
{
	json_t *segs = json_object_get(root, "segments"), *seg, *a, *b;
	long long start, end;
	uint64_t sum = 0;
	size_t i;

	*seconds = 0;
	if (!segs || json_is_null(segs))
		return 0;
	if (!json_is_array(segs))
		return sbx_err_set(err, SBX_EX_DATA,
		    "\"segments\" is not an array");
	json_array_foreach(segs, i, seg) {
		a = json_array_get(seg, 0);
		b = json_array_get(seg, 1);
		if (!json_is_array(seg) || json_array_size(seg) != 2 ||
		    !json_is_integer(a) || (!json_is_integer(b) &&
		    !json_is_null(b)))
			return sbx_err_set(err, SBX_EX_DATA,
			    "segment %zu is not [start, end or null]", i + 1);
		start = json_integer_value(a);
		end = json_is_null(b) ? now : json_integer_value(b);
		if (start < 0 || (!json_is_null(b) && end < start))
			return sbx_err_set(err, SBX_EX_DATA,
			    "segment %zu ends before it starts", i + 1);
		/* An open segment of a clock that went back counts nothing. */
		if (end > start)
			sum += (uint64_t)(end - start);
	}
	*seconds = sum;
	return 0;
}

/* A setting and where it came from. The environment variable is the one
 * sbx_config_get would take first; looked at here to name the source. */
static const char *
setting(const char *key, char *src, size_t n)
{
	char env[64];
	const char *v;

	if (sbx_config_env(key, env, sizeof env) < 0)
		return NULL;
	if ((v = getenv(env)) && *v) {
		snprintf(src, n, "env %s", env);
		return v;
	}
	if ((v = sbx_config_get(key, NULL)) && *v) {
		snprintf(src, n, "config %s", key);
		return v;
	}
	return NULL;
}

static int
rate_value(const char *v, const char *src, uint64_t *out,
    struct sbx_err *err)
{
	if (sbx_cost_parse(v, SBX_RATE_DECIMALS, out) < 0)
		return sbx_err_set(err, SBX_EX_USAGE,
		    "invalid amount '%s' (%s)", v, src);
	return 0;
}

/* vCPUs (in millis), MiB and GiB of disk from the state's "resources",
 * or assumed. */
static int
resources(const json_t *root, struct sbx_rate *r, int *assumed_cpu,
    int *assumed_mem, int *assumed_disk, struct sbx_err *err)
{
	json_t *res = json_object_get(root, "resources"), *c, *m, *d;
	double v;

	c = json_object_get(res, "vcpus");
	m = json_object_get(res, "memory_mib");
	d = json_object_get(res, "disk_gib");
	if ((res && !json_is_object(res) && !json_is_null(res)) ||
	    (c && !json_is_number(c) && !json_is_null(c)) ||
	    (m && !json_is_integer(m) && !json_is_null(m)) ||
	    (d && !json_is_integer(d) && !json_is_null(d)))
		return sbx_err_set(err, SBX_EX_DATA,
		    "\"resources\" is not {\"vcpus\": N, \"memory_mib\": M, "
		    "\"disk_gib\": D}");
	*assumed_disk = !json_is_integer(d);
	r->disk_gib = DEFAULT_DISK_GIB;
	if (!*assumed_disk) {
		if (json_integer_value(d) <= 0 ||
		    (uint64_t)json_integer_value(d) > MAX_DISK_GIB)
			return sbx_err_set(err, SBX_EX_DATA,
			    "\"resources\": bad disk_gib %lld",
			    (long long)json_integer_value(d));
		r->disk_gib = (uint64_t)json_integer_value(d);
	}
	*assumed_cpu = !json_is_number(c);
	*assumed_mem = !json_is_integer(m);
	r->vcpu_milli = DEFAULT_VCPU_MILLI;
	r->memory_mib = DEFAULT_MEMORY_MIB;
	if (!*assumed_cpu) {
		v = json_number_value(c);
		if (!(v > 0) || v * 1000 > (double)MAX_VCPU_MILLI)
			return sbx_err_set(err, SBX_EX_DATA,
			    "\"resources\": bad vcpus %g", v);
		r->vcpu_milli = (uint64_t)(v * 1000 + 0.5);
	}
	if (!*assumed_mem) {
		if (json_integer_value(m) <= 0 ||
		    (uint64_t)json_integer_value(m) > MAX_MEMORY_MIB)
			return sbx_err_set(err, SBX_EX_DATA,
			    "\"resources\": bad memory_mib %lld",
			    (long long)json_integer_value(m));
		r->memory_mib = (uint64_t)json_integer_value(m);
	}
	return 0;
}

/* cost.B.vcpu_second and cost.B.gib_second (and cost.B.disk_gib_second,
 * with either), with the resources: 1 when either is set, 0 when neither
 * is; the backend's defaults (dc, dm, dd) when given and neither is
 * set. */
static int
per_second(const char *backend, const json_t *root, struct sbx_rate *r,
    const char *dc, const char *dm, const char *dd, struct sbx_err *err)
{
	char kc[64], km[64], kd[64], sc[72], sm[72], sd[72], src[152], n[32];
	char cpu[40], mem[40];
	const char *vc, *vm, *vd;
	int ac = 1, am = 1, ad = 1;

	snprintf(kc, sizeof kc, "cost.%s.vcpu_second", backend);
	snprintf(km, sizeof km, "cost.%s.gib_second", backend);
	snprintf(kd, sizeof kd, "cost.%s.disk_gib_second", backend);
	vc = setting(kc, sc, sizeof sc);
	vm = setting(km, sm, sizeof sm);
	vd = setting(kd, sd, sizeof sd);
	if (!vc && !vm && !dc && !dm)
		return 0;
	if (!vc && !vm) {
		vc = dc;
		vm = dm;
		snprintf(sc, sizeof sc, "default");
		snprintf(sm, sizeof sm, "default");
		if (!vd && (vd = dd))
			snprintf(sd, sizeof sd, "default");
	}
	if ((vc && rate_value(vc, sc, &r->vcpu_second, err) < 0) ||
	    (vm && rate_value(vm, sm, &r->gib_second, err) < 0) ||
	    (vd && rate_value(vd, sd, &r->disk_gib_second, err) < 0) ||
	    resources(root, r, &ac, &am, &ad, err) < 0)
		return -1;
	r->per_second = 1;
	if (!strcmp(sc, "default"))
		snprintf(src, sizeof src, "default cost.%s.vcpu_second+"
		    "gib_second", backend);
	else if (vc && vm && !strncmp(sc, "config ", 7) &&
	    !strncmp(sm, "config ", 7))
		snprintf(src, sizeof src,
		    "config cost.%s.vcpu_second+gib_second", backend);
	else if (vc && vm && !strncmp(sc, "env ", 4) && !strncmp(sm, "env ", 4))
		snprintf(src, sizeof src, "%s+%s", sc, sm + 4);
	else if (vc && vm)
		snprintf(src, sizeof src, "%s+%s", sc, sm);
	else
		snprintf(src, sizeof src, "%s", vc ? sc : sm);
	/* What the rates were applied to, and what of it was assumed. */
	fmt_dec(r->vcpu_milli, 3, n, sizeof n);
	snprintf(cpu, sizeof cpu, "%s vCPU", n);
	/* 1/1024 is 0.0009765625: MiB / 1024 has at most 10 decimals. */
	fmt_dec(r->memory_mib * 9765625, 10, n, sizeof n);
	snprintf(mem, sizeof mem, "%s GiB", n);
	if (!vm)
		snprintf(r->source, sizeof r->source, "%s (%s%s)", src, cpu,
		    ac ? " assumed" : "");
	else if (!vc)
		snprintf(r->source, sizeof r->source, "%s (%s%s)", src, mem,
		    am ? " assumed" : "");
	else if (ac == am)
		snprintf(r->source, sizeof r->source, "%s (%s, %s%s)", src,
		    cpu, mem, am ? " assumed" : "");
	else
		snprintf(r->source, sizeof r->source, "%s (%s%s; %s%s)", src,
		    cpu, ac ? " assumed" : "", mem, am ? " assumed" : "");
	if (vd) {
		/* The disk's rate and size, said after the others. */
		size_t len = strlen(r->source);

		if (!strcmp(sd, "default"))
			snprintf(sd, sizeof sd, "default %.48s", kd);
		snprintf(r->source + len, sizeof r->source - len, " + %s "
		    "(%llu GiB of disk%s)", sd, (unsigned long long)
		    r->disk_gib, ad ? " assumed" : "");
	}
	return 1;
}

static int
valid_backend(const char *b)
{
	size_t i;

	for (i = 0; b[i]; i++)
		if (!islower((unsigned char)b[i]) &&
		    !isdigit((unsigned char)b[i]) && b[i] != '_')
			return 0;
	return i > 0 && i <= 32;
}

int
sbx_cost_rate(const char *backend, const char *flag, const json_t *root,
    struct sbx_rate *r, struct sbx_err *err)
{
	char key[96], src[128];
	const char *v;
	const struct sbx_backend *be;
	int rc;

	memset(r, 0, sizeof *r);
	if (flag) {
		snprintf(r->source, sizeof r->source, "flag");
		return rate_value(flag, "--rate", &r->per_hour, err);
	}
	if ((v = getenv("SBX_COST_PER_HOUR")) && *v) {
		snprintf(r->source, sizeof r->source, "env SBX_COST_PER_HOUR");
		return rate_value(v, r->source, &r->per_hour, err);
	}
	if (!valid_backend(backend))
		return sbx_err_set(err, SBX_EX_DATA, "bad backend name '%s'",
		    backend);
	snprintf(key, sizeof key, "cost.%s.per_hour", backend);
	if ((v = setting(key, src, sizeof src))) {
		snprintf(r->source, sizeof r->source, "%s", src);
		return rate_value(v, src, &r->per_hour, err);
	}
	if ((rc = per_second(backend, root, r, NULL, NULL, NULL, err)) != 0)
		return rc < 0 ? -1 : 0;
	be = sbx_backend_find(backend);
	/* The CPU time used, measured: a sandbox of the user's own machine
	 * or engine costs what it takes of it. */
	snprintf(key, sizeof key, "cost.%s.cpu_second", backend);
	if (!(v = setting(key, src, sizeof src)) && be &&
	    (v = be->cpu_second_default))
		snprintf(src, sizeof src, "default %s", key);
	if (v) {
		snprintf(r->source, sizeof r->source, "%s (CPU time used)",
		    src);
		r->per_cpu = 1;
		return rate_value(v, src, &r->cpu_second, err);
	}
	if (be && (be->vcpu_second_default || be->gib_second_default) &&
	    (rc = per_second(backend, root, r, be->vcpu_second_default,
	    be->gib_second_default, be->disk_gib_second_default, err)) != 0)
		return rc < 0 ? -1 : 0;
	return sbx_err_set(err, SBX_EX_USAGE,
	    "no rate for backend '%s': set cost.%s.per_hour (or give "
	    "--rate or SBX_COST_PER_HOUR)", backend, backend);
}

int
sbx_cost_estimate(const struct sbx_rate *r, uint64_t seconds,
    uint64_t *units, struct sbx_err *err)
{
	unsigned __int128 num, den, t, a, b;

	/* The rate as num / den, in 10^-12 per second (per CPU
	 * millisecond when per_cpu). */
	if (r->per_cpu) {
		num = r->cpu_second;
		den = 1000;
	} else if (r->per_second) {
		a = (unsigned __int128)r->vcpu_second * r->vcpu_milli * 1024;
		b = (unsigned __int128)r->gib_second * r->memory_mib * 1000;
		num = a + b + (unsigned __int128)r->disk_gib_second *
		    r->disk_gib * 1024000;
		den = 1024000;
	} else {
		num = r->per_hour;
		den = 3600;
	}
	/* 10^-12 into units of 10^-4, rounding half up. */
	den *= 100000000;
	if (__builtin_mul_overflow((unsigned __int128)seconds, num, &t) ||
	    __builtin_add_overflow(t, den / 2, &t) ||
	    (t /= den) > UINT64_MAX)
		return sbx_err_set(err, SBX_EX_DATA,
		    "the estimate is out of range");
	*units = (uint64_t)t;
	return 0;
}
