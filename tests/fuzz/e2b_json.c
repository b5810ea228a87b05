/* e2b_json.c - fuzz what the e2b backend makes of E2B's sandbox JSON
 * (lib/e2b/client.c: the listing entry of a SandboxDetail) */
#include "sbx.h"
#include "internal.h"
#include "e2b/e2b.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *s = json_loadb((const char *)data, size, 0, NULL), *o;
	char *d;

	if (!s)
		return 0;
	o = sbx_e2b_info_of(s, "https://api.e2b.dev");
	if (!o || !(d = json_dumps(o, JSON_COMPACT)))
		abort();
	free(d);
	json_decref(o);
	json_decref(s);
	return 0;
}
