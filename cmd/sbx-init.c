/* sbx-init - PID 1 of a local sandbox; started by sbx-create, not by hand.
 * PID 1 of a docker sandbox too (--docker RUNDIR -- CMD). In a sandbox of
 * another backend, the server of its shell sessions
 * (sbx-shell) and the client an exec of it runs; in a qemu VM, its
 * /init, and what sets a push's mtimes (--set-times). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"
#include "qemu/guest.h"

int
main(int argc, char **argv)
{
	/* The kernel's /init of a qemu sandbox's VM (scripts/qemu-guest
	 * puts it there). */
	if (getpid() == 1 && !strcmp(argv[0], "/init"))
		return sbx_guest_main();
	if (argc == 3 && !strcmp(argv[1], "--shell-server"))
		return sbx_local_shell_serve(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--shell-call"))
		return sbx_local_shell_client(argv[2]);
	/* In a qemu VM, run by an exec of /proc/self/exe after a push. */
	if (argc == 2 && !strcmp(argv[1], "--set-times"))
		return sbx_guest_set_times();
	/* Run by hand, it would only wait on fds it does not have. */
	if (getpid() != 1) {
		fprintf(stderr, "sbx-init: the agent of a local sandbox; "
		    "sbx-create starts it\n");
		return SBX_EX_USAGE;
	}
	return sbx_local_init_main(argc, argv);
}
