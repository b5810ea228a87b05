/* shell.c - a persistent shell session (sbx-shell): bash on a pty that
 * lives between calls, commands handed to it on a pipe of their own, and
 * their end told on another, never on the stream the command writes to */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "sbx.h"

/* The shell's ends of the two pipes: high, out of a script's way (a
 * script's own `exec 3>file` must not cut us off); sh has only 0-9. */
enum { FD_CMD = 98, FD_DONE = 99, SH_FD_CMD = 8, SH_FD_DONE = 9 };

/* What the agent keeps of the output between two calls. */
#define KEEP_MAX SBX_SHELL_LIMIT_MAX
/* A command is handed over in one pipe write. */
#define CMD_MAX (1u << 20)

struct sbx_shell {
	pid_t pid;          /* the shell; 0 once it has been reaped */
	int master;         /* the pty */
	int cmd;            /* our end of the command pipe */
	int done;           /* our end of the completion pipe */
	int bash;           /* 0: sh, whose end is told by the line itself */
	int running;        /* a command was given and has not ended */
	int completed;      /* it ended: code holds its status */
	int dead;           /* the shell is gone (reset) */
	int ready;          /* it said so: what it printed before is not kept */
	int code;
	char id[17];        /* the running command's */
	struct sbx_buf out; /* its output since the last take */
	char line[64];      /* a part of a completion line */
	size_t nline;
};

/* bash reads the command from FD_CMD (NUL-terminated: a command has no
 * NUL) and PROMPT_COMMAND, run before each prompt even after ^C, writes
 * "ID STATUS" to FD_DONE. Read-only, so that a script cannot drop it;
 * xtrace of it goes to /dev/null. */
static const char bash_setup[] =
	"PROMPT_COMMAND='{ __sbx_rc=$?; if [ -n \"${__sbx_id-}\" ]; then "
	"printf \"%s %s\\n\" \"$__sbx_id\" \"$__sbx_rc\" >&99; __sbx_id=; "
	"fi; } 2>/dev/null'; declare -r PROMPT_COMMAND; PS1=; PS2=; "
	"unset HISTFILE; echo R >&99\n";
/* sh has no PROMPT_COMMAND: it runs this loop, not interactive (no job
 * control, no banner), its commands in its own process group, so that a
 * ^C reaches them and the trapped shell goes on to tell their end. A
 * command comes as "ID LENGTH\n" and its bytes on fd 8. */
static const char sh_loop[] =
	"trap : INT; echo R >&9; "
	"while IFS=' ' read -r __sbx_id __sbx_n <&8; do "
	"__sbx_c=$(head -c \"$__sbx_n\" <&8); eval \"$__sbx_c\"; "
	"printf '%s %s\\n' \"$__sbx_id\" \"$?\" >&9; done";

static void
child(const char *path, int bash, int slave, int cmdr, int donew,
    const char *workdir, char *const env[], int (*prep)(void))
{
	sigset_t none;
	char *argv[6];
	int i = 0;

	setsid();
	if (ioctl(slave, TIOCSCTTY, 0) < 0)
		_exit(127);
	/* Out of the way of the targets first (a dup2 onto itself would
	 * keep O_CLOEXEC); the copies close at the exec. */
	if ((slave = fcntl(slave, F_DUPFD_CLOEXEC, 100)) < 0 ||
	    (cmdr = fcntl(cmdr, F_DUPFD_CLOEXEC, 100)) < 0 ||
	    (donew = fcntl(donew, F_DUPFD_CLOEXEC, 100)) < 0 ||
	    /* Nothing of the agent's (its socket, its config) goes on. */
	    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0 ||
	    dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0 ||
	    dup2(cmdr, bash ? FD_CMD : SH_FD_CMD) < 0 ||
	    dup2(donew, bash ? FD_DONE : SH_FD_DONE) < 0)
		_exit(127);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (i = 1; i < NSIG; i++)
		signal(i, SIG_DFL);
	if (workdir && chdir(workdir) < 0 && chdir("/") < 0)
		_exit(127);
	if (prep && prep() < 0)
		_exit(126);
	i = 0;
	argv[i++] = (char *)path;
	if (bash) {
		/* No readline: no bracketed paste, nothing drawn. */
		argv[i++] = "--noprofile";
		argv[i++] = "--norc";
		argv[i++] = "--noediting";
		argv[i++] = "-i";
	} else {
		argv[i++] = "-c";
		argv[i++] = (char *)sh_loop;
	}
	argv[i] = NULL;
	execve(path, argv, env);
	_exit(127);
}

