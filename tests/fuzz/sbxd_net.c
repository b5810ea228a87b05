/* sbxd_net.c - fuzz sbxd's parser of a create request's network fields
 * (net_of in lib/sbxd/control.c: network, allow_internet_access,
 * maskRequestHost; static, so that file is compiled into the harness) */
#include "../../lib/sbxd/control.c"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	json_t *shown = NULL;
	struct sbx_spec spec = {0};
	char msg[512];

	if (!json_is_object(j)) {
		json_decref(j);
		return 0;
	}
	(void)net_of(j, &spec, &shown, msg, sizeof msg);
	/* As create() releases them, on success or failure. */
	json_decref(shown);
	json_decref(spec.net_rules);
	json_decref(spec.net_inject);
	proxy_free(spec.egress_proxy);
	json_decref(j);
	return 0;
}
