/* ws.c - TAP unit tests of the WebSocket frame codec (lib/ws.c) */
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "tap.h"

/* A client's frame: masked with key, header bits b0 as given. */
static size_t
frame(unsigned char *out, int b0, const void *p, uint64_t len, int real)
{
	static const unsigned char key[4] = {0x37, 0xfa, 0x21, 0x3d};
	size_t h = 2, i;

	out[0] = (unsigned char)b0;
	if (len < 126) {
		out[1] = (unsigned char)(0x80 | len);
	} else if (len <= 0xffff) {
		out[1] = 0x80 | 126;
		out[2] = (unsigned char)(len >> 8);
		out[3] = (unsigned char)len;
		h = 4;
	} else {
		out[1] = 0x80 | 127;
		for (i = 0; i < 8; i++)
			out[9 - i] = (unsigned char)(len >> (8 * i));
		h = 10;
	}
	memcpy(out + h, key, 4);
	h += 4;
	for (i = 0; real && i < len; i++)
		out[h + i] = ((const unsigned char *)p)[i] ^ key[i & 3];
	return h + (real ? (size_t)len : 0);
}

static void
reader(struct sbx_ws_reader *r, size_t max)
{
	memset(r, 0, sizeof *r);
	r->max = max;
}

static void
t_one_text(void)
{
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	unsigned char f[64];
	size_t n = frame(f, 0x81, "Hello", 5, 1);

	reader(&r, 1024);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == 1);
	CHECK(m.op == SBX_WS_TEXT && m.len == 5 && !memcmp(m.data, "Hello",
	    5));
	CHECK(sbx_ws_next(&r, &m) == 0);
	sbx_ws_reader_release(&r);
}

static void
t_byte_by_byte(void)
{
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	unsigned char f[400], big[300];
	size_t n, i;
	int got = 0, k;

	memset(big, 'x', sizeof big);
	n = frame(f, 0x82, big, sizeof big, 1);
	reader(&r, 1024);
	for (i = 0; i < n; i++) {
		sbx_buf_add(&r.in, f + i, 1);
		k = sbx_ws_next(&r, &m);
		CHECK(k >= 0);
		if (k == 1) {
			CHECK(i == n - 1);
			CHECK(m.op == SBX_WS_BINARY && m.len == sizeof big &&
			    !memcmp(m.data, big, sizeof big));
			got++;
		}
	}
	CHECK(got == 1);
	sbx_ws_reader_release(&r);
}

static void
t_fragments_and_control_between(void)
{
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	unsigned char f[128];
	size_t n = 0;

	reader(&r, 1024);
	n += frame(f + n, 0x01, "Hel", 3, 1);
	n += frame(f + n, 0x89, "pi", 2, 1);
	n += frame(f + n, 0x00, "l", 1, 1);
	n += frame(f + n, 0x80, "o", 1, 1);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == 1);
	CHECK(m.op == SBX_WS_PING && m.len == 2 && !memcmp(m.data, "pi", 2));
	CHECK(sbx_ws_next(&r, &m) == 1);
	CHECK(m.op == SBX_WS_TEXT && m.len == 5 && !memcmp(m.data, "Hello",
	    5));
	CHECK(sbx_ws_next(&r, &m) == 0);
	/* The next message starts afresh. */
	n = frame(f, 0x82, "ab", 2, 1);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == 1);
	CHECK(m.op == SBX_WS_BINARY && m.len == 2 && !memcmp(m.data, "ab", 2));
	sbx_ws_reader_release(&r);
}

static void
t_close(void)
{
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	unsigned char f[64];
	size_t n;

	reader(&r, 1024);
	n = frame(f, 0x88, "\x03\xe8" "bye", 5, 1);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == 1);
	CHECK(m.op == SBX_WS_CLOSE && m.len == 5 && m.data[0] == 3 &&
	    m.data[1] == 0xe8);
	sbx_ws_reader_release(&r);
	reader(&r, 1024);
	n = frame(f, 0x88, "\x03", 1, 1);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == -1 && r.failed == SBX_WS_PROTOCOL);
	sbx_ws_reader_release(&r);
}

/* Each broken frame: -1 with its close code, and again after. */
static void
t_broken(void)
{
	static const struct {
		const char *what;
		int b0;
		uint64_t len;
		int code;
	} bad[] = {
		{"a reserved bit", 0xc1, 1, SBX_WS_PROTOCOL},
		{"opcode 3", 0x83, 1, SBX_WS_PROTOCOL},
		{"opcode 11", 0x8b, 1, SBX_WS_PROTOCOL},
		{"a fragmented ping", 0x09, 1, SBX_WS_PROTOCOL},
		{"a ping of 126", 0x89, 126, SBX_WS_PROTOCOL},
		{"a continuation first", 0x80, 1, SBX_WS_PROTOCOL},
		{"past max (16 bits)", 0x82, 2000, SBX_WS_TOO_BIG},
		{"past max (64 bits)", 0x82, 1ull << 40, SBX_WS_TOO_BIG},
	};
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	unsigned char f[16];
	size_t i, n;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		reader(&r, 1024);
		n = frame(f, bad[i].b0, NULL, bad[i].len, 0);
		sbx_buf_add(&r.in, f, n);
		if (bad[i].len < 126)
			sbx_buf_add(&r.in, "x", 1);
		if (sbx_ws_next(&r, &m) != -1 || r.failed != bad[i].code)
			printf("# %s\n", bad[i].what);
		CHECK(r.failed == bad[i].code);
		CHECK(sbx_ws_next(&r, &m) == -1);
		sbx_ws_reader_release(&r);
	}
	/* Unmasked: a server's frame, never a client's. */
	reader(&r, 1024);
	sbx_buf_add(&r.in, "\x81\x01x", 3);
	CHECK(sbx_ws_next(&r, &m) == -1 && r.failed == SBX_WS_PROTOCOL);
	sbx_ws_reader_release(&r);
	/* The top bit of a 64-bit length. */
	reader(&r, 1024);
	sbx_buf_add(&r.in, "\x82\xff\x80\0\0\0\0\0\0\x01", 10);
	CHECK(sbx_ws_next(&r, &m) == -1 && r.failed == SBX_WS_PROTOCOL);
	sbx_ws_reader_release(&r);
	/* A new message before the last one ended. */
	reader(&r, 1024);
	n = frame(f, 0x01, "a", 1, 1);
	n += frame(f + n, 0x81, "b", 1, 1);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == -1 && r.failed == SBX_WS_PROTOCOL);
	sbx_ws_reader_release(&r);
}