static char **
shell_env(char *const env[])
{
	size_t n = 0, i, k = 0;
	char **e;
	int term = 0;

	while (env && env[n])
		n++;
	e = sbx_xcalloc(n + 5, sizeof *e);
	for (i = 0; i < n; i++) {
		if (!strncmp(env[i], "PS1=", 4) || !strncmp(env[i], "PS2=", 4) ||
		    !strncmp(env[i], "ENV=", 4) ||
		    !strncmp(env[i], "PROMPT_COMMAND=", 15) ||
		    !strncmp(env[i], "HISTFILE=", 9))
			continue;
		term |= !strncmp(env[i], "TERM=", 5);
		e[k++] = env[i];
	}
	/* A plain terminal: no colours, no cursor games; a venv's activate
	 * leaves the (empty) prompt alone. */
	if (!term)
		e[k++] = "TERM=dumb";
	e[k++] = "VIRTUAL_ENV_DISABLE_PROMPT=1";
	e[k++] = "PS1=";
	e[k++] = "PS2=";
	e[k] = NULL;
	return e;
}

struct sbx_shell *
sbx_shell_new(const char *shell, const char *workdir, char *const env[],
    int (*prep)(void), struct sbx_err *err)
{
	static const char *const shells[] = {"/bin/bash", "/usr/bin/bash",
	    "/bin/sh", NULL};
	struct sbx_shell *s;
	struct winsize ws = {.ws_row = 24, .ws_col = 80};
	struct termios t;
	const char *path = shell;
	int cp[2] = {-1, -1}, dp[2] = {-1, -1}, slave = -1, i;
	char **e;

	for (i = 0; shells[i] && !path; i++)
		if (access(shells[i], X_OK) == 0)
			path = shells[i];
	if (!path || access(path, X_OK) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "no shell in the sandbox: %s",
		    shell ? shell : "neither /bin/bash nor /bin/sh");
		return NULL;
	}
	s = sbx_xcalloc(1, sizeof *s);
	s->cmd = s->done = -1;
	s->bash = !strcmp(strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
	    "bash");
	if ((s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    grantpt(s->master) < 0 || unlockpt(s->master) < 0 ||
	    (slave = open(ptsname(s->master), O_RDWR | O_NOCTTY |
	    O_CLOEXEC)) < 0 || ioctl(s->master, TIOCSWINSZ, &ws) < 0 ||
	    pipe2(cp, O_CLOEXEC) < 0 || pipe2(dp, O_CLOEXEC) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make the shell's terminal:");
		goto fail;
	}
	/* What the command writes comes back, nothing else: no echo of
	 * what we type (set before anything is typed), and \n as it is. */
	if (tcgetattr(slave, &t) < 0 || (t.c_lflag &= ~(tcflag_t)(ECHO |
	    ECHOE | ECHOK | ECHONL), t.c_oflag &= ~(tcflag_t)ONLCR,
	    tcsetattr(slave, TCSANOW, &t) < 0)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot set the shell's terminal:");
		goto fail;
	}
	/* A command goes in one write: room for the largest. */
	(void)fcntl(cp[1], F_SETPIPE_SZ, CMD_MAX);
	e = shell_env(env);
	s->pid = fork();
	if (s->pid == 0)
		child(path, s->bash, slave, cp[0], dp[1], workdir, e, prep);
	free(e);
	if (s->pid < 0) {
		s->pid = 0;
		sbx_err_set(err, SBX_EX_FAIL, "cannot start the shell:");
		goto fail;
	}
	close(slave);
	close(cp[0]);
	close(dp[1]);
	s->cmd = cp[1];
	s->done = dp[0];
	fcntl(s->master, F_SETFL, O_NONBLOCK);
	fcntl(s->done, F_SETFL, O_NONBLOCK);
	if (s->bash && sbx_write_all(s->master, bash_setup,
	    sizeof bash_setup - 1) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start the shell:");
		sbx_shell_free(s);
		return NULL;
	}
	return s;
fail:
	if (slave >= 0)
		close(slave);
	for (i = 0; i < 2; i++) {
		if (cp[i] >= 0)
			close(cp[i]);
		if (dp[i] >= 0)
			close(dp[i]);
	}
	if (s->master >= 0)
		close(s->master);
	free(s);
	return NULL;
}

void
sbx_shell_free(struct sbx_shell *s)
{
	if (!s)
		return;
	if (s->pid > 0) {
		kill(-s->pid, SIGKILL);
		kill(s->pid, SIGKILL);
	}
	if (s->master >= 0)
		close(s->master);
	if (s->cmd >= 0)
		close(s->cmd);
	if (s->done >= 0)
		close(s->done);
	sbx_buf_release(&s->out);
	free(s);
}

pid_t
sbx_shell_pid(const struct sbx_shell *s)
{
	return s->pid;
}

int
sbx_shell_is_bash(const struct sbx_shell *s)
{
	return s->bash;
}

