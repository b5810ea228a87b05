/* config.c - fuzz the config file reader (lib/config.c's load_file,
 * static, so that file is compiled into the harness) */
#include "../../lib/config.c"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], env[128];
	const char *k;
	json_t *v;
	int fd = fuzz_memfd(data, size);

	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	json_decref(settings);
	settings = json_object();
	load_file(path);
	close(fd);
	json_object_foreach(settings, k, v) {
		if (!json_is_string(v))
			abort();
		(void)sbx_config_env(k, env, sizeof env);
	}
	return 0;
}
