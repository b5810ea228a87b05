/* help.c - --help from a tool's option table, and a one-line message with
 * the closest option for a bad one (getopt's own are turned off) */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sbx.h"

static const struct sbx_help *help;
static char **help_argv;

/* What an option means in every tool, unless the tool says otherwise. */
static const struct sbx_help_opt common[] = {
	{"backend", NULL, "the backend of the sandbox that -I names"},
	{"help", NULL, "print this help and exit; -h prints the synopsis"},
	{"id", NULL, "the sandbox with this id or name"},
	{"quiet", NULL, "silence diagnostics on standard error"},
	{"state", NULL, "the sandbox recorded in this state file"},
	{"verbose", NULL, "print more detail on standard error"},
	{"version", NULL, "print the version and exit"},
	{NULL, NULL, NULL},
};

void
sbx_opt_init(const struct sbx_help *h, char **argv)
{
	size_t seed;

	help = h;
	help_argv = argv;
	/* Ours name the option and the closest one; see sbx_opt_common. */
	opterr = 0;
	/* jansson seeds its hashes at its first object from /dev/urandom
	 * (an open, a read, a close): one system call instead. */
	if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == sizeof seed &&
	    seed)
		json_object_seed(seed);
}

static const struct sbx_help_opt *
find_text(const char *name)
{
	const struct sbx_help_opt *o;

	for (o = help->opts; o && o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	for (o = common; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

/* The short letter of long option i, if it is the first with its value. */
static int
short_of(size_t i)
{
	const struct option *lo = help->longopts;
	size_t j;

	if (lo[i].val == SBX_OPT_HELP)
		return 'h';
	if (lo[i].val <= ' ' || lo[i].val > '~')
		return 0;
	for (j = 0; j < i; j++)
		if (lo[j].val == lo[i].val)
			return 0;
	return lo[i].val;
}

/* The name of the value of a short or long option, as the usage shows it:
 * "-m size" gives "size", "[-e name[=value]]" gives "name[=value]". */
static char *
arg_from_usage(const char *opt)
{
	const char *p = help->usage, *s;
	size_t n = strlen(opt);
	int depth = 0;

	while ((p = strstr(p, opt))) {
		if ((p == help->usage || strchr("[ |", p[-1])) && p[n] == ' ' &&
		    p[n + 1] != '|' && p[n + 1] != '-') {
			for (s = p += n + 1; *p && *p != ' ' && *p != '\n';
			    p++) {
				if (*p == '[')
					depth++;
				else if (*p == ']' && --depth < 0)
					break;
			}
			return p > s ? sbx_xasprintf("%.*s", (int)(p - s), s) :
			    NULL;
		}
		p += n;
	}
	return NULL;
}

/* "  -m, --memory size" for long option i. */
static char *
left_column(size_t i)
{
	const struct option *lo = &help->longopts[i];
	const struct sbx_help_opt *t = find_text(lo->name);
	char *arg = NULL, *opt, *s;
	int c = short_of(i);

	if (lo->has_arg != no_argument) {
		if (t && t->arg)
			arg = sbx_xstrdup(t->arg);
		else if (lo->val > ' ' && lo->val <= '~') {
			opt = sbx_xasprintf("-%c", lo->val);
			arg = arg_from_usage(opt);
			free(opt);
		}
		if (!arg) {
			opt = sbx_xasprintf("--%s", lo->name);
			arg = arg_from_usage(opt);
			free(opt);
		}
		if (!arg)
			arg = sbx_xstrdup("value");
	}
	opt = c ? sbx_xasprintf("-%c, ", c) : sbx_xstrdup("    ");
	s = sbx_xasprintf("  %s--%s%s%s%s", opt, lo->name,
	    lo->has_arg == optional_argument ? "[=" : arg ? " " : "",
	    arg ? arg : "", lo->has_arg == optional_argument ? "]" : "");
	free(opt);
	free(arg);
	return s;
}

static void
print_help(void)
{
	const struct option *lo = help->longopts;
	size_t n, i, j, k, *order, width = 0, w;
	char **left;

	for (n = 0; lo[n].name; n++)
		;
	order = sbx_xcalloc(n + 1, sizeof *order);
	left = sbx_xcalloc(n + 1, sizeof *left);
	/* Sorted by long name, as curl and gh list them. */
	for (i = 0; i < n; i++) {
		for (j = i; j > 0 && strcmp(lo[order[j - 1]].name,
		    lo[i].name) > 0; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
	for (i = 0; i < n; i++) {
		left[i] = left_column(i);
		if ((w = strlen(left[i])) > width && w <= 30)
			width = w;
	}
	fputs(help->usage, stdout);
	fputs("\noptions:\n", stdout);
	for (k = 0; k < n; k++) {
		const struct sbx_help_opt *t;

		i = order[k];
		/* An option without a line is not listed: tests/help.bats
		 * fails on it. */
		if (!(t = find_text(lo[i].name)))
			continue;
		if (strlen(left[i]) > width)
			printf("%s\n%*s  %s\n", left[i], (int)width, "",
			    t->text);
		else
			printf("%-*s  %s\n", (int)width, left[i], t->text);
	}
	printf("\nexample:\n%s\n", help->example);
	printf("\nThe full reference: man %d %s\n", help->section ?
	    help->section : 1, sbx_prog_get());
	for (i = 0; i < n; i++)
		free(left[i]);
	free(left);
	free(order);
	exit(sbx_out_close(0));
}

/* Optimal string alignment distance: a swap of two letters counts 1. */
static size_t
distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j, c, *d, v;

	if (la > 64 || lb > 64)
		return (size_t)-1;
	d = sbx_xcalloc((la + 1) * (lb + 1), sizeof *d);
#define D(x, y) d[(x) * (lb + 1) + (y)]
	for (i = 0; i <= la; i++)
		D(i, 0) = i;
	for (j = 0; j <= lb; j++)
		D(0, j) = j;
	for (i = 1; i <= la; i++)
		for (j = 1; j <= lb; j++) {
			c = a[i - 1] != b[j - 1];
			v = D(i - 1, j - 1) + c;
			if (D(i - 1, j) + 1 < v)
				v = D(i - 1, j) + 1;
			if (D(i, j - 1) + 1 < v)
				v = D(i, j - 1) + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && D(i - 2, j - 2) + 1 < v)
				v = D(i - 2, j - 2) + 1;
			D(i, j) = v;
		}
	v = D(la, lb);
#undef D
	free(d);
	return v;
}

/* A long option getopt did not take: none like it, or more than one. */
static void
bad_long(const char *arg)
{
	const struct option *lo = help->longopts;
	size_t n = strcspn(arg, "="), i, d, best = (size_t)-1, nmatch = 0;
	const char *near = NULL;
	char *name = sbx_xasprintf("%.*s", (int)n, arg), list[256] = "";

	for (i = 0; lo[i].name; i++) {
		if (!strncmp(lo[i].name, name, n)) {
			nmatch++;
			if (strlen(list) + strlen(lo[i].name) + 5 < sizeof list)
				snprintf(list + strlen(list), sizeof list -
				    strlen(list), "%s--%s", *list ? ", " : "",
				    lo[i].name);
		}
		d = distance(name, lo[i].name);
		if (d < best) {
			best = d;
			near = lo[i].name;
		}
	}
	if (nmatch > 1)
		fprintf(stderr, "%s: option '--%s' is ambiguous: %s\n",
		    sbx_prog_get(), name, list);
	else if (near && (best <= 2 || best <= n / 3))
		fprintf(stderr, "%s: unknown option '--%s'; did you mean "
		    "'--%s'?\n", sbx_prog_get(), name, near);
	else
		fprintf(stderr, "%s: unknown option '--%s' (see --help)\n",
		    sbx_prog_get(), name);
	free(name);
}

/* getopt returned '?': say why in one line, as getopt would have. */
static void
bad_option(void)
{
	const struct option *lo = help->longopts;
	const char *arg = NULL;
	size_t i;

	if (optind > 0 && help_argv[optind - 1] &&
	    !strncmp(help_argv[optind - 1], "--", 2))
		arg = help_argv[optind - 1] + 2;
	if (!optopt) {
		bad_long(arg ? arg : "");
		return;
	}
	for (i = 0; lo[i].name; i++)
		if (lo[i].val == optopt)
			break;
	if (!lo[i].name) {
		if (optopt > ' ' && optopt <= '~')
			fprintf(stderr, "%s: unknown option '-%c' (see "
			    "--help)\n", sbx_prog_get(), optopt);
		else
			fprintf(stderr, "%s: bad option\n", sbx_prog_get());
		return;
	}
	/* The long form when the word was one: "--mem" names --memory. */
	if (arg && (lo[i].val >= 256 || (!strncmp(lo[i].name, arg,
	    strcspn(arg, "=")) && strcspn(arg, "=") > 0))) {
		for (i = 0; lo[i].name; i++)
			if (lo[i].val == optopt && !strncmp(lo[i].name, arg,
			    strcspn(arg, "=")))
				break;
		if (!lo[i].name)
			for (i = 0; lo[i].val != optopt; i++)
				;
		if (lo[i].has_arg == no_argument)
			fprintf(stderr, "%s: option '--%s' takes no value\n",
			    sbx_prog_get(), lo[i].name);
		else
			fprintf(stderr, "%s: option '--%s' needs a value\n",
			    sbx_prog_get(), lo[i].name);
	} else
		fprintf(stderr, "%s: option '-%c' needs a value\n",
		    sbx_prog_get(), optopt);
}

int
sbx_help_opt(int c)
{
	if (!help)
		return 0;
	if (c == SBX_OPT_HELP)
		print_help();
	if (c != '?')
		return 0;
	bad_option();
	return 0;
}

void
sbx_opt_cmd_first(int argc, char **argv, const char *shortopts,
    const struct option *longopts)
{
	const struct option *lo;
	const char *a, *p, *q;
	char *cmd;
	size_t n;
	int i = 1, j;

	while (i < argc && argv[i][0] == '-' && argv[i][1] &&
	    strcmp(argv[i], "--")) {
		a = argv[i++];
		if (a[1] == '-') {
			/* --name VALUE, unless --name=VALUE. */
			if (strchr(a, '='))
				continue;
			n = strlen(a + 2);
			for (lo = longopts; lo && lo->name; lo++)
				if (!strncmp(lo->name, a + 2, n) &&
				    lo->has_arg == required_argument) {
					i++;
					break;
				}
			continue;
		}
		/* -xyz: the first letter that takes a value takes the rest,
		 * or the next argument. */
		for (p = a + 1; *p; p++)
			if ((q = strchr(shortopts, *p)) && *p != ':' &&
			    q[1] == ':') {
				if (!p[1])
					i++;
				break;
			}
	}
	if (i <= 1 || i >= argc || !strcmp(argv[i], "--"))
		return;
	cmd = argv[i];
	for (j = i; j > 1; j--)
		argv[j] = argv[j - 1];
	argv[1] = cmd;
}
