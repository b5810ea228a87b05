/* sbx-netd - the network of a local sandbox with -n allow: its egress
 * proxy and DNS forwarder; started by sbx-create, not by hand */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "netd.h"

/* sbx-create's end of the ready pipe. */
#define READY_FD 3

static const char usage[] = "usage: sbx-netd [-qv] dir pid\n"
    "       sbx-netd [-qv] --ca dir\n";

static const struct option longopts[] = {
	{"ca", no_argument, NULL, 'c'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"quiet", no_argument, NULL, 'q'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* One line on the ready pipe, which then closes: sbx-create waits for it
 * and reports the error line as its own. */
static void
ready(int fd, const char *line)
{
	if (fd < 0)
		return;
	(void)sbx_write_all(fd, line, strlen(line));
	close(fd);
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"ca", NULL, "only make the sandbox's CA in dir"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-netd --ca /tmp/ca    (as sbx-net runs it: not by hand)",
	8,
};

int
main(int argc, char **argv)
{
	struct sbx_err err;
	char buf[sizeof err.msg + 2];
	uint64_t pid;
	int c, fd, ca = 0;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "chqvV", longopts, NULL)) != -1)
		if (c == 'c')
			ca = 1;
		else if (!sbx_opt_common(c, usage))
			sbx_usage(usage, SBX_EX_USAGE);
	/* sbx-net adding header injection to a sandbox that runs: its CA,
	 * staged for sbx-net to put into the sandbox's trust store. */
	if (ca) {
		if (argc - optind != 1)
			sbx_usage_error(usage, "expected a directory");
		if (sbx_netd_ca(argv[optind], &err) < 0)
			sbx_die_err(&err);
		return SBX_EX_OK;
	}
	if (argc - optind != 2)
		sbx_usage_error(usage, "expected a directory and a pid");
	/* "-": the pid comes on stdin, once sbx-create has it. */
	if (!strcmp(argv[optind + 1], "-"))
		pid = 0;
	else if (sbx_parse_u64(argv[optind + 1], 2, 0x7fffffff, &pid) < 0)
		sbx_usage_error(usage, "invalid pid '%s'", argv[optind + 1]);
	/* Run by hand without one, the errors go to stderr alone. */
	fd = fcntl(READY_FD, F_GETFD) < 0 ? -1 : READY_FD;
	if (fd >= 0)
		fcntl(fd, F_SETFD, FD_CLOEXEC);

	if (sbx_netd_start(argv[optind], (pid_t)pid, &err) < 0) {
		snprintf(buf, sizeof buf, "%s\n", err.msg);
		ready(fd, buf);
		/* 1 whatever the cause: sbx-create has the message. */
		sbx_die(SBX_EX_FAIL, "%s", err.msg);
	}
	snprintf(buf, sizeof buf, "ok %d\n", (int)getpid());
	ready(fd, buf);
	if (sbx_netd_run(&err) < 0)
		sbx_die_err(&err);
	return SBX_EX_OK;
}
