/* seccomp.c - what a command gives up before exec: capabilities, setuid
 * gains, and the syscalls of the denylist */
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "local.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "sbx: no seccomp arch for this machine"
#endif

#define DENY (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define NOSYS (SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA))
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))

static const int denied[] = {
	SYS_init_module, SYS_finit_module, SYS_delete_module,
	SYS_kexec_load, SYS_kexec_file_load,
	SYS_bpf, SYS_perf_event_open,
	SYS_keyctl, SYS_add_key, SYS_request_key,
	SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
	SYS_mount, SYS_umount2, SYS_pivot_root, SYS_open_tree,
	SYS_move_mount, SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick,
	SYS_mount_setattr, SYS_setns,
	SYS_swapon, SYS_swapoff, SYS_reboot, SYS_acct, SYS_syslog,
#ifdef __x86_64__
	SYS_iopl, SYS_ioperm, SYS_uselib,
#endif
	SYS_open_by_handle_at, SYS_userfaultfd, SYS_quotactl,
	SYS_lookup_dcookie, SYS_vhangup,
	SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex,
};

/* The denylist alone (a build step keeps Docker's capabilities); it
 * needs CAP_SYS_ADMIN or no_new_privs. */
int
sbx_local_seccomp(void)
{
	struct sock_filter f[128];
	size_t n = 0, i, nd = sizeof denied / sizeof denied[0];
	struct sock_fprog prog;

	/* Only native syscalls: a foreign arch or x32 would bypass the
	 * numbers below. */
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    NATIVE_ARCH, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, NOSYS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, nr));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K,
	    0x40000000, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, NOSYS);
	for (i = 0; i < nd; i++)
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		    (unsigned)denied[i], (unsigned char)(nd - i + 11),
		    0);
	/* clone3 hides its flags in memory: make libc fall back to clone. */
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    SYS_clone3, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, NOSYS);
	/* No nested user namespaces, through clone or unshare. */
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    SYS_clone, 1, 0);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    SYS_unshare, 0, 2);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	    ARG_LO(0));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K,
	    CLONE_NEWUSER, 6, 5);
	/* ioctl: no TIOCSTI or TIOCLINUX, judged on the low 32 bits only
	 * as the kernel does (CVE-2019-10063). */
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    SYS_ioctl, 0, 4);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	    ARG_LO(1));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    TIOCSTI, 3, 0);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    TIOCLINUX, 2, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
	    SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
	    SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, DENY);
	prog.len = (unsigned short)n;
	prog.filter = f;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Whether this process's bounding set is empty and its ambient set
 * clear already (sbx_local_drop_bounding): its children's hardening
 * need not ask the kernel again, a capability at a time. */
static int bounding_dropped;

/* Whether this process has the filter already (sbx_local_seccomp_once):
 * its children inherit it, and a second copy would only make each of
 * their system calls run it twice. */
static int filtered;

int
sbx_local_seccomp_once(void)
{
	if (!filtered && sbx_local_seccomp() == 0)
		filtered = 1;
	return filtered ? 0 : -1;
}

int
sbx_local_drop_bounding(void)
{
	int cap;

	for (cap = 0; prctl(PR_CAPBSET_READ, cap) >= 0; cap++)
		if (prctl(PR_CAPBSET_DROP, cap) < 0)
			return -1;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	bounding_dropped = 1;
	return 0;
}

int
sbx_local_harden(const struct sbx_local_user *u)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {{0, 0, 0}, {0, 0, 0}};
	/* Sandbox root must not regain capabilities through exec. */
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
	    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
	    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) < 0)
		return -1;
	if (!bounding_dropped && sbx_local_drop_bounding() < 0)
		return -1;
	/* The image's user: its capabilities stay (no setuid fixup) until
	 * capset clears them below. Groups first, while we may: its own
	 * alone, none but its primary when it has none (a rootless
	 * sandbox may not set them: EPERM then, and root's are all). */
	if (u && u->set && ((syscall(SYS_setgroups, (size_t)u->ngroups,
	    u->groups) < 0 && (u->ngroups || errno != EPERM)) ||
	    syscall(SYS_setresgid, u->gid, u->gid, u->gid) < 0 ||
	    syscall(SYS_setresuid, u->uid, u->uid, u->uid) < 0))
		return -1;
	if (syscall(SYS_capset, &h, d) < 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return filtered ? 0 : sbx_local_seccomp();
}
