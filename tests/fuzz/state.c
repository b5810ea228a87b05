/* state.c - fuzz the state file reader (sbx_state_read, lib/state.c) */
#include "sbx.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_state st;
	struct sbx_err err = {0};
	struct sbx_rate r;
	uint64_t secs, units;
	char path[64];
	int fd = fuzz_memfd(data, size);

	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	if (sbx_state_read(&st, path, &err) == 0) {
		/* What the tools do next with a state they read: its
		 * backend, its cost, a change of status. */
		(void)sbx_backend_of(json_object_get(st.root, "ref"), &err);
		if (sbx_cost_running(st.root, 1800000000, &secs, &err) == 0 &&
		    sbx_cost_rate("e2b", NULL, st.root, &r, &err) == 0)
			(void)sbx_cost_estimate(&r, secs, &units, &err);
		sbx_state_set_status(st.root, "paused");
		sbx_state_set_status(st.root, "running");
		sbx_state_release(&st);
	}
	close(fd);
	return 0;
}
