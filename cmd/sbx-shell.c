/* sbx-shell - a persistent shell session in a sandbox, driven the way an
 * agent drives a terminal: a command, input to what runs, an interrupt,
 * or a read, each answered with marin's Bash result as one JSON line */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx-shell [-qv] [-b backend] [-I id | -s file] [-S session]\n"
    "                 [-w ms] [-L bytes] [command ... | -i input | -k signal |\n"
    "                 -r | -C | -l | -j]\n";

enum { OPT_LIMIT = 'L' };

static const struct option longopts[] = {
	{"backend", required_argument, NULL, 'b'},
	{"close", no_argument, NULL, 'C'},
	{"help", no_argument, NULL, SBX_OPT_HELP},
	{"id", required_argument, NULL, 'I'},
	{"input", required_argument, NULL, 'i'},
	{"json", no_argument, NULL, 'j'},
	{"limit", required_argument, NULL, 'L'},
	{"list", no_argument, NULL, 'l'},
	{"quiet", no_argument, NULL, 'q'},
	{"read", no_argument, NULL, 'r'},
	{"session", required_argument, NULL, 'S'},
	{"signal", required_argument, NULL, 'k'},
	{"state", required_argument, NULL, 's'},
	{"verbose", no_argument, NULL, 'v'},
	{"version", no_argument, NULL, 'V'},
	{"wait", required_argument, NULL, 'w'},
	{NULL, 0, NULL, 0},
};

static const struct sbx_help_opt helpopts[] = {
	{"close", NULL, "end the session and its shell"},
	{"input", NULL, "send text to what runs (\\n, \\t, \\xHH, \\\\)"},
	{"json", NULL, "take the call as JSON from stdin (marin's Bash)"},
	{"limit", NULL, "the most output one call returns (default 131072)"},
	{"list", NULL, "the sandbox's sessions, a JSON line each"},
	{"read", NULL, "more output of the command that runs"},
	{"session", NULL, "the session's name (default: default)"},
	{"signal", NULL, "interrupt: ^C to the command that runs"},
	{"wait", NULL, "wait up to this long for the end (default 10000)"},
	{NULL, NULL, NULL},
};

static const struct sbx_help help = {
	usage, longopts, helpopts,
	"  sbx-shell -s .sbx/s.json 'cd app && make'\n"
	"  sbx-shell -s .sbx/s.json -w 500 -i 'print(6*7)\\n'",
	1,
};

/* --input's escapes, as printf's %b has them: \n \r \t \\ \e \a \xHH
 * \0NNN; anything else is kept as it is. */
static char *
unescape(const char *s, size_t *len)
{
	char *o = sbx_xmalloc(strlen(s) + 1), *p = o;
	unsigned v;
	int k;

	while (*s) {
		if (*s != '\\' || !s[1]) {
			*p++ = *s++;
			continue;
		}
		s++;
		switch (*s) {
		case 'n': *p++ = '\n'; s++; break;
		case 'r': *p++ = '\r'; s++; break;
		case 't': *p++ = '\t'; s++; break;
		case 'e': *p++ = '\033'; s++; break;
		case 'a': *p++ = '\a'; s++; break;
		case '\\': *p++ = '\\'; s++; break;
		case 'x':
			for (v = 0, k = 0, s++; k < 2 && strchr("0123456789"
			    "abcdefABCDEF", *s) && *s; k++, s++)
				v = v * 16 + (unsigned)(*s <= '9' ? *s - '0' :
				    (*s | 0x20) - 'a' + 10);
			if (!k)
				*p++ = '\\', *p++ = 'x';
			else
				*p++ = (char)v;
			break;
		case '0':
			for (v = 0, k = 0, s++; k < 3 && *s >= '0' && *s <= '7';
			    k++, s++)
				v = v * 8 + (unsigned)(*s - '0');
			*p++ = (char)v;
			break;
		default:
			*p++ = '\\';
		}
	}
	*len = (size_t)(p - o);
	return o;
}

