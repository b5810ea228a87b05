/* portable.c - TAP unit tests of the reading of a sandbox's sha256sum */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tap.h"

#define HA "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HB "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define HC "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static struct sbx_manifest m;

/* A manifest of the given paths, then sha256sum's output read into it. */
static void
read_out(const char *out, const char *const *paths, size_t n)
{
	char *copy = sbx_xstrdup(out);
	size_t i;

	memset(&m, 0, sizeof m);
	for (i = 0; i < n; i++)
		sbx_manifest_add(&m, paths[i]);
	sbx_portable_hashes(copy, &m, 0, n);
	free(copy);
}

/* Entry i has the hash whose first byte is first. */
static int
has(size_t i, unsigned char first, unsigned char last)
{
	return m.e[i].has_hash && m.e[i].hash[0] == first &&
	    m.e[i].hash[31] == last;
}

static void
t_in_order(void)
{
	const char *p[] = {"a", "b c", "d/e"};

	read_out(HA "  a\n" HB "  b c\n" HC " *d/e\n", p, 3);
	CHECK(has(0, 0x01, 0xef));
	CHECK(has(1, 0xfe, 0x10));
	CHECK(has(2, 0x00, 0xff));
	sbx_manifest_release(&m);
}

static void
t_gone_in_the_middle(void)
{
	const char *p[] = {"a", "gone", "c"};

	/* No line for "gone": c's hash is c's, not given to "gone". */
	read_out(HA "  a\n" HC "  c\n", p, 3);
	CHECK(has(0, 0x01, 0xef));
	CHECK(!m.e[1].has_hash);
	CHECK(has(2, 0x00, 0xff));
	sbx_manifest_release(&m);
}

static void
t_escaped_names(void)
{
	const char *p[] = {"new\nline", "back\\slash", "cr\r"};

	read_out("\\" HA "  new\\nline\n\\" HB "  back\\\\slash\n\\" HC
	    "  cr\\r\n", p, 3);
	CHECK(has(0, 0x01, 0xef));
	CHECK(has(1, 0xfe, 0x10));
	CHECK(has(2, 0x00, 0xff));
	sbx_manifest_release(&m);
}

static void
t_unasked_name_stops(void)
{
	const char *p[] = {"a", "b"};

	/* A line for a path not asked about: nothing from it on is read. */
	read_out(HA "  x\n" HB "  b\n", p, 2);
	CHECK(!m.e[0].has_hash);
	CHECK(!m.e[1].has_hash);
	sbx_manifest_release(&m);
}

static void
t_malformed_lines(void)
{
	const char *p[] = {"a", "b", "c"};

	/* Not hex, short, no separator, and no newline at the end. */
	read_out("zz23456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef  a\n"
	    "0123  b\n" HC "  c", p, 3);
	CHECK(!m.e[0].has_hash);
	CHECK(!m.e[1].has_hash);
	CHECK(!m.e[2].has_hash);
	sbx_manifest_release(&m);
	read_out(HA "xxb\n", p + 1, 1);
	CHECK(!m.e[0].has_hash);
	sbx_manifest_release(&m);
	read_out("\\" HA "  bad\\escape\n", p, 1);
	CHECK(!m.e[0].has_hash);
	sbx_manifest_release(&m);
}

static void
t_from_offset(void)
{
	const char *p[] = {"a", "b", "c"};
	char *copy = sbx_xstrdup(HB "  b\n" HC "  c\n");
	size_t i;

	memset(&m, 0, sizeof m);
	for (i = 0; i < 3; i++)
		sbx_manifest_add(&m, p[i]);
	/* A second chunk: only entries 1 and 2 were asked about. */
	sbx_portable_hashes(copy, &m, 1, 2);
	free(copy);
	CHECK(!m.e[0].has_hash);
	CHECK(has(1, 0xfe, 0x10));
	CHECK(has(2, 0x00, 0xff));
	sbx_manifest_release(&m);
}

static void
t_empty(void)
{
	const char *p[] = {"a"};

	read_out("", p, 1);
	CHECK(!m.e[0].has_hash);
	sbx_manifest_release(&m);
}

static const struct tap_test tests[] = {
	{"lines in order give each file its hash (text and binary mode)",
	    t_in_order},
	{"a file gone meanwhile gets none, and the next one its own",
	    t_gone_in_the_middle},
	{"names escaped by sha256sum (newline, backslash, CR) match",
	    t_escaped_names},
	{"a line naming a file not asked about stops the reading",
	    t_unasked_name_stops},
	{"malformed lines give no hash", t_malformed_lines},
	{"a later chunk fills only its own entries", t_from_offset},
	{"no output, no hash", t_empty},
};

int
main(void)
{
	return tap_run(tests, sizeof tests / sizeof tests[0]);
}
