/* secret.c - TAP unit tests of the secret store, in a throwaway
 * XDG_CONFIG_HOME */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "secret.h"
#include "tap.h"

static char top[] = "/tmp/sbx-unit-secret.XXXXXX";
/* A fresh, empty config home for the test (each runs in a child of its
 * own, so the name tells them apart); returns the store's path. */
static char *
fresh(const char *tag)
{
	char *home = sbx_xasprintf("%s/%s", top, tag);

	mkdir(home, 0755);
	setenv("XDG_CONFIG_HOME", home, 1);
	free(home);
	return sbx_xasprintf("%s/%s/sbx/credentials/secrets", top, tag);
}

static int
mode_of(const char *path)
{
	struct stat sb;

	return stat(path, &sb) < 0 ? -1 : (int)(sb.st_mode & 0777);
}

static void
t_name(void)
{
	struct sbx_err err = {0};
	char out[65], big[70];

	CHECK(sbx_secret_name("Anthropic_API-Key", out, &err) == 0);
	CHECK(!strcmp(out, "anthropic_api-key"));
	CHECK(sbx_secret_name("", out, &err) < 0 && err.code == SBX_EX_USAGE);
	CHECK(sbx_secret_name("a.b", out, &err) < 0);
	CHECK(sbx_secret_name("../x", out, &err) < 0);
	CHECK(sbx_secret_name("a b", out, &err) < 0);
	CHECK(strstr(err.msg, "invalid secret name 'a b'") != NULL);
	CHECK(sbx_secret_name("SEC_abc", out, &err) < 0);
	CHECK(strstr(err.msg, "reserved") != NULL);
	memset(big, 'a', 64);
	big[64] = '\0';
	CHECK(sbx_secret_name(big, out, &err) == 0 && strlen(out) == 64);
	big[64] = 'a';
	big[65] = '\0';
	CHECK(sbx_secret_name(big, out, &err) < 0);
}

static void
t_set_get(void)
{
	struct sbx_err err = {0};
	char *store = fresh("set"), *p;
	json_t *j, *m = json_pack("{s:s}", "team", "a");
	size_t len = 0;
	char *v;

	j = sbx_secret_set("Key", "s3cr3t\n", 7, m, &err);
	CHECK(j != NULL);
	CHECK(!strcmp(sbx_json_str(j, "name"), "key"));
	CHECK(sbx_json_int(j, "version", 0) == 1);
	CHECK(strlen(sbx_json_str(j, "created_at")) == 20);
	CHECK(!strcmp(sbx_json_str(json_object_get(j, "metadata"), "team"),
	    "a"));
	CHECK(json_object_get(j, "value") == NULL);
	json_decref(j);
	CHECK(mode_of(store) == 0700);
	p = sbx_xasprintf("%s/key", store);
	CHECK(mode_of(p) == 0600);
	free(p);
	p = sbx_xasprintf("%s/key.json", store);
	CHECK(mode_of(p) == 0600);
	free(p);
	v = sbx_secret_get("KEY", &len, &err);
	CHECK(v && len == 7 && !memcmp(v, "s3cr3t\n", 7));
	free(v);
	/* A new version keeps created_at and, without metadata, the old. */
	j = sbx_secret_set("key", "two", 3, NULL, &err);
	CHECK(j && sbx_json_int(j, "version", 0) == 2);
	CHECK(!strcmp(sbx_json_str(json_object_get(j, "metadata"), "team"),
	    "a"));
	json_decref(j);
	json_object_clear(m);
	j = sbx_secret_set("key", "three", 5, m, &err);
	CHECK(j && sbx_json_int(j, "version", 0) == 3);
	CHECK(json_object_size(json_object_get(j, "metadata")) == 0);
	json_decref(j);
	v = sbx_secret_get("key", &len, &err);
	CHECK(v && len == 5 && !strcmp(v, "three"));
	free(v);
	json_decref(m);
	free(store);
}

