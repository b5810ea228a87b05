/* ws.c - fuzz the WebSocket frame reader (sbx_ws_next in lib/ws.c): the
 * input is what a client sent, given in pieces whose sizes the first
 * byte picks; every message given must fit max and be a known opcode */
#include "sbx.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbx_ws_reader r = {0};
	struct sbx_ws_msg m;
	size_t off = 1, step, k;
	volatile unsigned sum = 0;
	int got;

	if (!size)
		return 0;
	step = (size_t)(data[0] & 31) + 1;
	r.max = 4096;
	while (off < size) {
		k = size - off < step ? size - off : step;
		sbx_buf_add(&r.in, data + off, k);
		off += k;
		while ((got = sbx_ws_next(&r, &m)) == 1) {
			if (m.len > r.max || (m.op != SBX_WS_TEXT &&
			    m.op != SBX_WS_BINARY && m.op != SBX_WS_CLOSE &&
			    m.op != SBX_WS_PING && m.op != SBX_WS_PONG))
				abort();
			for (k = 0; k < m.len; k++)
				sum += m.data[k]; /* all of it is readable */
		}
		if (got < 0 && r.failed != SBX_WS_PROTOCOL &&
		    r.failed != SBX_WS_TOO_BIG)
			abort();
		if (got < 0)
			break;
	}
	(void)sum;
	sbx_ws_reader_release(&r);
	return 0;
}
