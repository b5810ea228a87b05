/* sbx-init - PID 1 of a local sandbox; started by sbx-create, not by hand */
#include <stdio.h>
#include <unistd.h>

#include "sbx.h"

int
main(int argc, char **argv)
{
	/* Run by hand, it would only wait on fds it does not have. */
	if (getpid() != 1) {
		fprintf(stderr, "sbx-init: the agent of a local sandbox; "
		    "sbx-create starts it\n");
		return SBX_EX_USAGE;
	}
	return sbx_local_init_main(argc, argv);
}
