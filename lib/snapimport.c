/* snapimport.c - sbx-snapshot import: a sandbox on any backend from a
 * snapshot's export (lib/local/snapport.c): made as its meta says, then
 * hydrated through the backend's own operations: the paths the source
 * deleted of its image removed (sbx-exec's rm -rf), its files put at "/"
 * through the transfer contract (put_archive), as sbx-cp puts a tree */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "internal.h"

#define MANIFEST "sbx-snapshot.json"
#define MANIFEST_MAX (1 << 20)

/* The first member, the meta; NULL with err. */
static json_t *
read_meta(struct archive *a, struct sbx_err *err)
{
	struct archive_entry *e;
	char *buf;
	la_int64_t size;
	la_ssize_t n;
	json_t *m = NULL;
	json_error_t je;

	if (archive_read_next_header(a, &e) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_DATA, "not a snapshot's export: %s",
		    archive_error_string(a) ? archive_error_string(a) :
		    "empty");
		return NULL;
	}
	size = archive_entry_size(e);
	if (strcmp(archive_entry_pathname(e), MANIFEST) ||
	    archive_entry_filetype(e) != AE_IFREG || size <= 0 ||
	    size > MANIFEST_MAX) {
		sbx_err_set(err, SBX_EX_DATA, "not a snapshot's export (its "
		    "first member is not %s)", MANIFEST);
		return NULL;
	}
	buf = sbx_xmalloc((size_t)size);
	n = archive_read_data(a, buf, (size_t)size);
	if (n == size)
		m = json_loadb(buf, (size_t)size, 0, &je);
	free(buf);
	if (!json_is_object(m) || strcmp(sbx_json_str(m, "format") ?
	    sbx_json_str(m, "format") : "", "sbx-snapshot/1") ||
	    !json_is_array(json_object_get(m, "deleted")) ||
	    !json_is_array(json_object_get(m, "opaque"))) {
		json_decref(m);
		sbx_err_set(err, SBX_EX_DATA, "not a snapshot's export (%s is "
		    "not one of format sbx-snapshot/1)", MANIFEST);
		return NULL;
	}
	return m;
}

/* rm -rf of what the source deleted of its image; its opaque
 * directories emptied (filled again from the files after), not removed:
 * one may be a mount point (docker's workdir is a volume). */
static const char remove_sh[] =
    "n=$1; shift; i=0\n"
    "for p do\n"
    "\ti=$((i + 1))\n"
    "\tif [ \"$i\" -gt \"$n\" ] && [ -d \"$p\" ] && [ ! -L \"$p\" ]; then\n"
    "\t\t(cd -- \"$p\" && rm -rf -- ./* ./.[!.]* ./..?*) || exit\n"
    "\telse\n"
    "\t\trm -rf -- \"$p\" || exit\n"
    "\tfi\n"
    "done\n";

static int
remove_deleted(const struct sbx_backend *be, const json_t *ref,
    const json_t *m, struct sbx_err *err)
{
	struct sbx_exec_opts o = {0};
	struct sbx_exec_result r = {0};
	const char *lists[] = {"deleted", "opaque"};
	char **argv, ndel[32];
	size_t n = 0, i, k;
	json_t *v;
	int rc;

	argv = sbx_xcalloc(json_array_size(json_object_get(m, "deleted")) +
	    json_array_size(json_object_get(m, "opaque")) + 6, sizeof *argv);
	snprintf(ndel, sizeof ndel, "%zu", json_array_size(json_object_get(m,
	    "deleted")));
	argv[n++] = "sh";
	argv[n++] = "-c";
	argv[n++] = (char *)remove_sh;
	argv[n++] = "sh";
	argv[n++] = ndel;
	for (k = 0; k < 2; k++)
		json_array_foreach(json_object_get(m, lists[k]), i, v) {
			if (!sbx_path_plain(json_string_value(v))) {
				free(argv);
				return sbx_err_set(err, SBX_EX_DATA, "bad path "
				    "in the export's %s list", lists[k]);
			}
			argv[n++] = (char *)json_string_value(v);
		}
	if (n == 5) {
		free(argv);
		return 0;
	}
	o.capture = 1;
	o.max_output = 4096;
	rc = be->ops->exec(ref, argv, &o, &r, err);
	free(argv);
	if (rc == 0 && r.exit_code != 0)
		rc = sbx_err_set(err, SBX_EX_FAIL, "cannot remove what the "
		    "snapshot deleted (rm exited %d): %.*s", r.exit_code,
		    (int)(r.err.len > 200 ? 200 : r.err.len),
		    r.err.data ? r.err.data : "");
	sbx_buf_release(&r.out);
	sbx_buf_release(&r.err);
	return rc;
}

/* The members under files/ (their names without it) into the sandbox's
 * "/". */
