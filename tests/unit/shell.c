/* shell.c - the persistent shell session (lib/shell.c), driven as
 * sbx-init's loop drives it: poll, pump, reap, take */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "sbx.h"
#include "tap.h"

extern char **environ;

/* Poll and pump until the command settles or ms pass; then take. */
static json_t *
wait_take(struct sbx_shell *s, int ms, size_t limit)
{
	long long end = sbx_mono_ms() + ms;
	struct pollfd p[2];
	size_t n;
	int st;

	for (;;) {
		sbx_shell_pump(s);
		if (sbx_shell_pid(s) > 0 &&
		    waitpid(sbx_shell_pid(s), &st, WNOHANG) == sbx_shell_pid(s))
			sbx_shell_reaped(s);
		if (sbx_shell_settled(s) || sbx_mono_ms() >= end)
			break;
		n = sbx_shell_pollfds(s, p);
		poll(p, n, 20);
	}
	{
		struct sbx_shell_out out;
		json_t *o;

		sbx_shell_take(s, limit, &out);
		o = sbx_shell_out_json(&out);
		sbx_buf_release(&out.output);
		return o;
	}
}

static const char *
str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static long long
code(json_t *o)
{
	json_t *c = json_object_get(o, "exit_code");

	return json_is_integer(c) ? json_integer_value(c) : -1;
}

static struct sbx_shell *
start_with(const char *shell)
{
	struct sbx_err err;
	struct sbx_shell *s = sbx_shell_new(shell, "/tmp", environ, NULL,
	    &err);

	if (!s)
		printf("# %s\n", err.msg);
	return s;
}

static struct sbx_shell *
start(void)
{
	return start_with(NULL);
}

/* Runs cmd to its end (10 s at most): the JSON. */
static json_t *
run(struct sbx_shell *s, const char *cmd)
{
	struct sbx_err err;

	if (sbx_shell_command(s, cmd, &err) < 0) {
		printf("# %s\n", err.msg);
		return json_object();
	}
	return wait_take(s, 10000, 128 << 10);
}

static void
state_persists(void)
{
	struct sbx_shell *s = start();
	json_t *o;

	CHECK(s && sbx_shell_is_bash(s));
	o = run(s, "cd /usr && export SBX_T=kept && f() { echo fn; }");
	CHECK(!strcmp(str(o, "status"), "completed") && code(o) == 0);
	CHECK(!strcmp(str(o, "output"), ""));
	json_decref(o);
	o = run(s, "pwd; echo $SBX_T; f; false");
	CHECK(!strcmp(str(o, "output"), "/usr\nkept\nfn\n"));
	CHECK(code(o) == 1);
	CHECK(json_is_false(json_object_get(o, "truncated")));
	json_decref(o);
	sbx_shell_free(s);
}

static void
running_then_completed(void)
{
	struct sbx_shell *s = start();
	struct sbx_err err;
	json_t *o;

	CHECK(sbx_shell_command(s, "echo one; sleep 1; echo two; exit_=3; "
	    "(exit 7)", &err) == 0);
	o = wait_take(s, 300, 1 << 20);
	CHECK(!strcmp(str(o, "status"), "running"));
	CHECK(!strcmp(str(o, "output"), "one\n"));
	CHECK(json_is_null(json_object_get(o, "exit_code")));
	json_decref(o);
	/* A second command while one runs is refused. */
	CHECK(sbx_shell_command(s, "true", &err) < 0);
	CHECK(strstr(err.msg, "still running") != NULL);
	o = wait_take(s, 5000, 1 << 20);
	CHECK(!strcmp(str(o, "status"), "completed"));
	CHECK(!strcmp(str(o, "output"), "two\n"));
	CHECK(code(o) == 7);
	json_decref(o);
	sbx_shell_free(s);
}

