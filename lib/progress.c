/* progress.c - one self-overwriting line of files, bytes, percentage and
 * ETA on a terminal's stderr, for transfers that take a while; a
 * diagnostic clears it and it is drawn again below */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static struct {
	int on, shown, has_total;
	uint64_t files, bytes, tfiles, tbytes;
	double start, last;
} pg;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
show(double t)
{
	double el = t - pg.start, mib = pg.bytes / 1048576.0, f, eta;
	char left[32];

	if (!pg.has_total) {
		fprintf(stderr, "\r%s: %llu files, %.1f MiB, %.1f MiB/s\033[K",
		    sbx_prog_get(), (unsigned long long)pg.files, mib,
		    el > 0 ? mib / el : 0.0);
		goto out;
	}
	/* Bytes are the work; files where there are no bytes. */
	f = pg.tbytes ? (double)pg.bytes / pg.tbytes : pg.tfiles ?
	    (double)pg.files / pg.tfiles : 1;
	if (f > 1)
		f = 1;
	if (f <= 0 || el <= 0)
		snprintf(left, sizeof left, "--:--");
	else {
		eta = el * (1 - f) / f + 0.5;
		snprintf(left, sizeof left, "%d:%02d", (int)(eta / 60),
		    (int)eta % 60);
	}
	fprintf(stderr, "\r%s: %llu/%llu files, %.1f/%.1f MiB, %3d%%, "
	    "%.1f MiB/s, ETA %s\033[K", sbx_prog_get(),
	    (unsigned long long)pg.files, (unsigned long long)pg.tfiles, mib,
	    pg.tbytes / 1048576.0, (int)(f * 100), el > 0 ? mib / el : 0.0,
	    left);
out:
	pg.shown = 1;
	pg.last = t;
}

/* Around a diagnostic: the line goes, the message gets a line of its
 * own, and the line comes back under it. */
static void
around_diag(int after)
{
	if (!pg.on || !pg.shown)
		return;
	if (after)
		show(now_s());
	else
		fputs("\r\033[K", stderr);
}

void
sbx_progress_start(int on)
{
	pg.on = on;
	pg.shown = pg.has_total = 0;
	pg.files = pg.bytes = pg.tfiles = pg.tbytes = 0;
	pg.start = pg.last = now_s();
	sbx_diag_hook_set(on ? around_diag : NULL);
}

void
sbx_progress_total(uint64_t files, uint64_t bytes)
{
	pg.tfiles = files;
	pg.tbytes = bytes;
	pg.has_total = 1;
}

void
sbx_progress_add(uint64_t files, uint64_t bytes)
{
	double t;

	if (!pg.on)
		return;
	pg.files += files;
	pg.bytes += bytes;
	/* At once, then ten times a second at most: a terminal is slow. */
	if (!pg.shown || (t = now_s()) - pg.last >= 0.1)
		show(now_s());
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
	sbx_diag_hook_set(NULL);
}
