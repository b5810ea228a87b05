# sbx - small Unix tools for code sandboxes. A plain GNU Makefile.
.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDARY:

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBEXECDIR ?= $(PREFIX)/libexec
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
DESTDIR ?=

CC ?= cc
PKG_CONFIG ?= pkg-config
WARN = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wformat=2 -Wno-format-nonliteral
OPT ?= -O2 -g
# SAN=1: AddressSanitizer and UndefinedBehaviorSanitizer, in a build of
# its own. sbx-init is static and so stays unsanitized.
# The tools link statically: sbx-exec is the hot path of every agent loop,
# and a static binary starts in about half the time of a dynamic one on a
# small VM (scripts/bench). Sanitizers need the dynamic runtime.
ifeq ($(FUZZ),1)
# FUZZ=1 (what `make fuzz` asks itself for): the library built by clang
# for libFuzzer, with the sanitizers, in build/fuzz.
CC = clang
BUILD = build/fuzz
BIN = build/fuzz/bin
SANFLAGS = -fsanitize=fuzzer-no-link,address,undefined \
	   -fno-omit-frame-pointer -fno-sanitize-recover=all
STATIC =
# clang's own warnings on a string split over lines in an array, and on
# a pointer into a string literal (lib/docker/ca.c, on purpose).
WARN += -Wno-string-concatenation -Wno-string-plus-int
else ifeq ($(SAN),1)
BUILD = build/san
BIN = build/san/bin
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer \
	   -fno-sanitize-recover=all
STATIC =
else
BUILD = build/default
BIN = bin
SANFLAGS =
STATIC = -static
endif
# Quiet: a line per file made, "CC build/default/lib/cli.o"; V=1 shows the
# commands instead, and make -s (as make demo builds) shows nothing.
ifeq ($(V),1)
Q =
MSG = @:
else
Q = @
MSG = @printf '  %-3s%s\n'
ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
MSG = @:
endif
endif
# The suites build with -Werror, as CI does.
ifneq ($(filter check,$(MAKECMDGOALS))$(filter 1,$(WERROR)),)
WARN += -Werror
endif

DEPS_CFLAGS := $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
DEPS_LIBS := $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)
# -MMD -MP: each object's header dependencies, in a .d file beside it.
override CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) $(OPT) $(SANFLAGS) \
	-MMD -MP -Ilib $(DEPS_CFLAGS) $(CFLAGS)
override LDFLAGS := $(SANFLAGS) $(LDFLAGS)
LDLIBS = $(DEPS_LIBS)
# sbx-sync and sbx-cp alone need libarchive and nettle (SHA-256). Linked
# dynamically they cost 10-20 ms at every start (libarchive brings libxml2, ICU and
# libstdc++), a tenth of a pull; so it is static too. libarchive's tar
# writer reaches its table of every format (xar wants libxml2), which
# --gc-sections drops with the rest of what is never called. Not
# libcrypto: a static one makes ld warn of dlopen and getaddrinfo.
SYNC_LIBS := $(shell $(PKG_CONFIG) --libs libarchive nettle 2>/dev/null \
	|| echo -larchive -lnettle)
SYNC_STATIC_LIBS := -Wl,--gc-sections $(filter-out -lxml2,$(shell \
	$(PKG_CONFIG) --static --libs libarchive nettle 2>/dev/null \
	|| echo -larchive -lnettle))
# Each tool is built twice. $(BIN)/sbx-X: static, the local backend only.
# $(BIN)/remote/sbx-X: dynamic, with libcurl and every backend; the static
# one runs it when asked for a backend it lacks. libcurl pulls some thirty
# shared libraries (18 ms to start) and Debian ships no static one, so the
# local hot path must not carry it.
CURL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcurl 2>/dev/null)
# libcrypto for the docker backend's CA (libcurl loads it anyway), nettle
# for the hashes of every backend's sync, ISA-L for a pull's inflate.
REMOTE_LIBS := $(shell $(PKG_CONFIG) --libs libcurl libcrypto nettle \
	libisal 2>/dev/null || echo -lcurl -lcrypto -lnettle -lisal)