static void
input_and_interrupt(void)
{
	struct sbx_shell *s = start();
	struct sbx_err err;
	json_t *o;

	CHECK(sbx_shell_input(s, "x\n", 2, &err) < 0);
	CHECK(sbx_shell_command(s, "read -r a; echo \"got $a\"; sleep 30",
	    &err) == 0);
	o = wait_take(s, 200, 1 << 20);
	CHECK(!strcmp(str(o, "status"), "running"));
	json_decref(o);
	CHECK(sbx_shell_input(s, "hello\n", 6, &err) == 0);
	o = wait_take(s, 500, 1 << 20);
	CHECK(!strcmp(str(o, "output"), "got hello\n"));
	CHECK(!strcmp(str(o, "status"), "running"));
	json_decref(o);
	CHECK(sbx_shell_interrupt(s, &err) == 0);
	o = wait_take(s, 5000, 1 << 20);
	CHECK(!strcmp(str(o, "status"), "completed"));
	CHECK(code(o) == 130);
	json_decref(o);
	/* The shell survived its ^C. */
	o = run(s, "echo alive");
	CHECK(!strcmp(str(o, "output"), "alive\n") && code(o) == 0);
	json_decref(o);
	sbx_shell_free(s);
}

static void
markers_cannot_fool(void)
{
	struct sbx_shell *s = start();
	json_t *o;

	/* What a marker on the output stream would look like, and the
	 * completion line's shape, printed by the command. */
	o = run(s, "printf '__sbx_id= 0\\nDONE|1|0\\n0000000000000000 0\\n'; "
	    "exec 3>&- 4>&-; sleep 0.3; echo end; (exit 5)");
	CHECK(!strcmp(str(o, "status"), "completed"));
	CHECK(code(o) == 5);
	CHECK(strstr(str(o, "output"), "end\n") != NULL);
	json_decref(o);
	sbx_shell_free(s);
}

static void
truncated_and_binary(void)
{
	struct sbx_shell *s = start();
	struct sbx_err err;
	json_t *o;

	CHECK(sbx_shell_command(s, "head -c 300000 /dev/zero | tr '\\0' a; "
	    "printf '\\377\\r\\n\\303\\251'", &err) == 0);
	o = wait_take(s, 10000, 1000);
	CHECK(!strcmp(str(o, "status"), "completed"));
	CHECK(json_is_true(json_object_get(o, "truncated")));
	CHECK(strlen(str(o, "output")) == 1000);
	json_decref(o);
	o = run(s, "printf 'a\\377b\\r\\nc\\303\\251'");
	CHECK(!strcmp(str(o, "output"), "a\xef\xbf\xbd" "b\nc\xc3\xa9"));
	json_decref(o);
	sbx_shell_free(s);
}

static void
exit_is_reset(void)
{
	struct sbx_shell *s = start();
	struct sbx_err err;
	json_t *o;

	o = run(s, "echo bye; exit 4");
	CHECK(!strcmp(str(o, "status"), "reset"));
	CHECK(json_is_null(json_object_get(o, "exit_code")));
	CHECK(strstr(str(o, "output"), "bye\n") != NULL);
	json_decref(o);
	CHECK(sbx_shell_dead(s));
	CHECK(sbx_shell_command(s, "true", &err) < 0);
	sbx_shell_free(s);
}

static void
set_options_and_jobs(void)
{
	struct sbx_shell *s = start();
	json_t *o;

	/* xtrace, nounset, a job in the background: the end is still
	 * told; PROMPT_COMMAND, which tells it, cannot be assigned. */
	o = run(s, "set -xu; sleep 5 & echo fg");
	CHECK(!strcmp(str(o, "status"), "completed") && code(o) == 0);
	CHECK(strstr(str(o, "output"), "fg\n") != NULL);
	json_decref(o);
	o = run(s, "PROMPT_COMMAND=true");
	CHECK(!strcmp(str(o, "status"), "completed") && code(o) != 0);
	CHECK(strstr(str(o, "output"), "readonly") != NULL);
	json_decref(o);
	o = run(s, "echo next");
	CHECK(!strcmp(str(o, "status"), "completed") && code(o) == 0);
	CHECK(strstr(str(o, "output"), "next\n") != NULL);
	json_decref(o);
	sbx_shell_free(s);
}

