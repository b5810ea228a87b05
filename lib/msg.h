/* msg.h - length-prefixed frames with attached fds over a unix socket */
#ifndef SBX_MSG_H
#define SBX_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "sbx.h"

/* One format for every fd-passing socket: the host and the sandbox's
 * agent (lib/local), sbxd and its helpers (lib/sbxd). A frame is a u32
 * length, a u32 type, the data; its fds ride on the first bytes. The
 * agent's frames are at most SBX_MSG_MAX; a reader that must take more
 * (sbxd's listings) says how much with the _max calls. Over an fd that
 * is not a socket (a VM's virtio port) the frames go as they are, and
 * carry no fds. */
#define SBX_MSG_MAX (16u << 20)
#define SBX_MSG_FDS 8

struct sbx_msg {
	uint32_t type;
	char *data;
	size_t len, off; /* off: read position for the get helpers */
	int fds[SBX_MSG_FDS];
	int nfds;
};

int sbx_msg_send(int sock, uint32_t type, const void *data, size_t len,
    const int *fds, int nfds);
int sbx_msg_send_max(int sock, size_t max, uint32_t type, const void *data,
    size_t len, const int *fds, int nfds);
/* 1 on a message, 0 on EOF, -1 on error. */
int sbx_msg_recv(int sock, struct sbx_msg *m);
int sbx_msg_recv_max(int sock, size_t max, struct sbx_msg *m);
void sbx_msg_release(struct sbx_msg *m);
void sbx_msg_put_u32(struct sbx_buf *b, uint32_t v);
void sbx_msg_put_u64(struct sbx_buf *b, uint64_t v);
void sbx_msg_put_str(struct sbx_buf *b, const char *s);
/* n bytes, any of them NUL (a u32 length first). */
void sbx_msg_put_bytes(struct sbx_buf *b, const void *p, size_t n);
int sbx_msg_get_u32(struct sbx_msg *m, uint32_t *v);
int sbx_msg_get_u64(struct sbx_msg *m, uint64_t *v);
const char *sbx_msg_get_str(struct sbx_msg *m);
const char *sbx_msg_get_bytes(struct sbx_msg *m, size_t *n);

#endif