static void
t_refused(void)
{
	struct sbx_err err = {0};
	char *store = fresh("refused"), *p;
	json_t *j;
	size_t len;

	CHECK(sbx_secret_get("nope", &len, &err) == NULL);
	CHECK(err.code == SBX_EX_CRED && !strcmp(err.msg,
	    "no secret 'nope'"));
	CHECK(sbx_secret_info("nope", &err) == NULL &&
	    err.code == SBX_EX_CRED);
	CHECK(sbx_secret_set("x", "", 0, NULL, &err) == NULL &&
	    err.code == SBX_EX_USAGE);
	j = json_pack("{s:i}", "n", 1);
	CHECK(sbx_secret_set("x", "v", 1, j, &err) == NULL &&
	    err.code == SBX_EX_USAGE);
	json_decref(j);
	CHECK(sbx_secret_set("sec_x", "v", 1, NULL, &err) == NULL);
	/* Nothing was made by the refusals. */
	CHECK(access(store, F_OK) < 0);
	j = sbx_secret_set("x", "topvalue", 8, NULL, &err);
	CHECK(j != NULL);
	json_decref(j);
	p = sbx_xasprintf("%s/x", store);
	chmod(p, 0644);
	CHECK(sbx_secret_get("x", &len, &err) == NULL);
	CHECK(err.code == SBX_EX_CRED && strstr(err.msg, "not mode 0600"));
	CHECK(strstr(err.msg, "topvalue") == NULL);
	chmod(p, 0600);
	free(p);
	/* A store open to others is refused. */
	chmod(store, 0755);
	CHECK(sbx_secret_list(&err) == NULL && err.code == SBX_EX_CRED);
	CHECK(sbx_secret_set("y", "v", 1, NULL, &err) == NULL);
	chmod(store, 0700);
	free(store);
}

static void
t_list_rm(void)
{
	struct sbx_err err = {0};
	char *store = fresh("list"), *p;
	json_t *j;
	size_t len;

	j = sbx_secret_list(&err);
	CHECK(json_is_array(j) && json_array_size(j) == 0);
	json_decref(j);
	json_decref(sbx_secret_set("b", "vb", 2, NULL, &err));
	json_decref(sbx_secret_set("a", "va", 2, NULL, &err));
	json_decref(sbx_secret_set("c-1", "vc", 2, NULL, &err));
	/* A write under way and a stray file are not secrets. */
	p = sbx_xasprintf("%s/d.json.tmpAbC123", store);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	free(p);
	p = sbx_xasprintf("%s/Upper.json", store);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	free(p);
	j = sbx_secret_list(&err);
	CHECK(json_array_size(j) == 3);
	CHECK(!strcmp(sbx_json_str(json_array_get(j, 0), "name"), "a"));
	CHECK(!strcmp(sbx_json_str(json_array_get(j, 2), "name"), "c-1"));
	CHECK(json_object_get(json_array_get(j, 0), "value") == NULL);
	json_decref(j);
	CHECK(sbx_secret_rm("B", &err) == 0);
	CHECK(sbx_secret_get("b", &len, &err) == NULL);
	CHECK(sbx_secret_rm("b", &err) < 0 && err.code == SBX_EX_CRED);
	j = sbx_secret_list(&err);
	CHECK(json_array_size(j) == 2);
	json_decref(j);
	j = sbx_secret_info("c-1", &err);
	CHECK(j && sbx_json_int(j, "version", 0) == 1);
	json_decref(j);
	free(store);
}

static void
t_no_home(void)
{
	struct sbx_err err = {0};

	unsetenv("XDG_CONFIG_HOME");
	unsetenv("HOME");
	CHECK(sbx_secret_dir(1, &err) == NULL && err.code == SBX_EX_CRED);
}

static const struct tap_test tests[] = {
	{"names are checked and lower-cased", t_name},
	{"set, get, versions, metadata, modes", t_set_get},
	{"missing, empty, bad metadata, bad modes refused", t_refused},
	{"list by name, rm", t_list_rm},
	{"no HOME nor XDG_CONFIG_HOME: no store", t_no_home},
};

int
main(void)
{
	int rc;

	if (!mkdtemp(top))
		return 1;
	rc = tap_run(tests, sizeof tests / sizeof *tests);
	sbx_rmtree(top);
	return rc;
}
