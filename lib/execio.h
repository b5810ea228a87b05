/* execio.h - one exec session for every backend (backends include this,
 * cmd/ never does): the caller's terminal, stdin, the forwarded signals,
 * the output, the deadline, the exit status and the messages. A backend
 * brings only a transport, the hooks below, which the session's one poll
 * loop calls.
 *
 * A backend's exec:
 *
 *	struct sbx_xs xs;
 *
 *	sbx_xs_init(&xs, o, res, &my_transport, &my_state);  // first
 *	... find the sandbox (sbx_xs_paused, sbx_xs_not_running) ...
 *	return sbx_xs_run(&xs, err);  // start, loop, finish; all restored
 *
 * A transport over an fd (an agent's socket, a serial line, a hijacked
 * HTTP connection) gives it to the loop in fds() and reads it in
 * ready(); one over a blocking call (a streamed HTTP response) makes the
 * call on a thread of its own, which writes the output and wakes the
 * loop through a pipe (lib/e2b.c).
 */
#ifndef SBX_EXECIO_H
#define SBX_EXECIO_H

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "sbx.h"

#define SBX_XS_FDS 8        /* the pollfds a transport may fill */

struct sbx_xs;

/* A transport's hooks. t is the transport's own state; err is filled on
 * -1. Each hook but start and finish may be NULL. */
struct sbx_xs_transport {
	/* Signals forwarded to the command (SBX_XS_SIG(SIGINT) | ...):
	 * blocked for the session, read from its signalfd, and passed to
	 * signal(). SIGWINCH is always the session's: resize(). */
	unsigned long signals;
	/* SBX_XS_*, below. */
	unsigned flags;
	/* Starts the command (with a pty, the caller's terminal is raw
	 * already). */
	int (*start)(void *t, struct sbx_xs *xs, struct sbx_err *err);
	/* Fills up to SBX_XS_FDS pollfds for the loop (fd -1 for none) and
	 * returns how many; may lower *wake, the sbx_mono_ms() time at
	 * which ready() wants to be called whatever comes (-1: none; a
	 * time past: at once). */
	int (*fds)(void *t, struct pollfd *p, long long *wake);
	/* After each poll: the same pollfds with their revents. */
	int (*ready)(void *t, struct sbx_xs *xs, const struct pollfd *p,
	    int n, struct sbx_err *err);
	/* Bytes of the caller's stdin for the command; n 0: its end,
	 * without a pty (with one, the end comes as ^D through input). -1:
	 * the command takes no more, and stdin is no longer read. */
	int (*input)(void *t, struct sbx_xs *xs, const char *p, size_t n);
	/* A forwarded signal (SIGWINCH never comes here). */
	void (*signal)(void *t, int sig);
	/* With a pty, our stdin's end: the terminal's end of file. NULL: a
	 * ^D through input. */
	void (*tty_eof)(void *t);
	/* The caller's window changed (with a pty): sbx_xs_winsize(). */
	void (*resize)(void *t);
	/* With SBX_XS_DEADLINE, once o->timeout_ms has passed: kill the
	 * command (all it started). The session has set res->timed_out
	 * (finish says it: sbx_xs_end SBX_XS_TIMEDOUT, 124) and waits for
	 * the end (sbx_xs_done) SBX_XS_DRAIN_MS at most. */
	int (*expire)(void *t, struct sbx_err *err);
	/* With SBX_XS_DEADLINE: how long the sandbox has been paused since
	 * the command started, in ms, a pause going on included; time that
	 * the deadline does not count. Asked when it has passed. NULL: 0. */
	long long (*paused_ms)(void *t);
	/* The loop is over (sbx_xs_done, or the drain ran out): the
	 * command's status, through sbx_xs_end or a start error. */
	int (*finish)(void *t, struct sbx_xs *xs, struct sbx_err *err);
};

#define SBX_XS_SIG(s) (1UL << (s))
/* What every backend forwards: the signals that ask a command to end. */
#define SBX_XS_SIGS_END (SBX_XS_SIG(SIGINT) | SBX_XS_SIG(SIGTERM) | \
    SBX_XS_SIG(SIGHUP) | SBX_XS_SIG(SIGQUIT))
/* The transport hands the caller's fds 0-2 to the command itself, when
 * there is no pty: the session reads stdin for a pty only. */
#define SBX_XS_PASS_STDIO 1u
/* The session keeps o->timeout_ms and calls expire(). */
#define SBX_XS_DEADLINE 2u
#define SBX_XS_DRAIN_MS 5000

/* The session. Transports read o, res, std_open and old; the rest is the
 * session's own. */
struct sbx_xs {
	const struct sbx_exec_opts *o;
	struct sbx_exec_result *res;
	const struct sbx_xs_transport *tp;
	void *t;
	long long t0;
	unsigned std_open; /* bit n: fd n (0, 1, 2) was open when the session
			    * began */
	int in_state;    /* 0 read, 1 held by the transport, 2 at its end */
	int done;
	int outs[3];     /* fds the session reads output from, or -1 */
	int out_stream[3];
	int out_dead[3]; /* writes to fd 1 or 2 failed: the rest is dropped */
	int sfd;
	int raw;
	sigset_t sigs, old; /* old: the mask to give a child (a guard) */
	struct termios saved;
};

