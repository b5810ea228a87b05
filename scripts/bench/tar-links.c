/* tar-links.c - scripts/bench/tar-links' driver: stage a tar stream of
 * ENTRIES members, LINKS of them symlinks coming first, with sbx_tar_stage
 * (lib/tar.c, as sbx-sync pull does) and print the milliseconds of each of
 * RUNS runs */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "internal.h"

static long
want(const char *name, void *arg)
{
	long *next = arg;

	(void)name;
	return (*next)++;
}

static void
got(long slot, const struct sbx_fentry *e, void *arg)
{
	(void)slot;
	(void)e;
	(void)arg;
}

static void
add(struct archive *a, const char *name, const char *target)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, name);
	archive_entry_set_mtime(e, 1700000000, 0);
	if (target) {
		archive_entry_set_filetype(e, AE_IFLNK);
		archive_entry_set_perm(e, 0777);
		archive_entry_set_symlink(e, target);
	} else {
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, 0);
	}
	if (archive_write_header(a, e) != ARCHIVE_OK) {
		fprintf(stderr, "tar-links: %s\n", archive_error_string(a));
		exit(1);
	}
	archive_entry_free(e);
}

int
main(int argc, char **argv)
{
	long entries, links, runs, i, r, next;
	char name[64], target[64], stage[] = "/dev/shm/sbx-bench-stage.XXXXXX";
	struct archive *a;
	struct timespec t0, t1;
	struct sbx_err err = {0};
	int fd, sfd;

	if (argc != 4) {
		fprintf(stderr, "usage: tar-links ENTRIES LINKS RUNS\n");
		return 2;
	}
	entries = strtol(argv[1], NULL, 10);
	links = strtol(argv[2], NULL, 10);
	runs = strtol(argv[3], NULL, 10);
	/* Links a/fN to ../dNN/fN, then the files dNN/fN. */
	if ((fd = memfd_create("tar", MFD_CLOEXEC)) < 0)
		return 1;
	a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_open_fd(a, fd);
	for (i = 0; i < links; i++) {
		snprintf(name, sizeof name, "a/f%06ld", i);
		snprintf(target, sizeof target, "../d%02ld/f%06ld", i % 100, i);
		add(a, name, target);
	}
	for (i = 0; i < entries - links; i++) {
		snprintf(name, sizeof name, "d%02ld/f%06ld", i % 100, i);
		add(a, name, NULL);
	}
	archive_write_close(a);
	archive_write_free(a);
	for (r = 0; r < runs; r++) {
		if (!mkdtemp(stage) ||
		    (sfd = open(stage, O_RDONLY | O_DIRECTORY)) < 0 ||
		    lseek(fd, 0, SEEK_SET) < 0)
			return 1;
		next = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (sbx_tar_stage(fd, sfd, want, got, &next, &err) < 0) {
			fprintf(stderr, "tar-links: %s\n", err.msg);
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("%.0f\n", (t1.tv_sec - t0.tv_sec) * 1e3 +
		    (t1.tv_nsec - t0.tv_nsec) / 1e6);
		/* The staged files go, untimed. */
		for (i = 0; i < next; i++) {
			snprintf(name, sizeof name, "%ld", i);
			unlinkat(sfd, name, 0);
		}
		close(sfd);
		rmdir(stage);
		memcpy(stage + strlen(stage) - 6, "XXXXXX", 6);
	}
	return 0;
}