static int
valid_session(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static const char wait_msg[] = "wait_ms must be an integer between 0 and "
    "30000";

/* --json: marin's Bash tool call, {"command"|"input"|"signal","wait_ms"},
 * with marin's errors. */
static void
read_json(struct sbx_shell_req *rq, char **owned)
{
	json_error_t je;
	json_t *o = json_loadf(stdin, 0, &je), *w;
	const char *cmd, *in, *sig;
	long long v = -1;

	if (!json_is_object(o)) {
		json_decref(o);
		sbx_usage_error(usage, "--json: stdin is not a JSON object: %s",
		    je.text);
	}
	w = json_object_get(o, "wait_ms");
	if (w && !json_is_null(w))
		v = json_is_integer(w) ? json_integer_value(w) : -2;
	cmd = sbx_json_str(o, "command");
	in = sbx_json_str(o, "input");
	sig = sbx_json_str(o, "signal");
	/* Checked before anything is taken: a usage error exits. */
	if (v == -2 || v > SBX_SHELL_WAIT_MAX || (v < 0 && v != -1) ||
	    !!cmd + !!in + !!sig > 1 || (sig && strcmp(sig, "interrupt"))) {
		const char *msg = v == -2 || v > SBX_SHELL_WAIT_MAX ||
		    (v < 0 && v != -1) ? wait_msg : !!cmd + !!in + !!sig > 1 ?
		    "Bash accepts one of command, input, or signal per call" :
		    "unknown signal (only interrupt)";

		json_decref(o);
		sbx_usage_error(usage, "%s", msg);
	}
	if (v >= 0)
		rq->wait_ms = (unsigned)v;
	if (cmd || in) {
		rq->op = cmd ? "command" : "input";
		*owned = sbx_xstrdup(cmd ? cmd : in);
		rq->data = *owned;
		rq->len = strlen(*owned);
	} else if (sig) {
		rq->op = "signal";
	}
	json_decref(o);
}

int
main(int argc, char **argv)
{
	struct sbx_shell_req rq = {"default", "read", NULL, 0,
	    SBX_SHELL_WAIT_DEFAULT, 0};
	struct sbx_target t = {0};
	struct sbx_err err = {0};
	const struct sbx_backend *be;
	const char *state = NULL;
	char *owned = NULL, *unesc = NULL;
	const char *input = NULL;
	json_t *ref, *out = NULL;
	uint64_t v;
	size_t i;
	int c, nops = 0, json = 0, rc;

	sbx_prog_set(argv);
	sbx_opt_init(&help, argv);
	while ((c = getopt_long(argc, argv, "+b:Chi:I:jk:lL:qrs:S:vVw:",
	    longopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			rq.op = "close";
			nops++;
			break;
		case 'i':
			input = optarg;
			rq.op = "input";
			nops++;
			break;
		case 'j':
			json = 1;
			nops++;
			break;
		case 'k':
			if (strcmp(optarg, "interrupt") && strcmp(optarg, "INT") &&
			    strcmp(optarg, "SIGINT"))
				sbx_usage_error(usage, "unknown signal '%s' (only "
				    "interrupt)", optarg);
			rq.op = "signal";
			nops++;
			break;
		case 'l':
			rq.op = "list";
			nops++;
			break;
		case OPT_LIMIT:
			if (sbx_parse_u64(optarg, 1, SBX_SHELL_LIMIT_MAX, &v) < 0)
				sbx_usage_error(usage, "--limit must be an integer "
				    "between 1 and %u", SBX_SHELL_LIMIT_MAX);
			rq.limit = (size_t)v;
			break;
		case 'r':
			rq.op = "read";
			nops++;
			break;
		case 'S':
			if (!valid_session(optarg))
				sbx_usage_error(usage, "bad session name '%s' (1 to "
				    "64 of A-Z a-z 0-9 . _ -)", optarg);
			rq.session = optarg;
			break;
		case 'w':
			if (sbx_parse_u64(optarg, 0, SBX_SHELL_WAIT_MAX, &v) < 0)
				sbx_usage_error(usage, "%s", wait_msg);
			rq.wait_ms = (unsigned)v;
			break;
		default:
			if (!sbx_opt_common(c, usage) &&
			    !sbx_target_opt(c, optarg, &t))
				sbx_usage(usage, SBX_EX_USAGE);
		}
	}
	if (nops + (optind < argc) > 1)
		sbx_usage_error(usage, "one of a command, --input, --signal, "
		    "--read, --close, --list or --json at a time");
	if (json && isatty(0))
		sbx_usage_error(usage, "--json reads the call from stdin, which "
		    "is a terminal");
	if (input && !*input)
		sbx_usage_error(usage, "--input is empty");
	if (optind < argc) {
		struct sbx_buf b = SBX_BUF_INIT;

		/* The words of the command, joined as ssh joins them. */
		for (i = (size_t)optind; i < (size_t)argc; i++) {
			if (i > (size_t)optind)
				sbx_buf_add(&b, " ", 1);
			sbx_buf_add(&b, argv[i], strlen(argv[i]));
		}
		sbx_buf_add(&b, "", 1);
		owned = b.data;
		rq.op = "command";
		rq.data = owned;
		rq.len = b.len - 1;
		if (!rq.len) {
			free(owned);
			sbx_usage_error(usage, "the command is empty");
		}
	}
	if (!(ref = sbx_ref_resolve(&t, &state, &err)))
		sbx_die_err(&err);
	/* Before stdin is read: the other flavour reads it, if it runs. */
	sbx_flavour_pick(sbx_json_str(ref, "backend"));
	if (json)
		read_json(&rq, &owned);
	if (input)
		rq.data = unesc = unescape(input, &rq.len);
	if (!(be = sbx_backend_of(ref, &err)) || sbx_backend_need(be,
	    SBX_CAP_SHELL, &err) < 0 || (!be->ops->shell && sbx_err_set(&err,
	    SBX_EX_FAIL, "this sbx-shell cannot reach '%s' sessions",
	    be->name))) {
		json_decref(ref);
		sbx_die_err(&err);
	}
	rc = be->ops->shell(ref, &rq, &out, &err);
	json_decref(ref);
	free(owned);
	free(unesc);
	if (json_is_array(out))
		for (i = 0; i < json_array_size(out); i++)
			sbx_out_json(json_array_get(out, i));
	else if (out)
		sbx_out_json(out);
	json_decref(out);
	if (rc < 0) {
		sbx_out_close(SBX_EX_OK);
		sbx_die_err(&err);
	}
	return sbx_out_close(SBX_EX_OK);
}