size_t
sbx_shell_pollfds(const struct sbx_shell *s, struct pollfd *p)
{
	size_t n = 0;

	if (s->master >= 0)
		p[n++] = (struct pollfd){.fd = s->master, .events = POLLIN};
	if (s->done >= 0)
		p[n++] = (struct pollfd){.fd = s->done, .events = POLLIN};
	return n;
}

static void
keep(struct sbx_shell *s, const char *p, size_t n)
{
	/* Only what a command wrote while it ran, or since: a shell at rest
	 * prints nothing of its own (no prompt), but a background job
	 * may. */
	if (s->out.len + n > KEEP_MAX) {
		n = s->out.len < KEEP_MAX ? KEEP_MAX - s->out.len : 0;
		s->out.truncated = 1;
	}
	if (n)
		sbx_buf_add(&s->out, p, n);
}

/* Everything the pty has now (each read of a pty master first moves
 * what the slave wrote across, so none of it is left behind). */
static void
drain(struct sbx_shell *s)
{
	char buf[16384];
	ssize_t n;

	while (s->master >= 0) {
		n = read(s->master, buf, sizeof buf);
		if (n > 0) {
			if (s->ready)
				keep(s, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		/* EIO: every end of the slave is closed, the shell with them */
		if (n == 0 || (n < 0 && errno != EAGAIN))
			s->dead = 1;
		break;
	}
}

static void
done_line(struct sbx_shell *s, const char *l)
{
	const char *sp = strchr(l, ' ');
	long v;
	char *end;

	if (!s->ready && !strcmp(l, "R")) {
		drain(s);
		s->ready = 1;
		return;
	}
	if (!sp || (size_t)(sp - l) != strlen(s->id) ||
	    strncmp(l, s->id, (size_t)(sp - l)) || !s->running)
		return;
	errno = 0;
	v = strtol(sp + 1, &end, 10);
	if (errno || *end || v < 0 || v > 255)
		return;
	drain(s);
	s->running = 0;
	s->completed = 1;
	s->code = (int)v;
}

void
sbx_shell_pump(struct sbx_shell *s)
{
	char buf[256];
	ssize_t n, i;

	drain(s);
	while (s->done >= 0) {
		n = read(s->done, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0) {
				close(s->done);
				s->done = -1;
			}
			break;
		}
		for (i = 0; i < n; i++) {
			if (buf[i] != '\n') {
				if (s->nline < sizeof s->line - 1)
					s->line[s->nline++] = buf[i];
				continue;
			}
			s->line[s->nline] = '\0';
			s->nline = 0;
			done_line(s, s->line);
		}
	}
}

void
sbx_shell_reaped(struct sbx_shell *s)
{
	s->pid = 0;
	s->dead = 1;
	drain(s);
}

int
sbx_shell_dead(const struct sbx_shell *s)
{
	return s->dead;
}

int
sbx_shell_running(const struct sbx_shell *s)
{
	return s->running && !s->dead;
}

int
sbx_shell_settled(const struct sbx_shell *s)
{
	return s->completed || s->dead;
}

/* A new shell's first command waits for it to be ready (a few ms; it
 * has read nothing else yet), at most READY_MS. */
#define READY_MS 10000
static int
wait_ready(struct sbx_shell *s)
{
	long long end = sbx_mono_ms() + READY_MS;
	struct pollfd p[2];
	size_t n;

	while (!s->ready && !s->dead && s->done >= 0) {
		long long left = end - sbx_mono_ms();

		if (left <= 0)
			return -1;
		n = sbx_shell_pollfds(s, p);
		if (poll(p, (nfds_t)n, (int)left) < 0 && errno != EINTR)
			return -1;
		sbx_shell_pump(s);
	}
	return s->ready ? 0 : -1;
}

int
sbx_shell_command(struct sbx_shell *s, const char *cmd, struct sbx_err *err)
{
	unsigned char r[8];
	char line[160];
	size_t len = strlen(cmd), i;
	int n;

	if (s->dead) {
		sbx_err_set(err, SBX_EX_FAIL, "the shell has ended");
		return -1;
	}
	if (s->running) {
		sbx_err_set(err, SBX_EX_FAIL, "previous command is still running");
		return -1;
	}
	if (!s->ready && wait_ready(s) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "the shell did not start");
		return -1;
	}
	if (len >= CMD_MAX) {
		sbx_err_set(err, SBX_EX_USAGE, "command too long: %zu bytes "
		    "(at most %u)", len, CMD_MAX - 1);
		return -1;
	}
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot make a command id:");
		return -1;
	}
	for (i = 0; i < sizeof r; i++)
		snprintf(s->id + 2 * i, 3, "%02x", r[i]);
	/* Output from before this command (a background job's) is not its. */
	drain(s);
	s->out.len = 0;
	s->out.truncated = 0;
	s->completed = 0;
	if (s->bash)
		n = snprintf(line, sizeof line, "__sbx_id=%s; IFS= read -r -d '' "
		    "-u %d __sbx_c; eval \"$__sbx_c\"\n", s->id, FD_CMD);
	else
		n = snprintf(line, sizeof line, "%s %zu\n", s->id, len);
	if (n < 0 || (size_t)n >= sizeof line)
		abort();
	/* bash: the command on its pipe, the line typed; sh: both on the
	 * pipe, the line first. */
	if ((!s->bash && sbx_write_all(s->cmd, line, (size_t)n) < 0) ||
	    sbx_write_all(s->cmd, cmd, len + (s->bash ? 1 : 0)) < 0 ||
	    (s->bash && sbx_write_all(s->master, line, (size_t)n) < 0)) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot give the shell its "
		    "command:");
		return -1;
	}
	s->running = 1;
	return 0;
}

