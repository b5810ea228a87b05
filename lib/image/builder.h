/* builder.h - the local image builder: a Dockerfile's parser
 * (dockerfile.c) and the steps it drives (builder.c), each a layer of the
 * image store, so that another front end (sbxd's template API) can drive
 * the same steps. */
#ifndef SBX_IMAGE_BUILDER_H
#define SBX_IMAGE_BUILDER_H

#include "image/image.h"

/* --- the Dockerfile (dockerfile.c) ---------------------------------- */

struct sbx_df_instr {
	int line;       /* where it starts, from 1 */
	char *cmd;      /* the keyword, uppercase: "RUN" */
	char **flags;   /* "--from=build", in order */
	size_t nflags;
	char *args;     /* the rest, continuations joined */
	json_t *json;   /* the exec (JSON) form's array of strings, or NULL */
};

struct sbx_dockerfile {
	struct sbx_df_instr *v;
	size_t n;
	char escape;    /* '\\', or '`' from "# escape=`" */
};

/* Parse text: an instruction or flag that is not supported, or a syntax
 * error, is SBX_EX_USAGE "Dockerfile:LINE: ...". */
int sbx_dockerfile_parse(const char *text, size_t len,
    struct sbx_dockerfile *df, struct sbx_err *err);
void sbx_dockerfile_release(struct sbx_dockerfile *df);
/* The words of s as the shell-less instructions (ENV, COPY, LABEL...)
 * read them: quotes and the escape removed, $VAR and ${VAR[:-+]word}
 * replaced from vars (an object of strings; NULL: none). NULL-terminated,
 * malloc'd, or NULL with err (an unclosed quote or brace). */
char **sbx_df_words(const char *s, char escape, const json_t *vars,
    int line, struct sbx_err *err);
void sbx_df_words_free(char **w);
/* The value of instruction in's flag --name=VALUE, or NULL. */
const char *sbx_df_flag(const struct sbx_df_instr *in, const char *name);

/* --- the steps (builder.c; the remote flavour) ----------------------- */

struct sbx_stage;

/* A stage from image ref: "scratch", an image of the store, else pulled
 * from its registry (when this flavour can). Missing: SBX_EX_NOSANDBOX. */
struct sbx_stage *sbx_stage_from(const char *ref, struct sbx_err *err);
void sbx_stage_free(struct sbx_stage *st);
/* A stage from another's state (FROM an earlier stage). */
struct sbx_stage *sbx_stage_clone(const struct sbx_stage *from);
/* Its step's label in the output ("step 3/7"), borrowed. */
void sbx_stage_step(struct sbx_stage *st, const char *step);
/* Its image config's "config" (Env, WorkingDir, User, Cmd...): borrowed,
 * the caller changes it in place; history records what it says. */
json_t *sbx_stage_config(struct sbx_stage *st);
void sbx_stage_history(struct sbx_stage *st, const char *created_by,
    int empty);
/* Build output: a line per step on stderr unless quiet; a step's own
 * output too. */
void sbx_stage_quiet(struct sbx_stage *st, int quiet);
/* The cache key of what comes next: the parent layer and the text. A
 * layer step with the same key is taken from the cache (*cached 1). */
/* Run argv in a sandbox of the stage (no network), env the config's Env
 * plus extra (an array of "K=V" or NULL), as the config's User in its
 * WorkingDir; its status != 0 is SBX_EX_FAIL. */
int sbx_stage_run(struct sbx_stage *st, const char *text, char *const *argv,
    const json_t *extra, int *cached, struct sbx_err *err);

struct sbx_copy {
	const char *root;       /* the context; NULL: from */
	struct sbx_stage *from; /* another stage's tree */
	char **src;             /* below root (or from's /), NULL-terminated */
	char **to;              /* each src's own destination, or NULL: */
	const char *dest;       /* in the stage, relative to WorkingDir */
	const char *chown;      /* "user[:group]", or NULL */
	int chmod;              /* -1: as they are */
	int extract;            /* ADD: a tar is unpacked at dest */
};
int sbx_stage_copy(struct sbx_stage *st, const char *text,
    const struct sbx_copy *c, int *cached, struct sbx_err *err);
/* Commit the stage as image name of the store (blobs, config, manifest,
 * the index's record, its rootfs): *out what ls says of it. */
int sbx_stage_commit(struct sbx_stage *st, const char *name, json_t **out,
    struct sbx_err *err);

/* The whole build: the Dockerfile of c, as image name; args the build
 * arguments (an object or NULL). A failing step: SBX_EX_FAIL. Weak: the
 * remote flavour has the builder (with the registry client its FROM
 * pulls through), and only sbx-image links it. */
__attribute__((weak)) int sbx_image_build_local(const struct sbx_ctx *c, const char *name,
    const json_t *args, int quiet, json_t **out, struct sbx_err *err);

#endif