# The sources by folder, so that a new file needs no edit here: the core
# is lib/*.c; a backend is a folder, lib/local/ and lib/qemu/ (but for
# guest.c and times.c, sbx-init's) in the static flavour,
# lib/docker/, lib/e2b/ and lib/daytona/ (with lib/http.c) in the remote
# one; lib/sbxd/ is the server.
REMOTE_SRC = lib/http.c \
	$(wildcard lib/docker/*.c lib/e2b/*.c lib/daytona/*.c) \
	lib/image/registry.c lib/image/pull.c lib/image/inflate.c \
	lib/image/builder.c lib/image/build.c
REMOTE_OBJ = $(REMOTE_SRC:%.c=$(BUILD)/remote/%.o)

LIB_SRC = $(filter-out $(REMOTE_SRC) lib/qemu/guest.c lib/qemu/times.c,$(wildcard lib/*.c \
	lib/local/*.c lib/net/*.c lib/image/*.c lib/qemu/*.c))
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
CMDS = sbx-cost sbx-cp sbx-create sbx-exec sbx-fork sbx-gc sbx-image sbx-kill \
	sbx-logs sbx-ls sbx-net sbx-pause sbx-port sbx-secret sbx-shell \
	sbx-snapshot sbx-stats sbx-sync sbx-volume
TOOLS = $(CMDS:%=$(BIN)/%)
REMOTE_TOOLS = $(CMDS:%=$(BIN)/remote/%)
# The agent: only what it needs, linked statically, never sanitized.
INIT_SRC = cmd/sbx-init.c lib/local/init.c lib/msg.c lib/local/watch.c \
	   lib/local/seccomp.c lib/buf.c lib/err.c lib/shell.c \
	   lib/local/sessions.c lib/local/user.c lib/qemu/guest.c \
	   lib/qemu/times.c
INIT_OBJ = $(INIT_SRC:%.c=$(BUILD)/init/%.o)
UNIT_SRC = $(wildcard tests/unit/*.c)
UNITS = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)

# sbxd: the server, dynamic (libmicrohttpd, threads), the local backend.
SBXD_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard lib/sbxd/*.c))
SBXD_LIBS := $(shell $(PKG_CONFIG) --libs libmicrohttpd libcrypto zlib \
	2>/dev/null || echo -lmicrohttpd -lcrypto -lz) -lpthread

# sbx-netd: a sandbox's network helper, dynamic (threads, and libmnl has
# no static library), so lib/netd/ stays out of libsbx.a. OpenSSL: its CA
# and the TLS of the hosts it injects headers for. It starts at every
# create with -n allow, before the sandbox may run anything: libnftnl,
# OpenSSL and jansson are linked in statically (as shared libraries they
# cost ~6 ms of relocations at each start), libc and libmnl stay shared
# (getaddrinfo wants the dynamic libc). The SAN build links them all
# dynamically.
NETD_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard lib/netd/*.c))
NETD_CFLAGS := $(shell $(PKG_CONFIG) --cflags libnftnl openssl \
	2>/dev/null)
ifeq ($(SAN),1)
NETD_LIBS := $(shell $(PKG_CONFIG) --libs libnftnl libmnl openssl \
	2>/dev/null || echo -lnftnl -lmnl -lssl -lcrypto) $(DEPS_LIBS) \
	-lpthread
else
NETD_LIBS := -no-pie -Wl,--gc-sections -Wl,-Bstatic -lnftnl -lssl -lcrypto \
	-ljansson -Wl,-Bdynamic -lmnl -ldl -lpthread
endif

all: $(TOOLS) $(REMOTE_TOOLS) $(BIN)/sbx-init $(BIN)/sbxd $(BIN)/sbx-netd

# What -MMD wrote: an object is rebuilt when a header it includes changes.
CMD_OBJ = $(CMDS:%=$(BUILD)/cmd/%.o) $(BUILD)/cmd/sbxd.o \
	$(BUILD)/cmd/sbx-netd.o
DEPS = $(patsubst %.o,%.d,$(LIB_OBJ) $(REMOTE_OBJ) $(INIT_OBJ) $(SBXD_OBJ) \
	$(NETD_OBJ) $(CMD_OBJ) $(BUILD)/remote/lib/backend.o \
	$(BUILD)/tests/lib/portable.o) $(UNITS:%=%.d)
-include $(DEPS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(MSG) CC $@
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/init/%.o: %.c
	@mkdir -p $(@D)
	$(MSG) CC $@
	$(Q)$(CC) $(filter-out $(SANFLAGS),$(CFLAGS)) -c -o $@ $<

$(BUILD)/libsbx.a: $(LIB_OBJ)
	@rm -f $@
	$(MSG) AR $@
	$(Q)$(AR) rcs $@ $^

# The remote flavour: backend.c again, with every backend in its table.
$(BUILD)/remote/%.o: %.c
	@mkdir -p $(@D)
	$(MSG) CC $@
	$(Q)$(CC) $(CFLAGS) $(CURL_CFLAGS) -DSBX_REMOTE -c -o $@ $<

$(BUILD)/libsbx-remote.a: $(REMOTE_OBJ)
	@rm -f $@
	$(MSG) AR $@
	$(Q)$(AR) rcs $@ $^

REMOTE_LINK = $(BUILD)/remote/lib/backend.o $(BUILD)/libsbx-remote.a \
	$(BUILD)/libsbx.a

$(BIN)/remote/%: $(BUILD)/cmd/%.o $(REMOTE_LINK)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(REMOTE_LIBS) $(LDLIBS)

# sbx-create alone imports a directory as a docker image (libarchive),
# and makes an image's tree again after a boot (sbx_image_unpack):
# -u pulls in lib/docker/image.c, which the other tools' weak reference
# leaves out. libarchive linked in statically, as sbx-sync's: shared, it
# would cost every docker create ~18 ms more to start.
CREATE_STATIC_LIBS = -Wl,-Bstatic $(SYNC_STATIC_LIBS) -Wl,-Bdynamic
$(BIN)/remote/sbx-create: $(BUILD)/cmd/sbx-create.o $(REMOTE_LINK)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -Wl,-u,sbx_docker_import -Wl,-u,sbx_image_unpack \
		-o $@ $^ \
		$(if $(STATIC),$(CREATE_STATIC_LIBS),$(SYNC_LIBS)) \
		$(REMOTE_LIBS) $(LDLIBS)

# sbx-image alone builds images (lib/docker/build.c, the weak references
# of sbx.h), with libarchive as sbx-create.
$(BIN)/remote/sbx-image: $(BUILD)/cmd/sbx-image.o $(REMOTE_LINK)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -Wl,-u,sbx_docker_build \
		-Wl,-u,sbx_docker_image_exists -Wl,-u,sbx_image_pull \
		-Wl,-u,sbx_e2b_build -Wl,-u,sbx_e2b_template_exists \
		-Wl,-u,sbx_image_build_local -Wl,-u,sbx_docker_pull -o $@ $^ \
		$(if $(STATIC),$(CREATE_STATIC_LIBS),$(SYNC_LIBS)) \
		$(REMOTE_LIBS) $(LDLIBS)

# sbx-shell alone copies the agent into a docker, e2b or daytona sandbox (a tar:
# libarchive, as sbx-create), lib/shellremote.c by its weak reference.
$(BIN)/remote/sbx-shell: $(BUILD)/cmd/sbx-shell.o $(REMOTE_LINK)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -Wl,-u,sbx_shell_remote -o $@ $^ \
		$(if $(STATIC),$(CREATE_STATIC_LIBS),$(SYNC_LIBS)) \
		$(REMOTE_LIBS) $(LDLIBS)

# sbx-snapshot exports and imports a snapshot as a tar (libarchive).
$(BIN)/remote/sbx-sync $(BIN)/remote/sbx-cp: \
		$(BIN)/remote/%: $(BUILD)/cmd/%.o $(REMOTE_LINK)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(SYNC_LIBS) $(REMOTE_LIBS) $(LDLIBS)

# sbx-snapshot and sbx-fork take docker snapshots, and sbx-snapshot
# exports them (lib/docker/snaptake.c, libarchive): -u pulls it in, which
# the other tools' weak references leave out.
$(BIN)/remote/sbx-snapshot $(BIN)/remote/sbx-fork: \
		$(BIN)/remote/%: $(BUILD)/cmd/%.o $(REMOTE_LINK)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -Wl,-u,sbx_docker_snap_take \
		-Wl,-u,sbx_docker_snap_export -Wl,-u,sbx_e2b_snap_export \
		-Wl,-u,sbx_snap_export_diff -o $@ $^ $(SYNC_LIBS) \
		$(REMOTE_LIBS) $(LDLIBS)

$(BIN)/%: $(BUILD)/cmd/%.o $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(STATIC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/sbx-sync $(BIN)/sbx-cp $(BIN)/sbx-image: \
		$(BIN)/%: $(BUILD)/cmd/%.o $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(STATIC) $(LDFLAGS) -o $@ $^ \
		$(if $(STATIC),$(SYNC_STATIC_LIBS),$(SYNC_LIBS)) $(LDLIBS)

# sbx-create makes an image's tree again from its blobs when it was made
# before the last boot and not synced (lib/image/store.c): the unpack,
# by its weak reference, and libarchive.
$(BIN)/sbx-create: $(BUILD)/cmd/sbx-create.o $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(STATIC) $(LDFLAGS) -Wl,-u,sbx_image_unpack -o $@ $^ \
		$(if $(STATIC),$(SYNC_STATIC_LIBS),$(SYNC_LIBS)) $(LDLIBS)

# sbx-snapshot exports a qemu snapshot through two VMs (lib/snapdiff.c,
# its weak reference).
$(BIN)/sbx-snapshot: $(BUILD)/cmd/sbx-snapshot.o $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(STATIC) $(LDFLAGS) -Wl,-u,sbx_snap_export_diff -o $@ $^ \
		$(if $(STATIC),$(SYNC_STATIC_LIBS),$(SYNC_LIBS)) $(LDLIBS)

# sbx-shell copies the agent into a qemu VM as it does into a docker
# sandbox (lib/shellremote.c, its weak reference; a tar: libarchive).
$(BIN)/sbx-shell: $(BUILD)/cmd/sbx-shell.o $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(STATIC) $(LDFLAGS) -Wl,-u,sbx_shell_remote -o $@ $^ \
		$(if $(STATIC),$(SYNC_STATIC_LIBS),$(SYNC_LIBS)) $(LDLIBS)

# The tests' own sbx-sync: the local backend's files moved through the
# sandbox's shell, as a backend that can only exec moves them
# (tests/lib/portable.c, linked in place of lib/files.c).
TEST_TOOLS = $(BIN)/test/sbx-sync
$(BIN)/test/sbx-sync: $(BUILD)/cmd/sbx-sync.o $(BUILD)/tests/lib/portable.o \
		$(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(STATIC) $(LDFLAGS) -o $@ $^ \
		$(if $(STATIC),$(SYNC_STATIC_LIBS),$(SYNC_LIBS)) $(LDLIBS)

$(BUILD)/lib/sbxd/%.o: lib/sbxd/%.c
	@mkdir -p $(@D)
	$(MSG) CC $@
	$(Q)$(CC) $(CFLAGS) -pthread -c -o $@ $<

$(BIN)/sbxd: $(BUILD)/cmd/sbxd.o $(SBXD_OBJ) $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -pthread -o $@ $^ $(SBXD_LIBS) $(SYNC_LIBS) $(LDLIBS)

$(BUILD)/lib/netd/%.o: lib/netd/%.c
	@mkdir -p $(@D)
	$(MSG) CC $@
	$(Q)$(CC) $(CFLAGS) $(NETD_CFLAGS) -pthread -c -o $@ $<

$(BIN)/sbx-netd: $(BUILD)/cmd/sbx-netd.o $(NETD_OBJ) $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(LDFLAGS) -pthread -o $@ $^ $(NETD_LIBS)

$(BIN)/sbx-init: $(INIT_OBJ)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) -static -o $@ $^

$(BUILD)/unit/%: tests/unit/%.c $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libsbx.a $(SYNC_LIBS) \
		$(LDLIBS)

# The image code is the remote flavour's (libcurl).
$(BUILD)/unit/imgref: tests/unit/imgref.c $(REMOTE_LINK)
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(CFLAGS) $(CURL_CFLAGS) $(LDFLAGS) -o $@ $< $(REMOTE_LINK) \
		$(SYNC_LIBS) $(REMOTE_LIBS) $(LDLIBS)

# The suites (scripts/check): C unit tests, then bats against the
# binaries just built, then the conformance suite once for each backend
# in BACKENDS. TAP throughout; .ci/run counts it.
ifeq ($(SAN),1)
# The sanitizer run's conformance: local, and e2b through sbxd (sbxd's
# code and the remote tools'). docker's code runs under the sanitizers in
# tests/backend/docker/, and its conformance in the default run; CI's time
# is short.
BACKENDS ?= local e2b
else
BACKENDS ?= local docker docker:runsc e2b daytona
endif

check: all $(UNITS) $(TEST_TOOLS)
	@SBX_BIN=$(CURDIR)/$(BIN) SBX_SAN=$(SAN) BACKENDS='$(BACKENDS)' \
		scripts/check $(UNITS)

# The slow suite make check runs a part of: the whole conformance suite on
# docker under gVisor (~12 min on a 2-core machine).
check-runsc: all $(TEST_TOOLS)
	@SBX_BIN=$(CURDIR)/$(BIN) SBX_SAN=$(SAN) BACKENDS=docker:runsc \
		SBX_CONFORMANCE_ONLY=1 SBX_RUNSC_FULL=1 scripts/check

# The conformance suite on the qemu backend: a VM per sandbox under TCG,
# ~4 s a boot; make check runs tests/qemu-*.bats (a VM or two shared by
# each file's tests) in its place, and its SAN=1 run qemu-backend and
# qemu-guest alone (scripts/check).
check-qemu: all $(TEST_TOOLS)
	@SBX_BIN=$(CURDIR)/$(BIN) SBX_SAN=$(SAN) BACKENDS=qemu \
		SBX_CONFORMANCE_ONLY=1 scripts/check

# make fuzz: the libFuzzer harnesses of tests/fuzz/ (one per parser), built
# with clang and the sanitizers into build/fuzz/, each run FUZZ_TIME
# seconds from its corpus tests/fuzz/corpus/NAME/ (new inputs go to
# build/fuzz/corpus/NAME/, crashers to build/fuzz/crash-NAME-*); TAP, and
# fails on a crash, a leak or an input slower than 5 s. Not part of
# `make check`: CI runs it after the SAN=1 suites. FUZZ_TIME=0: build only.
FUZZ_TIME ?= 30
FUZZ_SRC = $(wildcard tests/fuzz/*.c)
FUZZ_NAMES = $(FUZZ_SRC:tests/fuzz/%.c=%)
FUZZERS = $(FUZZ_NAMES:%=build/fuzz/bin/%)
FUZZ_REMOTE = docker_json docker_tar e2b_json

fuzz:
	@$(MAKE) --no-print-directory FUZZ=1 fuzzers
	@scripts/fuzz $(FUZZ_TIME) $(FUZZ_NAMES)

fuzzers: $(FUZZERS)
-include $(FUZZERS:%=%.d)

# e2bproto.c decodes base64 with libcrypto (what sbxd, its one user, links).
build/fuzz/bin/e2bproto: SYNC_LIBS += $(SBXD_LIBS)
build/fuzz/bin/%: tests/fuzz/%.c $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libsbx.a \
		$(SYNC_LIBS) $(LDLIBS)

$(FUZZ_REMOTE:%=build/fuzz/bin/%): build/fuzz/bin/%: tests/fuzz/%.c \
		$(BUILD)/libsbx-remote.a $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(CFLAGS) $(CURL_CFLAGS) -DSBX_REMOTE -fsanitize=fuzzer \
		-o $@ $< $(BUILD)/libsbx-remote.a $(BUILD)/libsbx.a \
		$(REMOTE_LIBS) $(LDLIBS)

# sbxd's request parsers: control.c compiled into the harness, the rest
# of the server beside it.
build/fuzz/bin/sbxd_net: tests/fuzz/sbxd_net.c \
		$(filter-out %/control.o,$(SBXD_OBJ)) $(BUILD)/libsbx.a
	@mkdir -p $(@D)
	$(MSG) LD $@
	$(Q)$(CC) $(CFLAGS) -pthread -fsanitize=fuzzer -o $@ $< \
		$(filter-out %/control.o,$(SBXD_OBJ)) $(BUILD)/libsbx.a \
		$(SBXD_LIBS) $(SYNC_LIBS) $(LDLIBS)

demo: scripts/install-deps
	@scripts/install-deps
	@echo "building the tools (make V=1 demo shows the commands)"
	@$(MAKE) --no-print-directory $(if $(filter 1,$(V)),,-s) all
	@scripts/demo $(CURDIR)/$(BIN)

lint:
	@! grep -nE '\b(strcpy|strcat|sprintf|atoi|gets|system|popen)\s*\(' \
		cmd/*.c lib/*.[ch] lib/*/*.[ch] || \
		{ echo "lint: banned function above"; exit 1; }
	mandoc -Tlint -W warning man/*.[1-8]
	bash -n completions/bash/sbx

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBEXECDIR)/sbx \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)
	install -m 755 $(BIN)/sbxd $(DESTDIR)$(SBINDIR)
	install -m 755 $(BIN)/sbx-init $(BIN)/sbx-netd $(DESTDIR)$(LIBEXECDIR)/sbx
	install -d $(DESTDIR)$(LIBEXECDIR)/sbx/remote
	install -m 755 $(REMOTE_TOOLS) $(DESTDIR)$(LIBEXECDIR)/sbx/remote
	install -m 644 man/*.1 $(DESTDIR)$(MANDIR)/man1
	install -m 644 man/*.5 $(DESTDIR)$(MANDIR)/man5
	install -m 644 man/*.7 $(DESTDIR)$(MANDIR)/man7
	install -m 644 man/*.8 $(DESTDIR)$(MANDIR)/man8
	for c in $(CMDS) sbxd; do \
		install -m 644 completions/bash/sbx $(DESTDIR)$(BASHCOMPDIR)/$$c; \
	done
	install -m 644 completions/zsh/_sbx $(DESTDIR)$(ZSHCOMPDIR)

uninstall:
	rm -f $(CMDS:%=$(DESTDIR)$(BINDIR)/%) $(DESTDIR)$(SBINDIR)/sbxd \
		$(DESTDIR)$(LIBEXECDIR)/sbx/sbx-init \
		$(DESTDIR)$(LIBEXECDIR)/sbx/sbx-netd \
		$(CMDS:%=$(DESTDIR)$(LIBEXECDIR)/sbx/remote/%) \
		$(CMDS:%=$(DESTDIR)$(BASHCOMPDIR)/%) $(DESTDIR)$(BASHCOMPDIR)/sbxd \
		$(DESTDIR)$(ZSHCOMPDIR)/_sbx
	-rmdir $(DESTDIR)$(LIBEXECDIR)/sbx/remote
	-rmdir $(DESTDIR)$(LIBEXECDIR)/sbx
	cd man && for m in *.[1-8]; do \
		rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$$m; done

clean:
	rm -rf build bin

.PHONY: all check check-qemu check-runsc fuzz fuzzers demo lint install uninstall clean