static int
put_files(const json_t *ref, struct archive *a, struct sbx_err *err)
{
	const struct sbx_files *f = sbx_files_of(ref, err);
	struct archive_entry *e;
	struct archive *w = NULL;
	struct sbx_job job;
	const void *blk;
	size_t len;
	la_int64_t off;
	const char *name, *hl;
	int fd = -1, r, rc = -1;

	if (!f || f->put_archive(ref, "/", &fd, &job, err) < 0)
		return -1;
	w = archive_write_new();
	archive_write_set_format_pax(w);
	archive_write_set_format_option(w, "pax", "hdrcharset", "BINARY");
	if (archive_write_open_fd(w, fd) != ARCHIVE_OK)
		goto bad;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		name = archive_entry_pathname(e);
		if (!name || strncmp(name, "files/", 6)) {
			sbx_err_set(err, SBX_EX_DATA, "not a snapshot's export "
			    "(a member '%s' outside files/)", name ? name :
			    "?");
			goto out;
		}
		if (!name[6])
			continue;
		archive_entry_set_pathname(e, name + 6);
		if ((hl = archive_entry_hardlink(e))) {
			if (strncmp(hl, "files/", 6)) {
				sbx_err_set(err, SBX_EX_DATA, "not a snapshot's "
				    "export (a link to '%s')", hl);
				goto out;
			}
			archive_entry_set_hardlink(e, hl + 6);
		}
		if (archive_write_header(w, e) < ARCHIVE_WARN)
			goto bad;
		while ((r = archive_read_data_block(a, &blk, &len, &off)) ==
		    ARCHIVE_OK)
			if (archive_write_data(w, blk, len) != (la_ssize_t)len)
				goto bad;
		if (r != ARCHIVE_EOF) {
			sbx_err_set(err, SBX_EX_DATA, "cannot read the export: "
			    "%s", archive_error_string(a));
			goto out;
		}
	}
	if (r != ARCHIVE_EOF) {
		sbx_err_set(err, SBX_EX_DATA, "cannot read the export: %s",
		    archive_error_string(a));
		goto out;
	}
	if (archive_write_close(w) != ARCHIVE_OK)
		goto bad;
	close(fd);
	fd = -1;
	rc = sbx_job_wait(&job, err);
	goto out;
bad:
	sbx_err_set(err, SBX_EX_FAIL, "cannot put the files into the sandbox: "
	    "%s", archive_error_string(w) ? archive_error_string(w) :
	    strerror(errno));
out:
	if (fd >= 0) {
		/* Cut short: the sandbox's end sees a broken stream. */
		close(fd);
		if (rc < 0) {
			struct sbx_err e2;

			sbx_job_wait(&job, &e2);
		}
	}
	if (w)
		archive_write_free(w);
	return rc;
}

int
sbx_snap_import(const struct sbx_backend *be, int fd, struct sbx_spec *spec,
    json_t **ref, json_t **meta, struct sbx_err *err)
{
	struct archive *a = archive_read_new();
	struct sbx_err e2;
	unsigned given = 0;
	int image_given = spec->image != NULL;
	int workdir_given = spec->workdir != NULL;
	json_t *m = NULL;
	int rc = -1;

	*ref = NULL;
	*meta = NULL;
	archive_read_support_format_tar(a);
	archive_read_support_filter_all(a);
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		sbx_err_set(err, SBX_EX_DATA, "cannot read the export: %s",
		    archive_error_string(a));
		goto out;
	}
	if (!(m = read_meta(a, err)))
		goto out;
	if (!spec->labels)
		spec->labels = json_object();
	sbx_snap_spec(m, spec, &given, image_given, workdir_given);
	/* The source's limits where this backend sets them as asked; the
	 * rest are its own defaults (a template's size, on e2b). */
	if (!(be->caps & SBX_CAP_MEMORY) || be->template_sized) {
		given &= ~(unsigned)SBX_CAP_MEMORY;
		spec->memory = 0;
	}
	if (!(be->caps & SBX_CAP_CPUS) || be->template_sized) {
		given &= ~(unsigned)SBX_CAP_CPUS;
		spec->cpus_milli = 0;
	}
	if (!(be->caps & SBX_CAP_PIDS)) {
		given &= ~(unsigned)SBX_CAP_PIDS;
		spec->pids = 0;
	}
	if (!(be->caps & SBX_CAP_TIMEOUT))
		spec->timeout = 0;
	/* Its files, not a layer of this store's. */
	spec->from = NULL;
	if (!spec->workdir)
		spec->workdir = "/workspace";
	if (sbx_limits_default(be, spec, given, err) < 0 ||
	    sbx_backend_check_spec(be, spec, err) < 0 ||
	    be->ops->create(spec, ref, err) < 0)
		goto out;
	if (remove_deleted(be, *ref, m, err) < 0 ||
	    put_files(*ref, a, err) < 0) {
		be->ops->kill(*ref, 0, &e2);
		json_decref(*ref);
		*ref = NULL;
		goto out;
	}
	*meta = json_incref(m);
	rc = 0;
out:
	json_decref(m);
	archive_read_free(a);
	return rc;
}