static void
t_fragments_past_max(void)
{
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	unsigned char f[64];
	size_t n;

	reader(&r, 6);
	n = frame(f, 0x01, "abcd", 4, 1);
	n += frame(f + n, 0x80, "efg", 3, 1);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == -1 && r.failed == SBX_WS_TOO_BIG);
	sbx_ws_reader_release(&r);
}

static void
t_header(void)
{
	unsigned char h[10];

	CHECK(sbx_ws_header(h, SBX_WS_BINARY, 0) == 2 && h[0] == 0x82 &&
	    h[1] == 0);
	CHECK(sbx_ws_header(h, SBX_WS_TEXT, 125) == 2 && h[0] == 0x81 &&
	    h[1] == 125);
	CHECK(sbx_ws_header(h, SBX_WS_BINARY, 126) == 4 && h[1] == 126 &&
	    h[2] == 0 && h[3] == 126);
	CHECK(sbx_ws_header(h, SBX_WS_BINARY, 65535) == 4 && h[2] == 0xff &&
	    h[3] == 0xff);
	CHECK(sbx_ws_header(h, SBX_WS_CLOSE, 65536) == 10 && h[0] == 0x88 &&
	    h[1] == 127 && h[7] == 1 && h[8] == 0 && h[9] == 0 && h[2] == 0);
}

/* A client's reader: a server's frames come unmasked; a masked one
 * breaks the protocol. */
static void
t_client_reads_unmasked(void)
{
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	unsigned char f[300];
	char big[200];
	size_t n;

	memset(big, 'x', sizeof big);
	reader(&r, 1024);
	r.client = 1;
	n = sbx_ws_header(f, SBX_WS_BINARY, sizeof big);
	memcpy(f + n, big, sizeof big);
	sbx_buf_add(&r.in, f, n + sizeof big - 1);
	CHECK(sbx_ws_next(&r, &m) == 0);
	sbx_buf_add(&r.in, big, 1);
	CHECK(sbx_ws_next(&r, &m) == 1);
	CHECK(m.op == SBX_WS_BINARY && m.len == sizeof big &&
	    !memcmp(m.data, big, sizeof big));
	n = frame(f, 0x82, "ab", 2, 1);
	sbx_buf_add(&r.in, f, n);
	CHECK(sbx_ws_next(&r, &m) == -1 && r.failed == SBX_WS_PROTOCOL);
	sbx_ws_reader_release(&r);
}

/* What a client sends, a server's reader takes back whole. */
static void
t_client_frames_masked(void)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct sbx_ws_reader r;
	struct sbx_ws_msg m;
	char big[70000];
	size_t i;

	for (i = 0; i < sizeof big; i++)
		big[i] = (char)(i * 7);
	sbx_ws_frame_masked(&b, SBX_WS_TEXT, "hi", 2);
	CHECK(b.len == 8 && (b.data[1] & 0x80));
	sbx_ws_frame_masked(&b, SBX_WS_BINARY, big, sizeof big);
	reader(&r, sizeof big);
	sbx_buf_add(&r.in, b.data, b.len);
	CHECK(sbx_ws_next(&r, &m) == 1 && m.op == SBX_WS_TEXT &&
	    m.len == 2 && !memcmp(m.data, "hi", 2));
	CHECK(sbx_ws_next(&r, &m) == 1 && m.op == SBX_WS_BINARY &&
	    m.len == sizeof big && !memcmp(m.data, big, sizeof big));
	sbx_ws_reader_release(&r);
	sbx_buf_release(&b);
}

static const struct tap_test tests[] = {
	{"a masked text frame is unmasked", t_one_text},
	{"a frame a byte at a time needs more bytes until its last",
	    t_byte_by_byte},
	{"fragments are joined, a ping between them comes first",
	    t_fragments_and_control_between},
	{"a close frame's code; a 1-byte close is refused", t_close},
	{"broken frames give -1 and their close code", t_broken},
	{"fragments past max are 1009", t_fragments_past_max},
	{"headers of a server's frames in the three sizes", t_header},
	{"a client's reader takes a server's unmasked frames, not masked "
	    "ones", t_client_reads_unmasked},
	{"a client's masked frames read back whole", t_client_frames_masked},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
