/* tar.h - the tar harnesses' sandbox: a temp dir holding project/ (the
 * current directory) and stage/, emptied after each input; anything else
 * appearing in it, or project/ moving, is a crash */
#ifndef SBX_FUZZ_TAR_H
#define SBX_FUZZ_TAR_H
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "sbx.h"
#include "internal.h"

#include "fuzz.h"

static char tar_base[64], tar_project[80], tar_stage[80];
static int tar_cwd = -1; /* libFuzzer's, given back after each input */

static void
tar_cleanup(void)
{
	if (tar_base[0] && chdir("/") == 0)
		(void)sbx_rmtree(tar_base);
}

static void
tar_setup(void)
{
	if (tar_base[0])
		return;
	if ((tar_cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		abort();
	snprintf(tar_base, sizeof tar_base, "/tmp/sbx-fuzz-tar.XXXXXX");
	if (!mkdtemp(tar_base))
		abort();
	snprintf(tar_project, sizeof tar_project, "%s/project", tar_base);
	snprintf(tar_stage, sizeof tar_stage, "%s/stage", tar_base);
	atexit(tar_cleanup);
}

/* Fresh, empty project/ and stage/, and the cwd in project/. */
static void
tar_fresh(void)
{
	tar_setup();
	if (chdir(tar_base) < 0)
		abort();
	(void)sbx_rmtree(tar_project);
	(void)sbx_rmtree(tar_stage);
	if (mkdir(tar_project, 0755) < 0 || mkdir(tar_stage, 0700) < 0 ||
	    chdir(tar_project) < 0)
		abort();
}

/* Only project/ and stage/ in the base, and no symlink where they were;
 * then back to libFuzzer's cwd (its corpus paths may be relative). */
static void
tar_check(void)
{
	DIR *d = opendir(tar_base);
	struct dirent *de;
	struct stat st;

	if (!d)
		abort();
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "project") &&
		    strcmp(de->d_name, "stage")) {
			fprintf(stderr, "written outside: %s\n", de->d_name);
			abort();
		}
	closedir(d);
	/* The seeds' way out: a symlink to /tmp, then l/evil through it. */
	if (lstat("/tmp/evil", &st) == 0) {
		fprintf(stderr, "written outside: /tmp/evil\n");
		abort();
	}
	if (lstat(tar_project, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    lstat(tar_stage, &st) < 0 || !S_ISDIR(st.st_mode))
		abort();
	if (fchdir(tar_cwd) < 0)
		abort();
}
#endif
