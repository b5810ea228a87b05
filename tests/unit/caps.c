/* caps.c - TAP unit tests of the capability checks: a backend that can
 * do nothing refuses each thing a tool may ask, naming it; one that can
 * do everything refuses nothing. */
#include <string.h>

#include "sbx.h"
#include "tap.h"

static const struct sbx_backend none = {.name = "none"};
static const struct sbx_backend all = {.name = "all", .caps = ~0u};

/* sbx_backend_need(&none, cap) fails with exit 2 and this message. */
static int
refuses(unsigned cap, const char *msg)
{
	struct sbx_err err = {0};

	return sbx_backend_need(&none, cap, &err) == -1 &&
	    err.code == SBX_EX_USAGE && !strcmp(err.msg, msg) &&
	    sbx_backend_need(&all, cap, &err) == 0;
}

static void
t_need(void)
{
	struct sbx_err err = {0};

	CHECK(sbx_backend_need(&none, 0, &err) == 0 && !err.code);
	CHECK(refuses(SBX_CAP_PTY, "backend 'none' cannot give a command a "
	    "terminal (-t)"));
	CHECK(refuses(SBX_CAP_STDIN, "backend 'none' cannot forward standard "
	    "input (-i)"));
	CHECK(refuses(SBX_CAP_NET_DENY, "backend 'none' cannot deny the "
	    "network (--network deny)"));
	CHECK(refuses(SBX_CAP_NET_ALLOW, "backend 'none' cannot allow the "
	    "network (--network allow)"));
	CHECK(refuses(SBX_CAP_MEMORY, "backend 'none' cannot limit memory "
	    "(--memory)"));
	CHECK(refuses(SBX_CAP_CPUS, "backend 'none' cannot limit CPUs "
	    "(--cpus)"));
	CHECK(refuses(SBX_CAP_PIDS, "backend 'none' cannot limit processes "
	    "(--pids)"));
	CHECK(refuses(SBX_CAP_TIMEOUT, "backend 'none' cannot end an idle "
	    "sandbox (--timeout)"));
	CHECK(refuses(SBX_CAP_RUNTIME, "backend 'none' cannot choose a "
	    "runtime (--runtime)"));
	CHECK(refuses(SBX_CAP_PULL, "backend 'none' cannot pull images "
	    "(--pull)"));
	CHECK(refuses(SBX_CAP_SUSPEND, "backend 'none' cannot suspend a "
	    "sandbox (--mode suspend)"));
	CHECK(refuses(SBX_CAP_STOP, "backend 'none' cannot stop a sandbox "
	    "and keep its files (--mode stop)"));
	CHECK(refuses(SBX_CAP_FILES, "backend 'none' cannot move files "
	    "(sbx-sync)"));
	CHECK(refuses(SBX_CAP_IDLE, "backend 'none' cannot tell how long a "
	    "sandbox was idle (--idle-for)"));
}

/* A spec asks for what its fields name, and for a network policy. */
static void
t_spec(void)
{
	struct sbx_spec s = {0};
	struct sbx_backend deny = {.name = "deny", .caps = SBX_CAP_NET_DENY};
	struct sbx_err err = {0};

	CHECK(sbx_backend_check_spec(&deny, &s, &err) == 0);
	CHECK(sbx_backend_check_spec(&none, &s, &err) == -1 &&
	    strstr(err.msg, "--network deny"));
	s.network = SBX_NET_ALLOW;
	CHECK(sbx_backend_check_spec(&deny, &s, &err) == -1 &&
	    strstr(err.msg, "--network allow"));
	s.network = SBX_NET_DENY;
	s.memory = 1 << 20;
	CHECK(sbx_backend_check_spec(&deny, &s, &err) == -1 &&
	    strstr(err.msg, "(--memory)"));
	s.memory = 0;
	s.cpus_milli = 500;
	CHECK(sbx_backend_check_spec(&deny, &s, &err) == -1 &&
	    strstr(err.msg, "(--cpus)"));
	s.cpus_milli = 0;
	s.pids = 10;
	CHECK(sbx_backend_check_spec(&deny, &s, &err) == -1 &&
	    strstr(err.msg, "(--pids)"));
	s.pids = 0;
	s.timeout = 60;
	CHECK(sbx_backend_check_spec(&deny, &s, &err) == -1 &&
	    strstr(err.msg, "(--timeout)"));
	s.timeout = 0;
	s.runtime = "runsc";
	CHECK(sbx_backend_check_spec(&deny, &s, &err) == -1 &&
	    strstr(err.msg, "(--runtime)"));
	s.runtime = NULL;
	s.pull = 1;
	CHECK(sbx_backend_check_spec(&deny, &s, &err) == -1 &&
	    strstr(err.msg, "(--pull)"));
	s.memory = 1;
	s.pids = 1;
	s.timeout = 1;
	s.cpus_milli = 1;
	s.runtime = "runc";
	CHECK(sbx_backend_check_spec(&all, &s, &err) == 0);
}

/* Without --mode, pause suspends where it can, else stops. */
static void
t_pause_default(void)
{
	struct sbx_backend b = {.name = "b"};

	CHECK(!strcmp(sbx_backend_pause_default(&b), "none"));
	b.caps = SBX_CAP_STOP;
	CHECK(!strcmp(sbx_backend_pause_default(&b), "stop"));
	b.caps |= SBX_CAP_SUSPEND;
	CHECK(!strcmp(sbx_backend_pause_default(&b), "suspend"));
}

static const struct tap_test tests[] = {
	{"a backend refuses each capability it lacks, naming it", t_need},
	{"a spec is checked for every capability it asks", t_spec},
	{"the default pause follows the capabilities", t_pause_default},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
