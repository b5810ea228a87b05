/* progress.c - one self-overwriting line of files, bytes and rate on a
 * terminal's stderr, for transfers that take a while */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "sbx.h"

static struct {
	int on, shown;
	uint64_t files, bytes;
	double start, last;
} pg;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void
sbx_progress_start(int on)
{
	pg.on = on;
	pg.shown = 0;
	pg.files = pg.bytes = 0;
	pg.start = pg.last = now_s();
}

static void
show(double t)
{
	double el = t - pg.start;

	fprintf(stderr, "\r%s: %llu files, %.1f MiB, %.1f MiB/s\033[K",
	    sbx_prog_get(), (unsigned long long)pg.files,
	    pg.bytes / 1048576.0, el > 0 ? pg.bytes / 1048576.0 / el : 0.0);
	pg.shown = 1;
	pg.last = t;
}

void
sbx_progress_add(uint64_t files, uint64_t bytes)
{
	double t;

	if (!pg.on)
		return;
	pg.files += files;
	pg.bytes += bytes;
	/* Ten times a second at most: a terminal is slow too. */
	if ((t = now_s()) - pg.last >= 0.1)
		show(t);
}

void
sbx_progress_end(void)
{
	if (!pg.on)
		return;
	/* The last word, however quick it was. */
	if (pg.shown || pg.files) {
		show(now_s());
		fputc('\n', stderr);
	}
	pg.on = 0;
}
