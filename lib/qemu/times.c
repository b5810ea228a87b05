/* times.c - the agent's `sbx-init --set-times`, run in a qemu VM after a
 * push's tar (the image's own, busybox's keeping whole seconds) as an
 * exec of /proc/self/exe: sets each file's mtime to the nanosecond, as
 * the host's. Part of sbx-init alone. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"
#include "qemu/guest.h"

/* A path as sbx-sync names one: relative, no "." or ".." in it. */
static int
plain(const char *p)
{
	const char *s = p, *e;

	if (!*p || *p == '/')
		return 0;
	for (; *s; s = e + (*e != '\0')) {
		e = s + strcspn(s, "/");
		if (e == s || (e - s == 1 && s[0] == '.') ||
		    (e - s == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
	}
	return 1;
}

int
sbx_guest_set_times(void)
{
	struct sbx_buf in = SBX_BUF_INIT;
	char buf[65536], *p, *end, *sp;
	long long ns;
	ssize_t n;
	int rc = 0;

	while ((n = read(0, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("sbx-init: stdin");
			return SBX_EX_FAIL;
		}
		sbx_buf_add(&in, buf, (size_t)n);
	}
	p = in.data;
	end = p ? p + in.len : NULL;
	while (p && p < end) {
		char *rec = p, *z = memchr(p, '\0', (size_t)(end - p));

		if (!z) {
			fprintf(stderr, "sbx-init: --set-times: a record "
			    "without its end\n");
			rc = SBX_EX_USAGE;
			break;
		}
		p = z + 1;
		errno = 0;
		ns = strtoll(rec, &sp, 10);
		if (errno || sp == rec || *sp != ' ' || ns < 0 ||
		    !plain(sp + 1)) {
			fprintf(stderr, "sbx-init: --set-times: a bad record\n");
			rc = SBX_EX_USAGE;
			break;
		}
		{
			struct timespec t[2] = {
				{.tv_nsec = UTIME_OMIT},
				{.tv_sec = ns / 1000000000LL,
				 .tv_nsec = ns % 1000000000LL},
			};

			/* A file gone since is none of ours. */
			if (utimensat(AT_FDCWD, sp + 1, t,
			    AT_SYMLINK_NOFOLLOW) < 0 && errno != ENOENT) {
				fprintf(stderr, "sbx-init: cannot set the "
				    "time of '%s': %s\n", sp + 1,
				    strerror(errno));
				rc = SBX_EX_FAIL;
			}
		}
	}
	sbx_buf_release(&in);
	return rc;
}
