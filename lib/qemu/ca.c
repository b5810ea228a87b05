/* ca.c - header injection on the qemu backend: the CA that sbx-netd made
 * for the sandbox (DIR/ca.crt, staged with its subject hash's link in
 * DIR/certs: lib/netd/ca.c) put into the VM's /etc/ssl/certs by its own
 * shell, as root, once the VM is up: sbx-ca.pem, that link, and
 * ca-certificates.crt with the CA after the image's bundle */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qemu.h"

/* $1: the link's name; the CA's PEM on stdin. */
static const char ca_sh[] =
    "set -e\n"
    "mkdir -p /etc/ssl/certs\n"
    "cd /etc/ssl/certs\n"
    "cat >.sbx-ca.tmp\n"
    "{ cat ca-certificates.crt 2>/dev/null || :; echo; cat .sbx-ca.tmp; }"
    " >.sbx-bundle.tmp\n"
    "mv .sbx-ca.tmp sbx-ca.pem\n"
    "mv .sbx-bundle.tmp ca-certificates.crt\n"
    "ln -sf sbx-ca.pem \"$1\"\n";

int
sbx_qemu_ca_install(const json_t *ref, const char *dir, struct sbx_err *err)
{
	const struct sbx_backend *be = sbx_backend_find("qemu");
	char *p = sbx_xasprintf("%s/certs", dir), link[64] = "", buf[4096];
	char *argv[] = {"sh", "-c", (char *)ca_sh, "sh", link, NULL};
	struct sbx_buf in = SBX_BUF_INIT;
	struct sbx_exec_result r;
	struct dirent *e;
	DIR *d;
	ssize_t n = 0;
	int c, fd;

	if ((d = opendir(p))) {
		while ((e = readdir(d)))
			if (e->d_type == DT_LNK && strlen(e->d_name) <
			    sizeof link)
				snprintf(link, sizeof link, "%s", e->d_name);
		closedir(d);
	}
	free(p);
	/* The CA's PEM, a few hundred bytes. */
	p = sbx_xasprintf("%s/ca.crt", dir);
	in.limit = 1u << 16;
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0) {
		while ((n = read(fd, buf, sizeof buf)) > 0)
			sbx_buf_add(&in, buf, (size_t)n);
		close(fd);
	}
	free(p);
	if (!*link || fd < 0 || n < 0 || !in.len || in.truncated) {
		sbx_buf_release(&in);
		return sbx_err_set(err, SBX_EX_FAIL, "sbx-netd made no CA "
		    "for the sandbox (see %s/netd.err)", dir);
	}
	c = sbx_exec_in(be, ref, argv, "/", "root", &in, 60000, &r,
	    err);
	sbx_buf_release(&in);
	if (c > 0 && !err->code)
		sbx_err_set(err, SBX_EX_FAIL, "cannot put the CA into the "
		    "VM's /etc/ssl/certs (exit %d)%s%.*s", c, r.err.len ?
		    ": " : "", (int)(r.err.len && r.err.data[r.err.len - 1] ==
		    '\n' ? r.err.len - 1 : r.err.len), r.err.data ?
		    r.err.data : "");
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	return c ? -1 : 0;
}
