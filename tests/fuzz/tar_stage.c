/* tar_stage.c - fuzz the tar staging reader (sbx_tar_stage, lib/tar.c):
 * every name is wanted once, but for those starting with 'x' */
#include "tar.h"

struct fuzz_asked {
	long next, given;
};

static long
want(const char *name, void *arg)
{
	struct fuzz_asked *a = arg;

	if (name[0] == 'x' || a->next >= 4096)
		return -1;
	return a->next++;
}

static void
got(long slot, const struct sbx_fentry *e, void *arg)
{
	struct fuzz_asked *a = arg;

	if (slot < 0 || slot >= a->next || (e->type != 'f' && e->type != 'l'))
		abort();
	a->given++;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_asked a = {0};
	struct sbx_err err = {0};
	int fd = fuzz_memfd(data, size), sfd;

	tar_fresh();
	if ((sfd = open(tar_stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		abort();
	(void)sbx_tar_stage(fd, sfd, want, got, &a, &err);
	close(sfd);
	close(fd);
	tar_check();
	return 0;
}
