/* cost.c - TAP unit tests of the cost model: amounts, running time, rates */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "tap.h"

static int
amount_is(const char *s, int decimals, uint64_t want)
{
	uint64_t v = 0;

	return sbx_cost_parse(s, decimals, &v) == 0 && v == want;
}

static int
amount_bad(const char *s, int decimals)
{
	uint64_t v = 0;

	return sbx_cost_parse(s, decimals, &v) == -1;
}

static const char *
fmt(uint64_t units)
{
	static char buf[32];

	sbx_cost_fmt(units, buf, sizeof buf);
	return buf;
}

/* The estimate of seconds at a flat rate per hour, formatted. */
static const char *
flat(const char *per_hour, uint64_t seconds)
{
	struct sbx_rate r = {0};
	struct sbx_err err = {0};
	uint64_t units;

	if (sbx_cost_parse(per_hour, SBX_RATE_DECIMALS, &r.per_hour) < 0 ||
	    sbx_cost_estimate(&r, seconds, &units, &err) < 0)
		return "error";
	return fmt(units);
}

static uint64_t
running(const char *json, long long now, int *rc)
{
	json_t *root = json_loads(json, 0, NULL);
	struct sbx_err err = {0};
	uint64_t s = 0;

	*rc = sbx_cost_running(root, now, &s, &err);
	if (*rc < 0 && err.code != SBX_EX_DATA)
		*rc = -2;
	json_decref(root);
	return s;
}

static void
t_parse_values(void)
{
	CHECK(amount_is("5", 4, 50000));
	CHECK(amount_is("0.1", 4, 1000));
	CHECK(amount_is("0.10", 4, 1000));
	CHECK(amount_is("0.1000000", 4, 1000));
	CHECK(amount_is("1.2345", 4, 12345));
	CHECK(amount_is("0", 4, 0));
	CHECK(amount_is("007", 4, 70000));
	CHECK(amount_is("0.000014", 12, 14000000));
	CHECK(amount_is("1000000", 12, 1000000000000000000ULL));
}

static void
t_parse_junk(void)
{
	CHECK(amount_bad("-1", 4));
	CHECK(amount_bad("+1", 4));
	CHECK(amount_bad("1e3", 4));
	CHECK(amount_bad("abc", 4));
	CHECK(amount_bad("0.1.2", 4));
	CHECK(amount_bad("", 4));
	CHECK(amount_bad(".5", 4));
	CHECK(amount_bad("5.", 4));
	CHECK(amount_bad(" 5", 4));
	CHECK(amount_bad("5 ", 4));
	CHECK(amount_bad("1.23456", 4));
	CHECK(amount_bad("1000001", 4));
	CHECK(amount_bad("99999999999999999999999", 12));
	CHECK(amount_bad(NULL, 4));
}

static void
t_fmt(void)
{
	CHECK(!strcmp(fmt(0), "0.0000"));
	CHECK(!strcmp(fmt(2000), "0.2000"));
	CHECK(!strcmp(fmt(50012), "5.0012"));
	CHECK(!strcmp(fmt(123456789), "12345.6789"));
}

static void
t_estimate_exact(void)
{
	CHECK(!strcmp(flat("0.10", 7200), "0.2000"));
	CHECK(!strcmp(flat("0.1", 3600), "0.1000"));
	CHECK(!strcmp(flat("1", 1), "0.0003"));
	CHECK(!strcmp(flat("0.18", 1), "0.0001")); /* 0.00005: half up */
	CHECK(!strcmp(flat("0.17", 1), "0.0000"));
	CHECK(!strcmp(flat("0", 1000000), "0.0000"));
	CHECK(!strcmp(flat("3600", 86400), "86400.0000"));
}

static void
t_estimate_per_second(void)
{
	struct sbx_rate r = {0};
	struct sbx_err err = {0};
	uint64_t units = 0;

	r.per_second = 1;
	CHECK(sbx_cost_parse("0.000014", 12, &r.vcpu_second) == 0);
	CHECK(sbx_cost_parse("0.0000045", 12, &r.gib_second) == 0);
	r.vcpu_milli = 2000;
	r.memory_mib = 512;
	CHECK(sbx_cost_estimate(&r, 3600, &units, &err) == 0);
	CHECK(!strcmp(fmt(units), "0.1089"));
	r.vcpu_milli = 4000;
	r.memory_mib = 1024;
	CHECK(sbx_cost_estimate(&r, 7200, &units, &err) == 0);
	CHECK(!strcmp(fmt(units), "0.4356"));
}

static void
t_estimate_overflow(void)
{
	struct sbx_rate r = {0};
	struct sbx_err err = {0};
	uint64_t units = 0;

	r.per_hour = 1000000000000000000ULL;
	CHECK(sbx_cost_estimate(&r, UINT64_MAX, &units, &err) == -1);
	CHECK(err.code == SBX_EX_DATA);
}

