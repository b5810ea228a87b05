/* ignore.c - fuzz the gitignore matcher (lib/ignore.c): the input is a
 * pattern file, a NUL, then paths one a line (a trailing '/': a dir) */
#include "sbx.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_ignore *ig = sbx_ignore_new();
	struct sbx_err err = {0};
	const uint8_t *nul = memchr(data, 0, size);
	size_t plen = nul ? (size_t)(nul - data) : size;
	char path[64], *paths, *p, *e;
	int fd = fuzz_memfd(data, plen), dir;
	size_t n;

	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	/* A refusal (a pattern file too large) is an answer too. */
	if (sbx_ignore_load(ig, path, &err) < 0) {
		close(fd);
		sbx_ignore_free(ig);
		return 0;
	}
	close(fd);
	(void)sbx_ignore_count(ig);
	(void)sbx_ignore_digest(ig);
	paths = nul ? fuzz_str(nul + 1, size - plen - 1) : fuzz_str(data, 0);
	for (p = paths; *p; p = e) {
		if ((e = strchr(p, '\n')))
			*e++ = '\0';
		else
			e = p + strlen(p);
		n = strlen(p);
		dir = n && p[n - 1] == '/';
		if (dir)
			p[n - 1] = '\0';
		(void)sbx_ignore_match1(ig, p, dir);
		(void)sbx_ignore_match(ig, p, dir);
	}
	free(paths);
	sbx_ignore_free(ig);
	return 0;
}