/* Before anything else (fd 0 is judged before the backend opens any):
 * zeroes res, starts the clock. */
void sbx_xs_init(struct sbx_xs *xs, const struct sbx_exec_opts *o,
    struct sbx_exec_result *res, const struct sbx_xs_transport *tp, void *t);
/* Blocks the signals (threads the transport starts inherit the mask),
 * makes a pty's terminal raw, starts, runs the loop, finishes; the
 * terminal and the signal mask as they were on every path;
 * res->duration_ms up to the loop's end. */
int sbx_xs_run(struct sbx_xs *xs, struct sbx_err *err);

/* For transports. */
/* Output of the command: to fd 1 or 2, or to res->out/err with
 * o->capture. A reader gone (EPIPE or any write error) drops the rest
 * of that stream; the command runs on. */
void sbx_xs_output(struct sbx_xs *xs, int stream, const void *p, size_t n);
/* (A transport's own thread may call it, when no other thread does and
 * the transport uses no sbx_xs_add_output.) */
/* An fd the session reads to its end as stream 1 or 2 (a pty, a pipe),
 * also after sbx_xs_done, for what is already there. */
void sbx_xs_add_output(struct sbx_xs *xs, int fd, int stream);
/* While held, stdin is not read (the transport is not ready for it). */
void sbx_xs_hold_input(struct sbx_xs *xs, int hold);
/* Whether stdin goes to the command through the session (input()): with
 * a pty, or -i without SBX_XS_PASS_STDIO. A closed fd 0 ends at once. */
int sbx_xs_forwards_input(const struct sbx_xs *xs);
/* The command's stream has ended: the loop stops. */
void sbx_xs_done(struct sbx_xs *xs);

/* The caller's window size: fd 1's, else fd 0's (the terminal the
 * output is drawn on, as curses asks). -1 and 0x0 when neither has one. */
int sbx_xs_winsize(struct winsize *ws);
/* TERM for a pty: the caller's, or "xterm"; -e TERM=... still wins
 * (the transport puts it after). */
const char *sbx_xs_term(void);

/* How a command ended, into res: exit_code, signal, timed_out. */
enum sbx_xs_how { SBX_XS_EXITED, SBX_XS_KILLED, SBX_XS_TIMEDOUT };
void sbx_xs_end(struct sbx_exec_result *res, enum sbx_xs_how how, int n);
/* As a shell's status says it: 128+N (N a signal) killed by N, else
 * exited with code & 255. */
void sbx_xs_end_status(struct sbx_exec_result *res, long long code);

/* What an engine's text says when it could not start the command. */
enum sbx_xs_why {
	SBX_XS_START_OTHER,    /* 125 */
	SBX_XS_START_WORKDIR,  /* 125: the workdir, not the command */
	SBX_XS_START_NOTFOUND, /* 127 */
	SBX_XS_START_NOEXEC,   /* 126 */
};
enum sbx_xs_why sbx_xs_start_why(const char *text);
/* As env(1) says it: 127 "'CMD': No such file or directory", 126
 * "'CMD': Permission denied", else 125 "cannot start 'CMD': DETAIL".
 * Returns -1. */
int sbx_xs_start_fail(struct sbx_err *err, enum sbx_xs_why why,
    const char *cmd, const char *detail);

/* A guard: a child of ours in a session of its own, holding none of the
 * caller's fds, that calls kill(arg) should we die (SIGKILL included)
 * before sbx_xs_guard_stop: for a server that never ends a command whose
 * client is gone. Started before the command (old: xs->old, the mask
 * to give it); a fork that fails leaves none. */
struct sbx_xs_guard {
	pid_t pid;
	int fd;
	void (*job)(void *arg); /* set before the start: for _leave */
};
void sbx_xs_guard_start(struct sbx_xs_guard *g, const sigset_t *old,
    void (*kill)(void *arg), void *arg);
/* The command ended (or never started): the guard stands down. */
void sbx_xs_guard_stop(struct sbx_xs_guard *g);
/* The command ended: the guard stands down, and a process of its own
 * (init's child, in no session of ours, holding none of our fds) does
 * its job(arg): a clean-up no one needs to wait for. 0, or -1 when
 * there is no guard or job (do it yourself). */
int sbx_xs_guard_leave(struct sbx_xs_guard *g);

/* The messages every backend says alike; each returns -1. */
int sbx_xs_paused(struct sbx_err *err, const char *id, const char *how);
int sbx_xs_not_running(struct sbx_err *err, const char *id,
    const char *state);
int sbx_xs_vanished(struct sbx_err *err, const char *id, const char *cmd);

#endif
