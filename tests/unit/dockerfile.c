/* dockerfile.c - TAP unit tests of the Dockerfile parser: line numbers
 * through continuations and comments, flags, the exec form, the escape
 * directive, words with quotes and $VAR substitution, and what is refused
 * with its line. */
#include <string.h>

#include "image/builder.h"
#include "tap.h"

static int
parse(const char *s, struct sbx_dockerfile *df, struct sbx_err *err)
{
	memset(err, 0, sizeof *err);
	return sbx_dockerfile_parse(s, strlen(s), df, err);
}

/* s is refused, the message having want. */
static int
refused(const char *s, const char *want)
{
	struct sbx_dockerfile df;
	struct sbx_err err;

	if (parse(s, &df, &err) == 0) {
		sbx_dockerfile_release(&df);
		printf("# accepted: %s\n", s);
		return 0;
	}
	if (err.code != SBX_EX_USAGE || !strstr(err.msg, want)) {
		printf("# %d '%s', want '%s'\n", err.code, err.msg, want);
		return 0;
	}
	return 1;
}

static void
t_lines(void)
{
	struct sbx_dockerfile df;
	struct sbx_err err;
	const char *s = "# a comment\n"
	    "\n"
	    "FROM base AS b\n"
	    "RUN echo a \\\n"
	    "  # inside\n"
	    "    && echo b\n"
	    "copy --from=b --chown=1:2 x /y\n"
	    "CMD [\"sh\", \"-c\", \"x\"]\n"
	    "ENTRYPOINT [not json\n";

	CHECK(parse(s, &df, &err) == 0);
	CHECK(df.n == 5);
	if (df.n != 5)
		return;
	CHECK(df.v[0].line == 3 && !strcmp(df.v[0].cmd, "FROM") &&
	    !strcmp(df.v[0].args, "base AS b"));
	CHECK(df.v[1].line == 4 && !strcmp(df.v[1].args,
	    "echo a && echo b"));
	CHECK(df.v[2].line == 7 && !strcmp(df.v[2].cmd, "COPY") &&
	    df.v[2].nflags == 2 && !strcmp(df.v[2].flags[0], "--from=b") &&
	    !strcmp(df.v[2].args, "x /y"));
	CHECK(df.v[3].json && json_array_size(df.v[3].json) == 3);
	CHECK(!df.v[4].json && !strcmp(df.v[4].args, "[not json"));
	sbx_dockerfile_release(&df);
}

static void
t_escape(void)
{
	struct sbx_dockerfile df;
	struct sbx_err err;

	CHECK(parse("# escape=`\nFROM x\nRUN dir c:\\ `\n  && echo\n", &df,
	    &err) == 0);
	CHECK(df.escape == '`' && df.n == 2);
	if (df.n == 2)
		CHECK(!strcmp(df.v[1].args, "dir c:\\ && echo"));
	sbx_dockerfile_release(&df);
	/* After an instruction it is a comment. */
	CHECK(parse("FROM x\n# escape=`\nRUN a \\\n b\n", &df, &err) == 0);
	CHECK(df.escape == '\\' && df.n == 2);
	sbx_dockerfile_release(&df);
	CHECK(parse("ARG V=1\nFROM x:$V\n", &df, &err) == 0);
	sbx_dockerfile_release(&df);
}

static void
t_words(void)
{
	struct sbx_err err = {0};
	json_t *v = json_pack("{s:s,s:s}", "A", "1", "E", "");
	char **w;

	w = sbx_df_words("K=$A 'q $A' \"d $A\" ${A}x ${E:-def} ${A:+set} "
	    "${N:-} a\\ b $ end", '\\', v, 1, &err);
	CHECK(w != NULL);
	if (w) {
		const char *want[] = {"K=1", "q $A", "d 1", "1x", "def", "set",
		    "", "a b", "$", "end", NULL};
		int i;

		for (i = 0; want[i] && w[i]; i++)
			if (strcmp(want[i], w[i])) {
				printf("# word %d: '%s', want '%s'\n", i, w[i],
				    want[i]);
				CHECK(0);
			}
		CHECK(!want[i] && !w[i]);
	}
	sbx_df_words_free(w);
	CHECK(!sbx_df_words("a \"b", '\\', v, 4, &err) &&
	    strstr(err.msg, "Dockerfile:4: unclosed quote"));
	CHECK(!sbx_df_words("${A", '\\', v, 5, &err) &&
	    strstr(err.msg, "Dockerfile:5: bad substitution"));
	json_decref(v);
}

static void
t_refused(void)
{
	CHECK(refused("FROM x\nHEALTHCHECK CMD true\n",
	    "Dockerfile:2: HEALTHCHECK is not supported"));
	CHECK(refused("FROM x\n\nONBUILD RUN x\n",
	    "Dockerfile:3: ONBUILD is not supported"));
	CHECK(refused("FROM x\nSTOPSIGNAL 9\n", "Dockerfile:2: STOPSIGNAL"));
	CHECK(refused("FROM x\nVOLUME /v\n", "Dockerfile:2: VOLUME"));
	CHECK(refused("FROM x\nRUN \\\n --mount=type=cache true\n",
	    "Dockerfile:2: RUN --mount=type=cache is not supported"));
	CHECK(refused("FROM x\nCOPY --link a b\n", "COPY --link is not"));
	CHECK(refused("FROM --platform=linux/arm64 x\n",
	    "Dockerfile:1: FROM --platform=linux/arm64 is not supported"));
	CHECK(refused("FROM x\nRUN <<EOF\nhi\nEOF\n", "Dockerfile:2: RUN "
	    "heredoc is not supported"));
	CHECK(refused("FROM x\nFOO bar\n", "Dockerfile:2: unknown "
	    "instruction 'FOO'"));
	CHECK(refused("FROM x\nSHELL /bin/bash\n", "Dockerfile:2: SHELL "
	    "needs a JSON array"));
	CHECK(refused("FROM x\nWORKDIR\n", "Dockerfile:2: WORKDIR needs "
	    "arguments"));
	CHECK(refused("RUN x\n", "Dockerfile:1: the first instruction must "
	    "be FROM"));
	CHECK(refused("# only a comment\n", "must be FROM"));
	CHECK(refused("# escape=x\nFROM a\n", "Dockerfile:1: the escape"));
}

int
main(void)
{
	static const struct tap_test tests[] = {
		{"line numbers through comments and continuations; flags; "
		    "the exec form", t_lines},
		{"the escape directive, only before any instruction",
		    t_escape},
		{"words: quotes, escapes, $VAR and ${VAR:-word}", t_words},
		{"what is not supported is refused with its line", t_refused},
	};

	return tap_run(tests, sizeof tests / sizeof *tests);
}
