/* e2bproto.c - fuzz Connect envelopes and base64 (lib/e2bproto.c): the
 * input as a stream of envelopes, each payload as base64 */
#include "sbx.h"
#include "internal.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *payload;
	struct sbx_buf out = SBX_BUF_INIT, again = SBX_BUF_INIT;
	size_t len, left = size;
	char *s;
	long took;
	int flags;

	while ((took = sbx_e2b_unframe(p, left, 1 << 16, &flags, &payload,
	    &len)) > 0) {
		if ((size_t)took > left || payload < p ||
		    payload + len > p + took)
			abort();
		s = fuzz_str((const uint8_t *)payload, len);
		(void)sbx_e2b_unb64(s, &out);
		free(s);
		p += took;
		left -= (size_t)took;
	}
	/* The whole input as base64: what decodes re-encodes and decodes
	 * to the same bytes. */
	s = fuzz_str(data, size);
	if (sbx_e2b_unb64(s, &out) == 0) {
		sbx_e2b_frame(&again, SBX_E2B_FRAME_END, out.data, out.len);
		took = sbx_e2b_unframe(again.data, again.len, out.len,
		    &flags, &payload, &len);
		if (took != (long)again.len || len != out.len ||
		    flags != SBX_E2B_FRAME_END ||
		    (len && memcmp(payload, out.data, len)))
			abort();
	}
	free(s);
	sbx_buf_release(&out);
	sbx_buf_release(&again);
	return 0;
}