static void
no_fd_leaks(void)
{
	int fd = open("/dev/null", O_RDONLY);   /* not close-on-exec */
	struct sbx_shell *s = start();
	char cmd[128];
	json_t *o;

	snprintf(cmd, sizeof cmd, "ls /proc/$$/fd | sort -n | tr '\\n' ' '; "
	    "[ -e /proc/$$/fd/%d ] && echo leaked", fd);
	o = run(s, cmd);
	/* 255: bash's own copy of its terminal */
	CHECK(!strcmp(str(o, "output"), "0 1 2 98 99 255 "));
	json_decref(o);
	sbx_shell_free(s);
}

/* Input to a command, an interrupt that ends it, and the shell goes on:
 * sh as bash. */
static void
sh_interrupt(struct sbx_shell *s)
{
	struct sbx_err err;
	json_t *o;

	CHECK(sbx_shell_command(s, "read -r a; echo \"got $a\"; sleep 30",
	    &err) == 0);
	o = wait_take(s, 200, 1 << 20);
	CHECK(!strcmp(str(o, "status"), "running"));
	json_decref(o);
	CHECK(sbx_shell_input(s, "hi\n", 3, &err) == 0);
	o = wait_take(s, 500, 1 << 20);
	CHECK(!strcmp(str(o, "output"), "got hi\n"));
	json_decref(o);
	CHECK(sbx_shell_interrupt(s, &err) == 0);
	o = wait_take(s, 5000, 1 << 20);
	CHECK(!strcmp(str(o, "status"), "completed"));
	CHECK(code(o) == 130);
	json_decref(o);
	o = run(s, "echo after");
	CHECK(!strcmp(str(o, "output"), "after\n") && code(o) == 0);
	json_decref(o);
}

static void
plain_sh(void)
{
	struct sbx_shell *s = start_with("/bin/sh");
	json_t *o;

	CHECK(s && !sbx_shell_is_bash(s));
	o = run(s, "cd /usr; X=1");
	CHECK(!strcmp(str(o, "status"), "completed") && code(o) == 0);
	json_decref(o);
	o = run(s, "pwd; echo $X; printf '1111 0\\n'; (exit 6)");
	CHECK(!strcmp(str(o, "output"), "/usr\n1\n1111 0\n"));
	CHECK(code(o) == 6);
	json_decref(o);
	sh_interrupt(s);
	sbx_shell_free(s);
}

static void
busybox_banner(void)
{
	char dir[] = "/tmp/sbx-shell-test.XXXXXX", sh[64];
	struct sbx_shell *s;
	json_t *o;

	if (access("/bin/busybox", X_OK) < 0) {
		printf("# no /bin/busybox\n");
		CHECK(0);
		return;
	}
	CHECK(mkdtemp(dir) != NULL);
	snprintf(sh, sizeof sh, "%s/sh", dir);
	CHECK(symlink("/bin/busybox", sh) == 0);
	s = start_with(sh);
	CHECK(s && !sbx_shell_is_bash(s));
	/* Its banner ("BusyBox v1... built-in shell") came before. */
	o = run(s, "echo first");
	CHECK(!strcmp(str(o, "output"), "first\n"));
	json_decref(o);
	sh_interrupt(s);
	sbx_shell_free(s);
	unlink(sh);
	rmdir(dir);
}

int
main(void)
{
	static const struct tap_test t[] = {
		{"cwd, exports and functions persist between commands",
		    state_persists},
		{"a long command is running, then completed with its code",
		    running_then_completed},
		{"input reaches the command; an interrupt ends it, the shell "
		    "stays", input_and_interrupt},
		{"completion markers printed by the command fool nothing",
		    markers_cannot_fool},
		{"output past the limit is truncated; \\r\\n and bad UTF-8 "
		    "mended", truncated_and_binary},
		{"a shell that exits is reset", exit_is_reset},
		{"the shell has its terminal and two pipes, nothing of its "
		    "parent's", no_fd_leaks},
		{"sh where there is no bash: state kept, the end told, an "
		    "interrupt too",
		    plain_sh},
		{"busybox's sh: nothing of its own in the output, input and "
		    "an interrupt as bash", busybox_banner},
		{"set -xu, a background job: the end is still told; "
		    "PROMPT_COMMAND is kept", set_options_and_jobs},
	};

	signal(SIGPIPE, SIG_IGN);
	return tap_run(t, sizeof t / sizeof t[0]);
}
