/* docker_tar.c - fuzz the docker backend's own tar reader (tar_first in
 * lib/docker/ca.c, static, so that file is compiled into the harness):
 * the engine's archive of a file or a symlink */
#include "../../lib/docker/ca.c"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_buf b = SBX_BUF_INIT, t = SBX_BUF_INIT, c = SBX_BUF_INIT;
	char *link = NULL, *link2 = NULL;
	int rc;

	if (tar_first(data, size, &b, &link) < 0)
		goto out;
	/* What it read, written again by tar_add, reads back the same. */
	if (link && strlen(link) >= 100)
		goto out; /* a PAX linkpath: tar_add writes ustar only */
	if (link)
		tar_add(&t, "l", '2', 0777, NULL, 0, link);
	else
		tar_add(&t, "f", '0', 0644, b.data, b.len, NULL);
	rc = tar_first((unsigned char *)t.data, t.len, &c, &link2);
	if (rc < 0 || !link != !link2 || (link && strcmp(link, link2)) ||
	    (!link && (c.len != b.len || (b.len && memcmp(c.data, b.data,
	    b.len)))))
		abort();
out:
	free(link);
	free(link2);
	sbx_buf_release(&b);
	sbx_buf_release(&t);
	sbx_buf_release(&c);
	return 0;
}
