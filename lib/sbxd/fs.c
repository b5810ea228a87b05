/* fs.c - envd's plain HTTP routes */
#include "sbxd.h"

static enum MHD_Result
h_health(struct sbxd_req *r)
{
	return sbxd_reply_empty(r, 204);
}

const struct sbxd_route sbxd_fs_routes[] = {
	{"GET", "/health", 1, h_health, NULL},
	{NULL, NULL, 0, NULL, NULL},
};
