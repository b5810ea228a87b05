/* execio.c - TAP unit tests of the exec session: how a command's end maps
 * to sbx-exec's status, how an engine's start error is classified and
 * said, and a session over a transport that only writes output. */
#include <string.h>
#include <unistd.h>

#include "execio.h"
#include "tap.h"

static void
t_end(void)
{
	struct sbx_exec_result r = {0};

	sbx_xs_end(&r, SBX_XS_EXITED, 3);
	CHECK(r.exit_code == 3 && !r.signal && !r.timed_out);
	sbx_xs_end(&r, SBX_XS_EXITED, 256 + 7);
	CHECK(r.exit_code == 7);
	sbx_xs_end(&r, SBX_XS_KILLED, 9);
	CHECK(r.exit_code == 137 && r.signal == 9 && !r.timed_out);
	sbx_xs_end(&r, SBX_XS_TIMEDOUT, 0);
	CHECK(r.exit_code == 124 && !r.signal && r.timed_out);
	sbx_xs_end(&r, SBX_XS_EXITED, 0);
	CHECK(r.exit_code == 0 && !r.timed_out);
}

static void
t_why(void)
{
	CHECK(sbx_xs_start_why("OCI runtime exec failed: exec failed: "
	    "unable to start container process: exec: \"nope\": executable "
	    "file not found in $PATH: unknown") == SBX_XS_START_NOTFOUND);
	CHECK(sbx_xs_start_why("exec /x: no such file or directory") ==
	    SBX_XS_START_NOTFOUND);
	CHECK(sbx_xs_start_why("fork/exec /x: No such file or directory") ==
	    SBX_XS_START_NOTFOUND);
	CHECK(sbx_xs_start_why("exec: \"/etc\": permission denied") ==
	    SBX_XS_START_NOEXEC);
	CHECK(sbx_xs_start_why("fork/exec /etc: Permission denied") ==
	    SBX_XS_START_NOEXEC);
	/* The workdir's error names a missing file too: it wins. */
	CHECK(sbx_xs_start_why("chdir to cwd (\"/x\") set in config.json "
	    "failed: no such file or directory") == SBX_XS_START_WORKDIR);
	CHECK(sbx_xs_start_why("failed to find initial working directory "
	    "\"/x\": no such file") == SBX_XS_START_WORKDIR);
	CHECK(sbx_xs_start_why("cwd '/x' does not exist") ==
	    SBX_XS_START_WORKDIR);
	CHECK(sbx_xs_start_why("cannot change directory to '/x': No such "
	    "file or directory") == SBX_XS_START_WORKDIR);
	CHECK(sbx_xs_start_why("out of memory") == SBX_XS_START_OTHER);
	CHECK(sbx_xs_start_why("") == SBX_XS_START_OTHER);
}

static void
t_fail(void)
{
	struct sbx_err e = {0};

	CHECK(sbx_xs_start_fail(&e, SBX_XS_START_NOTFOUND, "nope", "x") == -1);
	CHECK(e.code == 127 && !strcmp(e.msg, "'nope': No such file or "
	    "directory"));
	sbx_xs_start_fail(&e, SBX_XS_START_NOEXEC, "/etc", "x");
	CHECK(e.code == 126 && !strcmp(e.msg, "'/etc': Permission denied"));
	sbx_xs_start_fail(&e, SBX_XS_START_OTHER, "ls", "out of memory");
	CHECK(e.code == 125 && !strcmp(e.msg, "cannot start 'ls': out of "
	    "memory"));
	sbx_xs_start_fail(&e, SBX_XS_START_WORKDIR, "ls", "cwd '/x' does not "
	    "exist");
	CHECK(e.code == 125 && !strcmp(e.msg, "cannot start 'ls': cwd '/x' "
	    "does not exist"));
}

static void
t_messages(void)
{
	struct sbx_err e = {0};

	CHECK(sbx_xs_paused(&e, "a1", "stopped") == -1 && e.code == 3 &&
	    !strcmp(e.msg, "sandbox 'a1' is stopped (sbx-exec --resume, or "
	    "sbx-pause --resume)"));
	sbx_xs_not_running(&e, "a1", "exited");
	CHECK(e.code == 3 && !strcmp(e.msg, "no sandbox: 'a1' is exited"));
	sbx_xs_vanished(&e, "a1", "sleep");
	CHECK(e.code == 3 && !strcmp(e.msg, "no sandbox 'a1': it went away "
	    "while 'sleep' ran"));
}

/* A transport whose command printed to a pipe and ended at once: the
 * session still takes what the pipe holds, into the capture buffer. */
struct fake {
	int p[2];
	int finished;
};

static int
fake_start(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct fake *f = t;

	(void)err;
	if (pipe(f->p) < 0 || write(f->p[1], "hi", 2) != 2)
		return -1;
	close(f->p[1]);
	sbx_xs_add_output(xs, f->p[0], 2);
	return 0;
}

static int
fake_fds(void *t, struct pollfd *p, long long *wake)
{
	(void)t;
	(void)p;
	*wake = 0;
	return 0;
}

static int
fake_ready(void *t, struct sbx_xs *xs, const struct pollfd *p, int n,
    struct sbx_err *err)
{
	(void)t;
	(void)p;
	(void)n;
	(void)err;
	sbx_xs_done(xs);
	return 0;
}

static int
fake_finish(void *t, struct sbx_xs *xs, struct sbx_err *err)
{
	struct fake *f = t;

	(void)err;
	f->finished = 1;
	sbx_xs_end(xs->res, SBX_XS_KILLED, 15);
	return 0;
}

static void
t_session(void)
{
	static const struct sbx_xs_transport tp = {.start = fake_start,
	    .fds = fake_fds, .ready = fake_ready, .finish = fake_finish};
	struct sbx_exec_opts o = {.capture = 1, .max_output = 1};
	struct sbx_exec_result r;
	struct sbx_err e = {0};
	struct fake f = {{-1, -1}, 0};
	struct sbx_xs xs;

	sbx_xs_init(&xs, &o, &r, &tp, &f);
	CHECK(sbx_xs_run(&xs, &e) == 0);
	CHECK(f.finished && r.exit_code == 143 && r.signal == 15);
	CHECK(r.err.len == 1 && r.err.data[0] == 'h' && r.err.truncated);
	CHECK(r.out.len == 0);
	sbx_buf_release(&r.err);
}

static const struct tap_test tests[] = {
	{"a command's end maps to exit, 128+N or 124", t_end},
	{"an engine's start error is classified, the workdir first", t_why},
	{"a start error is said as env(1) says it", t_fail},
	{"the messages every backend shares", t_messages},
	{"a session drains its outputs after the end, capped", t_session},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
