/* sbx-secret - set, list and remove the secrets of sbx's secret store
 * (values go in on stdin and never come out) */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "sbx.h"
#include "secret.h"

static const char usage[] =
    "usage: sbx-secret set [-qv] [-m key=value]... name\n"
    "       sbx-secret ls [-qv]\n"
    "       sbx-secret rm [-qv] [name ...]\n";

static const struct option longopts[] = {
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"metadata", required_argument, NULL, 'm'},
	{"quiet", no_argument, NULL, 'q'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* The value from stdin: all of it, less one trailing newline; from a
 * terminal, one line typed without echo. Dies on an error. */
static char *
read_value(const char *name, size_t *len)
{
	struct sbx_buf b = SBX_BUF_INIT;
	struct termios old, quiet;
	char chunk[4096];
	ssize_t r;
	int tty = isatty(0) && tcgetattr(0, &old) == 0;

	if (tty) {
		fprintf(stderr, "value of secret '%s': ", name);
		fflush(stderr);
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(0, TCSAFLUSH, &quiet);
	}
	for (;;) {
		r = read(0, chunk, sizeof chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		sbx_buf_add(&b, chunk, (size_t)r);
		if (b.len > SBX_SECRET_MAX + 2)
			break;
		if (tty && memchr(chunk, '\n', (size_t)r))
			break;
	}
	explicit_bzero(chunk, sizeof chunk);
	if (tty) {
		tcsetattr(0, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	if (r < 0) {
		sbx_buf_release(&b);
		sbx_die(SBX_EX_FAIL, "cannot read the value from stdin:");
	}
	if (tty && b.len && memchr(b.data, '\n', b.len))
		b.len = (size_t)((char *)memchr(b.data, '\n', b.len) - b.data);
	else if (b.len && b.data[b.len - 1] == '\n')
		b.len--;
	*len = b.len;
	return b.data ? b.data : sbx_xstrdup("");
}

static int
cmd_set(const char *name, json_t *meta)
{
	struct sbx_err err = {0};
	char canon[65], *v;
	size_t len;
	json_t *j;

	if (sbx_secret_name(name, canon, &err) < 0)
		sbx_die_err(&err);
	v = read_value(canon, &len);
	j = sbx_secret_set(canon, v, len, meta, &err);
	explicit_bzero(v, len);
	free(v);
	if (!j)
		sbx_die_err(&err);
	sbx_out_json(j);
	json_decref(j);
	return SBX_EX_OK;
}

static int
cmd_ls(void)
{
	struct sbx_err err = {0};
	json_t *all = sbx_secret_list(&err), *j;
	size_t i;

	if (!all)
		sbx_die_err(&err);
	json_array_foreach(all, i, j)
		sbx_out_json(j);
	json_decref(all);
	return SBX_EX_OK;
}

static int
rm_one(const char *name, int rc)
{
	struct sbx_err err = {0};

	if (sbx_secret_rm(name, &err) < 0) {
		sbx_warn("%s", err.msg);
		return err.code > rc ? err.code : rc;
	}
	return rc;
}

/* The names of the operands, or one a line on stdin (a bare name or an
 * object with a "name", as ls prints them). Keeps going; the worst. */
static int
cmd_rm(char **names, int n)
{
	char *line = NULL, *s;
	size_t cap = 0, k;
	json_t *j;
	int i, rc = SBX_EX_OK;

	for (i = 0; i < n; i++)
		rc = rm_one(names[i], rc);
	if (n)
		return rc;
	while (getline(&line, &cap, stdin) > 0) {
		k = strcspn(line, "\r\n");
		line[k] = '\0';
		for (s = line; *s == ' ' || *s == '\t'; s++)
			;
		if (!*s)
			continue;
		if (*s == '{') {
			j = json_loads(s, 0, NULL);
			if (!sbx_json_str(j, "name")) {
				sbx_warn("no \"name\" in a line of stdin");
				rc = rc > SBX_EX_DATA ? rc : SBX_EX_DATA;
			} else {
				rc = rm_one(sbx_json_str(j, "name"), rc);
			}
			json_decref(j);
		} else {
			rc = rm_one(s, rc);
		}
	}
	free(line);
	return rc;
}

static void
add_meta(json_t *meta, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char *k;

	if (!eq || eq == kv)
		sbx_usage_error(usage, "bad metadata '%s' (want key=value)",
		    kv);
	k = sbx_xasprintf("%.*s", (int)(eq - kv), kv);
	json_object_set_new(meta, k, json_string(eq + 1));
	free(k);
}

/* --help: a line for each option (the common ones: lib/help.c). */
static const struct sbx_help_opt helpopts[] = {
	{"metadata", NULL, "with set: metadata to keep with the secret"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  printenv ANTHROPIC_API_KEY | sbx-secret set anthropic -m team=agents",
	1,
};

static const char shortopts[] = "hm:qvV";

int
main(int argc, char **argv)
{
	const char *sub = NULL;
	json_t *meta = NULL;
	int c, rc = SBX_EX_OK;

	sbx_prog_set(argv);
	/* Options may come before the command too. */
	sbx_opt_cmd_first(argc, argv, shortopts, longopts);
	if (argc > 1 && (!strcmp(argv[1], "set") || !strcmp(argv[1], "ls") ||
	    !strcmp(argv[1], "rm"))) {
		sub = argv[1];
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (!meta)
				meta = json_object();
			add_meta(meta, optarg);
			break;
		default:
			if (!sbx_opt_common(c, usage))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (!sub)
		sbx_usage_error(usage, optind < argc ? "unknown command '%s'" :
		    "a command is required (set, ls or rm)", argv[optind]);
	if (meta && strcmp(sub, "set"))
		sbx_usage_error(usage, "--metadata is for sbx-secret set");
	if (!strcmp(sub, "set")) {
		if (argc - optind != 1)
			sbx_usage_error(usage, "set takes one name");
		rc = cmd_set(argv[optind], meta);
	} else if (!strcmp(sub, "ls")) {
		if (optind < argc)
			sbx_usage_error(usage, "unexpected argument '%s'",
			    argv[optind]);
		rc = cmd_ls();
	} else {
		if (optind == argc && isatty(0))
			sbx_usage_error(usage, "rm takes names (or them on "
			    "stdin)");
		rc = cmd_rm(argv + optind, argc - optind);
	}
	json_decref(meta);
	return sbx_out_close(rc);
}
