/* ws.c - WebSocket frames (RFC 6455) as a server reads and writes them:
 * a reader that takes bytes as they come and gives whole messages
 * (fragments joined, payloads unmasked) and control frames, refusing
 * what breaks the protocol with the close code to send; and the header
 * of a frame to write (a server's: never masked). A client's side too:
 * a reader of a server's unmasked frames, and masked frames to send. */
#include <string.h>
#include <sys/random.h>

#include "sbx.h"

void
sbx_ws_reader_release(struct sbx_ws_reader *r)
{
	sbx_buf_release(&r->in);
	sbx_buf_release(&r->msg);
	memset(r, 0, sizeof *r);
}

static int
fail(struct sbx_ws_reader *r, int code)
{
	r->failed = code;
	return -1;
}

int
sbx_ws_next(struct sbx_ws_reader *r, struct sbx_ws_msg *m)
{
	unsigned char *p;
	size_t n, hl, i;
	uint64_t len;
	int fin, op, masked;

	if (r->failed)
		return -1;
	/* What the last call gave is gone now. */
	if (r->used) {
		memmove(r->in.data, r->in.data + r->used, r->in.len - r->used);
		r->in.len -= r->used;
		r->used = 0;
	}
	if (r->msg_done) {
		r->msg.len = 0;
		r->msg_done = 0;
		r->msg_op = 0;
	}
	for (;;) {
		p = (unsigned char *)r->in.data;
		n = r->in.len;
		if (n < 2)
			return 0;
		fin = p[0] >> 7;
		op = p[0] & 15;
		masked = p[1] >> 7;
		len = p[1] & 127;
		if (p[0] & 0x70)
			return fail(r, SBX_WS_PROTOCOL); /* no extension */
		if (op != SBX_WS_CONT && op != SBX_WS_TEXT &&
		    op != SBX_WS_BINARY && op != SBX_WS_CLOSE &&
		    op != SBX_WS_PING && op != SBX_WS_PONG)
			return fail(r, SBX_WS_PROTOCOL);
		/* A client masks; a server does not. */
		if (masked == r->client)
			return fail(r, SBX_WS_PROTOCOL);
		if (op >= SBX_WS_CLOSE && (!fin || len > 125))
			return fail(r, SBX_WS_PROTOCOL);
		hl = 2;
		if (len == 126) {
			if (n < 4)
				return 0;
			len = (uint64_t)p[2] << 8 | p[3];
			hl = 4;
		} else if (len == 127) {
			if (n < 10)
				return 0;
			if (p[2] & 0x80)
				return fail(r, SBX_WS_PROTOCOL);
			for (len = 0, i = 2; i < 10; i++)
				len = len << 8 | p[i];
			hl = 10;
		}
		if (len > r->max)
			return fail(r, SBX_WS_TOO_BIG);
		if (masked)
			hl += 4;
		if (n < hl || n - hl < len)
			return 0;
		for (i = 0; masked && i < len; i++)
			p[hl + i] ^= p[hl - 4 + (i & 3)];
		if (op >= SBX_WS_CLOSE) {
			if (op == SBX_WS_CLOSE && len == 1)
				return fail(r, SBX_WS_PROTOCOL);
			r->used = hl + (size_t)len;
			m->op = op;
			m->data = p + hl;
			m->len = (size_t)len;
			return 1;
		}
		if ((op == SBX_WS_CONT) != (r->msg_op != 0))
			return fail(r, SBX_WS_PROTOCOL);
		if (r->msg.len + len > r->max)
			return fail(r, SBX_WS_TOO_BIG);
		if (op != SBX_WS_CONT)
			r->msg_op = op;
		sbx_buf_add(&r->msg, p + hl, (size_t)len);
		memmove(r->in.data, r->in.data + hl + len, n - hl - (size_t)len);
		r->in.len -= hl + (size_t)len;
		if (fin) {
			r->msg_done = 1;
			m->op = r->msg_op;
			m->data = (unsigned char *)r->msg.data;
			m->len = r->msg.len;
			if (!m->data)
				m->data = (unsigned char *)"";
			return 1;
		}
	}
}

size_t
sbx_ws_header(unsigned char h[10], int op, uint64_t len)
{
	size_t i;

	h[0] = (unsigned char)(0x80 | (op & 15));
	if (len < 126) {
		h[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xffff) {
		h[1] = 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		return 4;
	}
	h[1] = 127;
	for (i = 0; i < 8; i++)
		h[9 - i] = (unsigned char)(len >> (8 * i));
	return 10;
}

void
sbx_ws_frame_masked(struct sbx_buf *b, int op, const void *p, size_t n)
{
	unsigned char h[14], *m;
	size_t hl = sbx_ws_header(h, op, n), i, at;

	h[1] |= 0x80;
	m = h + hl;
	if (getrandom(m, 4, 0) != 4)
		memset(m, 0x5a, 4);
	sbx_buf_add(b, h, hl + 4);
	at = b->len;
	sbx_buf_add(b, p, n);
	for (i = 0; i < n && at + i < b->len; i++)
		b->data[at + i] ^= (char)m[i & 3];
}
