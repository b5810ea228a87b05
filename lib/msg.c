/* msg.c - length-prefixed frames with attached fds (the agent, sbxd); over
 * a stream that is not a socket (a VM's virtio port), the same frames
 * without fds */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "msg.h"

struct hdr {
	uint32_t len;
	uint32_t type;
};

int
sbx_msg_send(int sock, uint32_t type, const void *data, size_t len,
    const int *fds, int nfds)
{
	return sbx_msg_send_max(sock, SBX_MSG_MAX, type, data, len, fds, nfds);
}

int
sbx_msg_send_max(int sock, size_t max, uint32_t type, const void *data,
    size_t len, const int *fds, int nfds)
{
	struct hdr h = {(uint32_t)len, type};
	struct iovec iov[2] = {{&h, sizeof h}, {(void *)data, len}};
	union {
		char buf[CMSG_SPACE(sizeof(int) * SBX_MSG_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {0};
	struct cmsghdr *c;
	size_t sent = 0, total = sizeof h + len;
	ssize_t w;
	int stream = 0;

	if (len > max || len > UINT32_MAX || nfds > SBX_MSG_FDS) {
		errno = EMSGSIZE;
		return -1;
	}
	mh.msg_iov = iov;
	mh.msg_iovlen = len ? 2 : 1;
	if (nfds > 0) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	while (sent < total) {
		w = stream ? writev(sock, mh.msg_iov, (int)mh.msg_iovlen) :
		    sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			/* Not a socket (a VM's virtio port): the same frame,
			 * which can carry no fds. */
			if (errno == ENOTSOCK && !stream && !nfds) {
				stream = 1;
				continue;
			}
			return -1;
		}
		sent += (size_t)w;
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		/* Advance the iovecs past what went out. */
		while (w > 0 && mh.msg_iovlen) {
			if ((size_t)w >= mh.msg_iov->iov_len) {
				w -= (ssize_t)mh.msg_iov->iov_len;
				mh.msg_iov++;
				mh.msg_iovlen--;
			} else {
				mh.msg_iov->iov_base =
				    (char *)mh.msg_iov->iov_base + w;
				mh.msg_iov->iov_len -= (size_t)w;
				w = 0;
			}
		}
	}
	return 0;
}

static void
take_fds(struct msghdr *mh, struct sbx_msg *m)
{
	struct cmsghdr *c;
	int n, i;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (m->nfds < SBX_MSG_FDS)
				m->fds[m->nfds++] = fd;
			else
				close(fd);
		}
	}
}

/* Read exactly n bytes; the first read may carry fds. */
static int
read_full(int sock, void *p, size_t n, struct sbx_msg *m)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SBX_MSG_FDS)];
		struct cmsghdr align;
	} u;
	size_t got = 0;
	ssize_t r;
	int stream = 0;

	while (got < n) {
		struct iovec iov = {(char *)p + got, n - got};
		struct msghdr mh = {0};

		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		r = stream ? read(sock, iov.iov_base, iov.iov_len) :
		    recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* A stream that is not a socket: no fds. */
			if (errno == ENOTSOCK && !stream) {
				stream = 1;
				continue;
			}
			return -1;
		}
		if (stream)
			mh.msg_controllen = 0;
		if (mh.msg_controllen)
			take_fds(&mh, m);
		if (r == 0)
			return got ? (errno = EPROTO, -1) : 0;
		got += (size_t)r;
	}
	return 1;
}

int
sbx_msg_recv(int sock, struct sbx_msg *m)
{
	return sbx_msg_recv_max(sock, SBX_MSG_MAX, m);
}

int
sbx_msg_recv_max(int sock, size_t max, struct sbx_msg *m)
{
	struct hdr h;
	int r;

	memset(m, 0, sizeof *m);
	if ((r = read_full(sock, &h, sizeof h, m)) <= 0)
		return r;
	if (h.len > max) {
		errno = EMSGSIZE;
		return -1;
	}
	m->type = h.type;
	m->len = h.len;
	m->data = sbx_xmalloc(h.len + 1);
	m->data[h.len] = '\0';
	if (h.len && read_full(sock, m->data, h.len, m) <= 0) {
		if (errno == 0)
			errno = EPROTO;
		return -1;
	}
	return 1;
}

void
sbx_msg_release(struct sbx_msg *m)
{
	int i;

	for (i = 0; i < m->nfds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	free(m->data);
	memset(m, 0, sizeof *m);
}

void
sbx_msg_put_u32(struct sbx_buf *b, uint32_t v)
{
	sbx_buf_add(b, &v, sizeof v);
}

void
sbx_msg_put_u64(struct sbx_buf *b, uint64_t v)
{
	sbx_buf_add(b, &v, sizeof v);
}

void
sbx_msg_put_str(struct sbx_buf *b, const char *s)
{
	sbx_buf_add(b, s ? s : "", strlen(s ? s : "") + 1);
}

void
sbx_msg_put_bytes(struct sbx_buf *b, const void *p, size_t n)
{
	sbx_msg_put_u32(b, (uint32_t)n);
	if (n)
		sbx_buf_add(b, p, n);
}

static int
get(struct sbx_msg *m, void *v, size_t n)
{
	if (m->len - m->off < n)
		return -1;
	memcpy(v, m->data + m->off, n);
	m->off += n;
	return 0;
}

int
sbx_msg_get_u32(struct sbx_msg *m, uint32_t *v)
{
	return get(m, v, sizeof *v);
}

int
sbx_msg_get_u64(struct sbx_msg *m, uint64_t *v)
{
	return get(m, v, sizeof *v);
}

const char *
sbx_msg_get_str(struct sbx_msg *m)
{
	const char *s = m->data + m->off;
	const char *end = memchr(s, '\0', m->len - m->off);

	if (!end)
		return NULL;
	m->off += (size_t)(end - s) + 1;
	return s;
}

const char *
sbx_msg_get_bytes(struct sbx_msg *m, size_t *n)
{
	const char *p;
	uint32_t len;

	if (sbx_msg_get_u32(m, &len) < 0 || m->len - m->off < len)
		return NULL;
	p = m->data + m->off;
	m->off += len;
	*n = len;
	return p;
}