int
sbx_shell_input(struct sbx_shell *s, const char *p, size_t n,
    struct sbx_err *err)
{
	if (!sbx_shell_running(s)) {
		sbx_err_set(err, SBX_EX_FAIL, "no command is running");
		return -1;
	}
	if (sbx_write_all(s->master, p, n) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot write to the shell:");
		return -1;
	}
	return 0;
}

int
sbx_shell_interrupt(struct sbx_shell *s, struct sbx_err *err)
{
	pid_t pg;

	if (!sbx_shell_running(s)) {
		sbx_err_set(err, SBX_EX_FAIL, "no command is running");
		return -1;
	}
	/* ^C as a terminal sends it: to the foreground job. */
	pg = tcgetpgrp(s->master);
	if (pg > 0 && kill(-pg, SIGINT) == 0)
		return 0;
	if (sbx_write_all(s->master, "\003", 1) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot interrupt the command:");
		return -1;
	}
	return 0;
}

/* The output as JSON text wants it: \r\n as \n, invalid UTF-8 as U+FFFD;
 * the first limit bytes of it (kept, the rest dropped). */
static void
text(const char *p, size_t n, size_t limit, int *truncated, struct sbx_buf *b)
{
	size_t i = 0, k, len;
	unsigned char c;

	if (n > limit) {
		n = limit;
		*truncated = 1;
	}
	while (i < n) {
		c = (unsigned char)p[i];
		if (c == '\r' && i + 1 < n && p[i + 1] == '\n') {
			i++;
			continue;
		}
		if (c < 0x80) {
			sbx_buf_add(b, p + i, 1);
			i++;
			continue;
		}
		len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c < 0xf0 ? 3 :
		    c >= 0xc2 && c < 0xe0 ? 2 : 0;
		for (k = 1; len && k < len; k++)
			if (i + k >= n || ((unsigned char)p[i + k] & 0xc0) != 0x80)
				len = 0;
		/* Overlong, surrogate or past U+10FFFF: jansson refuses them. */
		if (len == 3 && ((c == 0xe0 && (unsigned char)p[i + 1] < 0xa0) ||
		    (c == 0xed && (unsigned char)p[i + 1] >= 0xa0)))
			len = 0;
		if (len == 4 && ((c == 0xf0 && (unsigned char)p[i + 1] < 0x90) ||
		    (c == 0xf4 && (unsigned char)p[i + 1] >= 0x90)))
			len = 0;
		if (len) {
			sbx_buf_add(b, p + i, len);
			i += len;
		} else {
			sbx_buf_add(b, "\xef\xbf\xbd", 3);
			i++;
		}
	}
}

void
sbx_shell_take(struct sbx_shell *s, size_t limit, struct sbx_shell_out *o)
{
	size_t n = s->out.len, hold = 0;

	memset(o, 0, sizeof *o);
	o->exit_code = -1;
	o->truncated = s->out.truncated;
	if (s->dead)
		o->status = "reset";
	else if (s->completed)
		o->status = "completed";
	else
		o->status = "running";
	/* Still running: a character cut in two, or a \r whose \n is to
	 * come, waits for the next call. */
	if (!strcmp(o->status, "running") && n) {
		size_t k = n, back = 0;

		while (k > 0 && back < 3 &&
		    ((unsigned char)s->out.data[k - 1] & 0xc0) == 0x80) {
			k--;
			back++;
		}
		if (k > 0 && (unsigned char)s->out.data[k - 1] >= 0xc0) {
			unsigned char c = (unsigned char)s->out.data[k - 1];
			size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

			if (back + 1 < want)
				hold = back + 1;
		} else if (s->out.data[n - 1] == '\r')
			hold = 1;
		if (hold > n || n - hold > limit)
			hold = 0;
	}
	text(s->out.data, n - hold, limit, &o->truncated, &o->output);
	if (s->completed && !s->dead)
		o->exit_code = s->code;
	if (hold)
		memmove(s->out.data, s->out.data + n - hold, hold);
	s->out.len = hold;
	s->out.truncated = 0;
	s->completed = 0;
}
