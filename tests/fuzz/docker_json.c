/* docker_json.c - fuzz what the docker backend makes of the engine's
 * container JSON (lib/docker/client.c: status and listing entry) */
#include "sbx.h"
#include "internal.h"
#include "docker/docker.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *c = json_loadb((const char *)data, size, 0, NULL), *o;
	char *s;

	if (!c)
		return 0;
	(void)sbx_docker_status_of(c);
	o = sbx_docker_info_of(c, "unix:///var/run/docker.sock");
	if (!o || !(s = json_dumps(o, JSON_COMPACT)))
		abort();
	free(s);
	json_decref(o);
	json_decref(c);
	return 0;
}
