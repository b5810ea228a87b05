/* guest.h - sbx-init as PID 1 of a qemu sandbox's VM: what the host and
 * the guest's agent say over the virtio port named "sbx" (msg.c's frames,
 * without fds: none can cross a VM). */
#ifndef SBX_QEMU_GUEST_H
#define SBX_QEMU_GUEST_H

/* The port's name (QEMU's virtserialport name=). */
#define SBX_GUEST_PORT "sbx"

enum {
	SBX_GUEST_PING = 1, /* host -> agent: are you there */
	SBX_GUEST_PONG,     /* agent -> host: JSON {"kernel","pid",
			     * "uptime_ms"} */
	SBX_GUEST_POWEROFF, /* host -> agent: sync the disks, power off */
	SBX_GUEST_ERROR,    /* agent -> host: a frame it does not know */
};

/* The guest's /init: mounts /proc, /sys and /dev, loads the modules
 * /sbx/modules names (one a line, in order, from /sbx/mod/NAME.ko), and
 * serves the port until the host powers it off. */
int sbx_guest_main(void);

#endif
