/* fuzz.h - what the libFuzzer harnesses of tests/fuzz/ share */
#ifndef SBX_FUZZ_H
#define SBX_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input in an anonymous file, at offset 0 (libarchive, fopen and
 * jansson read it as they read a file on disk); its path for those that
 * open by name is "/proc/self/fd/FD". Aborts on failure: the harness is
 * broken, not the library. */
static inline int
fuzz_memfd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	size_t off = 0;
	ssize_t w;

	if (fd < 0)
		abort();
	while (off < size) {
		if ((w = write(fd, data + off, size - off)) <= 0)
			abort();
		off += (size_t)w;
	}
	if (lseek(fd, 0, SEEK_SET) < 0)
		abort();
	return fd;
}

/* A NUL-terminated copy of the input. */
static inline char *
fuzz_str(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}
#endif
