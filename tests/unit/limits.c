/* limits.c - TAP unit tests of limits: parsing, defaults, what a backend
 * that cannot enforce one gets */
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "tap.h"

static const struct sbx_backend local = {.name = "l", .caps =
    SBX_CAP_MEMORY | SBX_CAP_CPUS | SBX_CAP_PIDS};

/* No user's configuration: the environment alone. */
static void
clean_env(void)
{
	setenv("XDG_CONFIG_HOME", "/nonexistent", 1);
	setenv("HOME", "/nonexistent", 1);
	unsetenv("SBX_LIMITS_MEMORY");
	unsetenv("SBX_LIMITS_CPUS");
	unsetenv("SBX_LIMITS_PIDS");
}

static void
t_parse(void)
{
	struct sbx_spec s = {0};

	CHECK(sbx_limits_parse(SBX_CAP_MEMORY, "512M", &s) == 0 &&
	    s.memory == 512u << 20);
	CHECK(sbx_limits_parse(SBX_CAP_MEMORY, "0", &s) == 0 && s.memory == 0);
	CHECK(sbx_limits_parse(SBX_CAP_MEMORY, "0M", &s) == -1);
	CHECK(sbx_limits_parse(SBX_CAP_MEMORY, "3M", &s) == -1);
	CHECK(sbx_limits_parse(SBX_CAP_MEMORY, "12Q", &s) == -1);
	CHECK(sbx_limits_parse(SBX_CAP_CPUS, "1.5", &s) == 0 &&
	    s.cpus_milli == 1500);
	CHECK(sbx_limits_parse(SBX_CAP_CPUS, "0", &s) == 0 &&
	    s.cpus_milli == 0);
	CHECK(sbx_limits_parse(SBX_CAP_CPUS, "0.0001", &s) == -1);
	CHECK(sbx_limits_parse(SBX_CAP_CPUS, "4097", &s) == -1);
	CHECK(sbx_limits_parse(SBX_CAP_PIDS, "2", &s) == 0 && s.pids == 2);
	CHECK(sbx_limits_parse(SBX_CAP_PIDS, "0", &s) == 0 && s.pids == 0);
	CHECK(sbx_limits_parse(SBX_CAP_PIDS, "1", &s) == -1);
	CHECK(sbx_limits_parse(SBX_CAP_PIDS, "-1", &s) == -1);
}

static void
t_defaults(void)
{
	struct sbx_spec s = {0};
	struct sbx_err err = {0};

	clean_env();
	CHECK(sbx_limits_default(&local, &s, 0, &err) == 0);
	CHECK(s.memory == 512u << 20 && s.cpus_milli == 2000 &&
	    s.pids == 1024);
	CHECK(s.limits_default == (SBX_CAP_MEMORY | SBX_CAP_CPUS |
	    SBX_CAP_PIDS));
	CHECK(sbx_limits_shm(s.memory) == 256u << 20);
	CHECK(sbx_limits_shm(0) == 0);
}

/* A flag's value stays, and is no default; 0 from the config is none. */
static void
t_given_and_config(void)
{
	struct sbx_spec s = {0};
	struct sbx_err err = {0};

	clean_env();
	setenv("SBX_LIMITS_PIDS", "0", 1);
	setenv("SBX_LIMITS_CPUS", "0.5", 1);
	s.memory = 64u << 20;
	CHECK(sbx_limits_default(&local, &s, SBX_CAP_MEMORY, &err) == 0);
	CHECK(s.memory == 64u << 20 && s.cpus_milli == 500 && s.pids == 0);
	CHECK(s.limits_default == SBX_CAP_CPUS);
	setenv("SBX_LIMITS_CPUS", "lots", 1);
	CHECK(sbx_limits_default(&local, &s, 0, &err) == -1);
	CHECK(err.code == SBX_EX_USAGE);
	CHECK(strstr(err.msg, "limits.cpus 'lots'") != NULL);
	CHECK(strstr(err.msg, "SBX_LIMITS_CPUS") != NULL);
}

/* A backend without the capability, or sized by its template, gets no
 * default; a malformed value is refused all the same. */
static void
t_unenforceable(void)
{
	struct sbx_backend nopids = local, tmpl = local;
	struct sbx_spec s = {0};
	struct sbx_err err = {0};

	clean_env();
	nopids.caps &= ~(unsigned)SBX_CAP_PIDS;
	CHECK(sbx_limits_default(&nopids, &s, 0, &err) == 0);
	CHECK(s.pids == 0 && s.memory && s.cpus_milli);
	CHECK(!(s.limits_default & SBX_CAP_PIDS));
	memset(&s, 0, sizeof s);
	tmpl.template_sized = 1;
	CHECK(sbx_limits_default(&tmpl, &s, 0, &err) == 0);
	CHECK(!s.memory && !s.cpus_milli && !s.pids && !s.limits_default);
	setenv("SBX_LIMITS_MEMORY", "1M", 1);
	CHECK(sbx_limits_default(&tmpl, &s, 0, &err) == -1);
}

static const struct tap_test tests[] = {
	{"limits parse as the flags take them; only 0 itself is none",
	    t_parse},
	{"the built-in defaults: 512M, 2 CPUs, 1024 pids, shm half",
	    t_defaults},
	{"a flag's limit stays; the config replaces the rest, 0 for none",
	    t_given_and_config},
	{"no default for a backend that cannot enforce it", t_unenforceable},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
