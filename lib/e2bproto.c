/* e2bproto.c - the E2B wire protocol in one place: Connect envelopes,
 * Connect error codes and their HTTP statuses (DESIGN.md 3) */
#include <string.h>

#include <openssl/evp.h>

#include "internal.h"

/* Connect's codes and the statuses its unary errors travel with. */
static const struct {
	const char *code;
	int status;
} codes[] = {
	{"canceled", 499},
	{"unknown", 500},
	{"invalid_argument", 400},
	{"deadline_exceeded", 504},
	{"not_found", 404},
	{"already_exists", 409},
	{"permission_denied", 403},
	{"resource_exhausted", 429},
	{"failed_precondition", 400},
	{"aborted", 409},
	{"out_of_range", 400},
	{"unimplemented", 501},
	{"internal", 500},
	{"unavailable", 503},
	{"data_loss", 500},
	{"unauthenticated", 401},
};

int
sbx_e2b_code_status(const char *code)
{
	size_t i;

	for (i = 0; code && i < sizeof codes / sizeof codes[0]; i++)
		if (!strcmp(codes[i].code, code))
			return codes[i].status;
	return 0;
}

const char *
sbx_e2b_status_code(int status)
{
	switch (status) {
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "permission_denied";
	case 404: return "not_found";
	case 409: return "already_exists";
	case 413:
	case 429: return "resource_exhausted";
	case 499: return "canceled";
	case 501:
	case 505: return "unimplemented";
	case 502:
	case 503: return "unavailable";
	case 504: return "deadline_exceeded";
	default: return status >= 200 && status < 300 ? NULL : "internal";
	}
}

void
sbx_e2b_frame(struct sbx_buf *b, int flags, const char *p, size_t n)
{
	unsigned char h[5];

	h[0] = (unsigned char)flags;
	h[1] = (unsigned char)(n >> 24);
	h[2] = (unsigned char)(n >> 16);
	h[3] = (unsigned char)(n >> 8);
	h[4] = (unsigned char)n;
	sbx_buf_add(b, h, 5);
	sbx_buf_add(b, p, n);
}

void
sbx_e2b_frame_json(struct sbx_buf *b, int flags, const json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	if (!s)
		s = sbx_xstrdup("{}");
	sbx_e2b_frame(b, flags, s, strlen(s));
	free(s);
}

long
sbx_e2b_unframe(const char *p, size_t n, size_t max, int *flags,
    const char **payload, size_t *len)
{
	const unsigned char *u = (const unsigned char *)p;
	size_t l;

	if (n < 5)
		return 0;
	l = (size_t)u[1] << 24 | (size_t)u[2] << 16 | (size_t)u[3] << 8 | u[4];
	if (l > max)
		return -1;
	if (n - 5 < l)
		return 0;
	*flags = u[0];
	*payload = p + 5;
	*len = l;
	return (long)(5 + l);
}

json_t *
sbx_e2b_error(const char *code, const char *msg)
{
	return json_pack("{s:s,s:s}", "code", code, "message", msg ? msg : "");
}

/* Standard or URL-safe base64, padded or not; -1 when it is not. */
int
sbx_e2b_unb64(const char *s, struct sbx_buf *out)
{
	size_t n = strlen(s), i, pad = 0;
	char *t = sbx_xmalloc(n + 4);
	unsigned char *d;
	int len;

	for (i = 0; i < n; i++)
		t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (n % 4)
		t[n++] = '=';
	t[n] = 0;
	for (i = n; i > 0 && t[i - 1] == '='; i--)
		pad++;
	d = sbx_xmalloc(n / 4 * 3 + 1);
	len = EVP_DecodeBlock(d, (unsigned char *)t, (int)n);
	free(t);
	if (len < 0 || (size_t)len < pad) {
		free(d);
		return -1;
	}
	out->len = 0;
	sbx_buf_add(out, d, (size_t)len - pad);
	free(d);
	return 0;
}
