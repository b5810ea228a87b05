/* tar_extract.c - fuzz the tar extractor (sbx_tar_extract, lib/tar.c)
 * into a temp dir, checking nothing lands outside it */
#include "tar.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_err err = {0};
	int fd = fuzz_memfd(data, size);

	tar_fresh();
	(void)sbx_tar_extract(fd, &err);
	close(fd);
	tar_check();
	return 0;
}
