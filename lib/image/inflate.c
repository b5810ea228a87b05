/* inflate.c - a layer's blob fed by a thread of its own into a pipe that
 * the unpacker reads as a plain tar, as the blob comes (a pull's is still
 * being fetched): a gzip one inflated on one core while the tar's files
 * are written on the other. ISA-L's inflate: three to five times zlib's
 * speed. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <isa-l/igzip_lib.h>

#include "image/image.h"

#define IO_SZ (256 * 1024)

static void
restart(struct inflate_state *st)
{
	uint8_t *in = st->next_in;
	uint32_t n = st->avail_in;

	isal_inflate_reset(st);
	st->crc_flag = ISAL_GZIP;
	st->next_in = in;
	st->avail_in = n;
}

static const char *
why(int r)
{
	switch (r) {
	case ISAL_INVALID_BLOCK:
	case ISAL_INVALID_SYMBOL:
	case ISAL_INVALID_LOOKBACK:
		return "damaged data";
	case ISAL_INVALID_WRAPPER:
		return "a bad header";
	case ISAL_UNSUPPORTED_METHOD:
		return "not deflate";
	case ISAL_INCORRECT_CHECKSUM:
		return "its checksum does not match";
	}
	return "an error of the inflate";
}

/* Up to n bytes of the blob, as they come: 0 at its end, -1 when it
 * cannot be read (or will not come whole). */
static ssize_t
src_read(struct sbx_inflater *f, uint8_t *p, size_t n)
{
	ssize_t r;

	if (f->wait && f->wait(f->arg, f->off) < 0) {
		errno = EIO;
		return -1;
	}
	while ((r = pread(f->in, p, n, f->off)) < 0 && errno == EINTR)
		;
	if (r > 0)
		f->off += r;
	return r;
}

static int
put(int fd, const uint8_t *p, size_t left)
{
	ssize_t n;

	for (; left; p += n, left -= (size_t)n)
		while ((n = write(fd, p, left)) < 0)
			if (errno != EINTR)
				return -1;
	return 0;
}

/* Blob f->in as it is, or its gzip members inflated, into f->out. A
 * reader that ends early (its tar is over, or bad: its own error says
 * so) ends it too. */
static void *
inflater(void *arg)
{
	struct sbx_inflater *f = arg;
	struct inflate_state *st = sbx_xcalloc(1, sizeof *st);
	uint8_t *in = sbx_xcalloc(2, IO_SZ), *out = in + IO_SZ;
	size_t have = 0;
	ssize_t n;
	int r, eof = 0;

	/* Its first two bytes say whether it is gzip. */
	while (have < 2 && (n = src_read(f, in + have, IO_SZ - have)) > 0)
		have += (size_t)n;
	if (have < 2 || in[0] != 0x1f || in[1] != 0x8b) {
		if (n < 0)
			goto bad_read;
		while (have && put(f->out, in, have) == 0 &&
		    (n = src_read(f, in, IO_SZ)) > 0)
			have = (size_t)n;
		if (n < 0 && errno != EPIPE)
			goto bad_read;
		goto done;
	}
	isal_inflate_init(st);
	st->crc_flag = ISAL_GZIP;
	st->next_in = in;
	st->avail_in = (uint32_t)have;
	for (;;) {
		if (!st->avail_in && !eof) {
			if ((n = src_read(f, in, IO_SZ)) < 0)
				goto bad_read;
			eof = n == 0;
			st->next_in = in;
			st->avail_in = (uint32_t)n;
		}
		if (st->block_state == ISAL_BLOCK_FINISH) {
			if (!st->avail_in && eof)
				break;
			if (!st->avail_in)
				continue;
			restart(st);    /* another member */
		}
		st->next_out = out;
		st->avail_out = IO_SZ;
		if ((r = isal_inflate(st)) < 0) {
			sbx_err_set(&f->err, SBX_EX_DATA, "layer %s: not valid "
			    "gzip (%s)", f->digest, why(r));
			break;
		}
		have = IO_SZ - st->avail_out;
		if (!have && eof && !st->avail_in &&
		    st->block_state != ISAL_BLOCK_FINISH) {
			sbx_err_set(&f->err, SBX_EX_DATA, "layer %s: its gzip "
			    "data is cut short", f->digest);
			break;
		}
		if (put(f->out, out, have) < 0)
			break;
	}
	goto done;
bad_read:
	sbx_err_set(&f->err, SBX_EX_FAIL, "layer %s: cannot read its blob:",
	    f->digest);
done:
	free(st);
	free(in);
	close(f->out);
	f->out = -1;
	return NULL;
}

int
sbx_inflater_start(struct sbx_inflater *f, int fd, const char *digest,
    int (*wait)(void *arg, off_t off), void *arg, int *rd,
    struct sbx_err *err)
{
	int pv[2];

	memset(f, 0, sizeof *f);
	f->in = f->out = -1;
	*rd = -1;
	if (pipe2(pv, O_CLOEXEC) < 0)
		return sbx_err_set(err, SBX_EX_FAIL, "cannot make a pipe:");
	/* Fewer, larger turns between the two sides. */
	(void)fcntl(pv[1], F_SETPIPE_SZ, 1 << 20);
	if ((f->in = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot read blob %s:", digest);
		goto fail;
	}
	f->out = pv[1];
	f->digest = digest;
	f->wait = wait;
	f->arg = arg;
	if ((errno = pthread_create(&f->t, NULL, inflater, f))) {
		sbx_err_set(err, SBX_EX_FAIL, "cannot start a thread:");
		goto fail;
	}
	f->started = 1;
	*rd = pv[0];
	return 0;
fail:
	if (f->in >= 0)
		close(f->in);
	close(pv[0]);
	close(pv[1]);
	f->in = f->out = -1;
	return -1;
}

int
sbx_inflater_end(struct sbx_inflater *f, struct sbx_err *err)
{
	if (!f->started)
		return 0;
	pthread_join(f->t, NULL);
	f->started = 0;
	close(f->in);
	f->in = -1;
	if (f->err.code) {
		*err = f->err;
		return -1;
	}
	return 0;
}

int
sbx_image_tree_apply_blob(struct sbx_image_tree *t, size_t i, int fd,
    const char *digest, int (*wait)(void *arg, off_t off), void *arg,
    struct sbx_err *err)
{
	struct sbx_inflater f;
	struct sbx_err e = {0};
	int rd, rc;

	if (sbx_inflater_start(&f, fd, digest, wait, arg, &rd, err) < 0)
		return -1;
	rc = sbx_image_tree_apply(t, i, rd, digest, &e);
	/* The feeder blocked on a pipe no one reads ends now. */
	close(rd);
	/* The bad gzip's error before the tar's that it caused. */
	if (sbx_inflater_end(&f, err) < 0)
		return -1;
	if (rc < 0)
		*err = e;
	return rc;
}
