/* state.c - fuzz the state file reader (sbx_state_read, lib/state.c) */
#include "sbx.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_state st;
	struct sbx_err err = {0};
	char path[64];
	int fd = fuzz_memfd(data, size);

	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	if (sbx_state_read(&st, path, &err) == 0) {
		/* What the tools do next with a state they read. */
		sbx_state_set_status(st.root, "paused");
		sbx_state_set_status(st.root, "running");
		sbx_state_release(&st);
	}
	close(fd);
	return 0;
}
