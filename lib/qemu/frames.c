/* frames.c - msg.c's frames in memory, for the qemu backend's relays (the
 * keeper, sbx-exec), which read and write without blocking */
#include <string.h>

#include "msg.h"
#include "qemu.h"

void
sbx_qemu_frame_put(struct sbx_buf *q, uint32_t type, const void *p, size_t n)
{
	uint32_t h[2] = {(uint32_t)n, type};

	sbx_buf_add(q, h, sizeof h);
	if (n)
		sbx_buf_add(q, p, n);
}

int
sbx_qemu_frames_take(struct sbx_buf *in, int (*fn)(void *arg, uint32_t type,
    const char *p, size_t n), void *arg)
{
	uint32_t h[2];
	size_t off = 0;
	int rc = 0;

	while (!rc && in->len - off >= sizeof h) {
		memcpy(h, in->data + off, sizeof h);
		if (h[0] > SBX_MSG_MAX) {
			rc = -1;
			break;
		}
		if (in->len - off - sizeof h < h[0])
			break;
		rc = fn(arg, h[1], in->data + off + sizeof h, h[0]);
		off += sizeof h + h[0];
	}
	memmove(in->data, in->data + off, in->len - off);
	in->len -= off;
	return rc;
}
