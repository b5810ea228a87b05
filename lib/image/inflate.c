/* inflate.c - a layer's tar made of its blob as the blob comes (a pull's
 * is still being fetched), straight into the buffer its unpacker reads
 * (unpack.c's apply_fill): a gzip one inflated here while the unpacker
 * writes the tar's files on the other core. ISA-L's inflate: three to
 * five times zlib's speed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <isa-l/igzip_lib.h>

#include "image/image.h"

#define IO_SZ (256 * 1024)

/* A blob read as it comes, inflated when it is gzip. */
struct src {
	int in;
	off_t off;      /* read so far */
	int (*wait)(void *arg, off_t off);
	void *arg;
	const char *digest;
	struct sbx_err err;
	struct inflate_state *st;
	uint8_t *buf;   /* what was read of it, IO_SZ */
	size_t have, pos; /* not gzip: buf's bytes not yet given, from pos */
	int kind;       /* 0 not known yet, 'z' gzip, 'r' as it is */
	int eof;
};

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
src_read(struct src *f, uint8_t *p, size_t n)
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

static ssize_t
bad_read(struct src *f)
{
	return sbx_err_set(&f->err, SBX_EX_FAIL, "layer %s: cannot read its "
	    "blob:", f->digest);
}

/* The blob as it is, its first bytes from buf. */
static ssize_t
fill_raw(struct src *f, unsigned char *out, size_t size)
{
	size_t got = f->have < size ? f->have : size;
	ssize_t n;

	memcpy(out, f->buf + f->pos, got);
	f->pos += got;
	f->have -= got;
	while (got < size && !f->eof) {
		if ((n = src_read(f, out + got, size - got)) < 0)
			return bad_read(f);
		f->eof = n == 0;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Its gzip members inflated. */
static ssize_t
fill_gzip(struct src *f, unsigned char *out, size_t size)
{
	struct inflate_state *st = f->st;
	size_t got = 0, made;
	ssize_t n;
	int r;

	while (got < size) {
		if (!st->avail_in && !f->eof) {
			if ((n = src_read(f, f->buf, IO_SZ)) < 0)
				return bad_read(f);
			f->eof = n == 0;
			st->next_in = f->buf;
			st->avail_in = (uint32_t)n;
		}
		if (st->block_state == ISAL_BLOCK_FINISH) {
			if (!st->avail_in && f->eof)
				break;
			if (!st->avail_in)
				continue;
			restart(st);    /* another member */
		}
		st->next_out = out + got;
		st->avail_out = (uint32_t)(size - got);
		if ((r = isal_inflate(st)) < 0)
			return sbx_err_set(&f->err, SBX_EX_DATA, "layer %s: not "
			    "valid gzip (%s)", f->digest, why(r));
		made = size - got - st->avail_out;
		if (!made && f->eof && !st->avail_in &&
		    st->block_state != ISAL_BLOCK_FINISH)
			return sbx_err_set(&f->err, SBX_EX_DATA, "layer %s: its "
			    "gzip data is cut short", f->digest);
		got += made;
	}
	return (ssize_t)got;
}

/* apply_fill's: the next size bytes of the tar at out. */
static ssize_t
fill(void *arg, unsigned char *out, size_t size)
{
	struct src *f = arg;
	ssize_t n = 0;

	if (!f->kind) {
		/* Its first two bytes say whether it is gzip. */
		while (f->have < 2 && (n = src_read(f, f->buf + f->have,
		    IO_SZ - f->have)) > 0)
			f->have += (size_t)n;
		if (n < 0)
			return bad_read(f);
		f->eof = f->have < 2;
		f->kind = f->have >= 2 && f->buf[0] == 0x1f &&
		    f->buf[1] == 0x8b ? 'z' : 'r';
		if (f->kind == 'z') {
			isal_inflate_init(f->st);
			f->st->crc_flag = ISAL_GZIP;
			f->st->next_in = f->buf;
			f->st->avail_in = (uint32_t)f->have;
		}
	}
	return f->kind == 'z' ? fill_gzip(f, out, size) :
	    fill_raw(f, out, size);
}

int
sbx_image_tree_apply_blob(struct sbx_image_tree *t, size_t i, int fd,
    const char *digest, int (*wait)(void *arg, off_t off), void *arg,
    struct sbx_err *err)
{
	struct src f = {.in = fd, .wait = wait, .arg = arg,
	    .digest = digest};
	struct sbx_err e = {0};
	int rc;

	f.st = sbx_xcalloc(1, sizeof *f.st);
	f.buf = sbx_xmalloc(IO_SZ);
	rc = sbx_image_tree_apply_fill(t, i, digest, fill, &f, &e);
	/* The bad gzip's error before the tar's that it caused. */
	if (f.err.code) {
		*err = f.err;
		rc = -1;
	} else if (rc < 0) {
		*err = e;
	}
	free(f.st);
	free(f.buf);
	return rc;
}
