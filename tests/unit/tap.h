/* tap.h - the little TAP harness the C unit tests share: CHECK() records a
 * failed condition, tap_run() runs each test in a child of its own so that
 * a crash fails one test and the rest still run. */
#ifndef SBX_TAP_H
#define SBX_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int fails;

static void
check(int ok, const char *what, int line)
{
	if (!ok) {
		fails++;
		printf("# line %d: %s\n", line, what);
	}
}
#define CHECK(c) check(!!(c), #c, __LINE__)

struct tap_test {
	const char *name;
	void (*fn)(void);
};

static int
tap_run(const struct tap_test *tests, size_t n)
{
	int bad = 0, status;
	size_t i;
	pid_t pid;

	printf("1..%zu\n", n);
	for (i = 0; i < n; i++) {
		fflush(stdout);
		if ((pid = fork()) == 0) {
			tests[i].fn();
			fflush(stdout);
			exit(fails ? 1 : 0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) < 0)
			status = -1;
		if (pid > 0 && WIFSIGNALED(status))
			printf("# killed by signal %d\n", WTERMSIG(status));
		else if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) > 1)
			printf("# exit status %d (sanitizer?)\n",
			    WEXITSTATUS(status));
		if (status == 0) {
			printf("ok %zu %s\n", i + 1, tests[i].name);
		} else {
			printf("not ok %zu %s\n", i + 1, tests[i].name);
			bad++;
		}
	}
	return bad ? 1 : 0;
}

#endif