static void
t_running(void)
{
	int rc;

	CHECK(running("{\"segments\":[[1000,8200]]}", 0, &rc) == 7200);
	CHECK(rc == 0);
	CHECK(running("{\"segments\":[[0,10],[20,30],[40,null]]}", 45,
	    &rc) == 25);
	CHECK(rc == 0);
	CHECK(running("{\"segments\":[[100,null]]}", 50, &rc) == 0);
	CHECK(rc == 0);
	CHECK(running("{}", 50, &rc) == 0 && rc == 0);
	CHECK(running("{\"segments\":[]}", 50, &rc) == 0 && rc == 0);
}

static void
t_running_malformed(void)
{
	int rc;

	running("{\"segments\":\"x\"}", 0, &rc);
	CHECK(rc == -1);
	running("{\"segments\":[[1]]}", 0, &rc);
	CHECK(rc == -1);
	running("{\"segments\":[[1,2,3]]}", 0, &rc);
	CHECK(rc == -1);
	running("{\"segments\":[[2,1]]}", 0, &rc);
	CHECK(rc == -1);
	running("{\"segments\":[[-1,1]]}", 0, &rc);
	CHECK(rc == -1);
	running("{\"segments\":[[1.5,2]]}", 0, &rc);
	CHECK(rc == -1);
	running("{\"segments\":[5]}", 0, &rc);
	CHECK(rc == -1);
}

static void
t_rate_sources(void)
{
	json_t *root = json_object();
	struct sbx_rate r;
	struct sbx_err err = {0};

	unsetenv("SBX_COST_PER_HOUR");
	unsetenv("SBX_COST_LOCAL_PER_HOUR");
	setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
	CHECK(sbx_cost_rate("local", "0.5", root, &r, &err) == 0);
	CHECK(!strcmp(r.source, "flag") && r.per_hour == 500000000000ULL);
	/* No rate given: local's default charges the CPU time it used. */
	CHECK(sbx_cost_rate("local", NULL, root, &r, &err) == 0);
	CHECK(!strcmp(r.source, "default cost.local.cpu_second (CPU time "
	    "used)") && r.per_cpu && r.cpu_second == 14000000 &&
	    r.per_hour == 0);
	setenv("SBX_COST_LOCAL_PER_HOUR", "2", 1);
	CHECK(sbx_cost_rate("local", NULL, root, &r, &err) == 0);
	CHECK(!strcmp(r.source, "env SBX_COST_LOCAL_PER_HOUR"));
	setenv("SBX_COST_PER_HOUR", "3", 1);
	CHECK(sbx_cost_rate("local", NULL, root, &r, &err) == 0);
	CHECK(!strcmp(r.source, "env SBX_COST_PER_HOUR"));
	setenv("SBX_COST_PER_HOUR", "x", 1);
	CHECK(sbx_cost_rate("local", NULL, root, &r, &err) == -1);
	CHECK(err.code == SBX_EX_USAGE);
	unsetenv("SBX_COST_PER_HOUR");
	/* e2b's default: E2B's published vCPU- and GiB-second rates. */
	CHECK(sbx_cost_rate("e2b", NULL, root, &r, &err) == 0);
	CHECK(r.per_second && r.vcpu_second == 14000000 &&
	    r.gib_second == 4500000);
	/* A backend sbx does not know has no default: a usage error. */
	CHECK(sbx_cost_rate("nosuch", NULL, root, &r, &err) == -1);
	CHECK(err.code == SBX_EX_USAGE);
	setenv("SBX_COST_E2B_VCPU_SECOND", "0.00001", 1);
	CHECK(sbx_cost_rate("e2b", NULL, root, &r, &err) == 0);
	CHECK(r.per_second && r.vcpu_milli == 2000 && r.memory_mib == 512);
	CHECK(!strcmp(r.source, "env SBX_COST_E2B_VCPU_SECOND (2 vCPU assumed)"));
	json_decref(root);
}

static const struct tap_test tests[] = {
	{"sbx_cost_parse takes digits with up to N decimals", t_parse_values},
	{"sbx_cost_parse rejects signs, exponents, junk and too many decimals",
	    t_parse_junk},
	{"sbx_cost_fmt prints exactly 4 decimals", t_fmt},
	{"sbx_cost_estimate is exact and rounds half up", t_estimate_exact},
	{"sbx_cost_estimate applies vCPU- and GiB-second rates",
	    t_estimate_per_second},
	{"sbx_cost_estimate fails rather than overflow", t_estimate_overflow},
	{"sbx_cost_running sums segments, an open one up to now", t_running},
	{"sbx_cost_running rejects malformed segments", t_running_malformed},
	{"sbx_cost_rate: flag, env, config, default, and no rate", t_rate_sources},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
