# qemu.bash - the qemu backend's guest for a test file or a suite:
#
#   sbx_qemu_guest DIR
#   sbx_qemu_setup_file
#
# builds it (scripts/qemu-guest) from $SBX_BIN's sbx-init into DIR, its
# own, and exports SBX_QEMU_GUEST=DIR. Only the kernel package is shared:
# downloaded from Debian's archive once, as the SDKs are from npm, into
# ${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/qemu/cache, which DIR/cache
# links to. A guest of its own, so that another tree's test run never
# boots this one's VMs with its sbx-init (or removes their disks: sbx-image
# prune), nor this one theirs.
sbx_qemu_guest() {
	local d=$1 shared=${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/qemu/cache
	local top=${BASH_SOURCE[0]%/*}/../..
	mkdir -p "$shared" "$d" || return 1
	[ -e "$d/cache" ] || ln -s "$shared" "$d/cache" || return 1
	"$top/scripts/qemu-guest" -q -d "$d" -i "${SBX_BIN:-$top/bin}/sbx-init" || return 1
	export SBX_QEMU_GUEST=$d
}

# A tests/qemu-*.bats file's setup_file, before its images and VMs:
# sbx_setup_file, QEMU there, a guest of the file's own, and the file's
# own VMs' directory and image store (SBX_QEMU_DIR, SBX_IMAGE_DIR).
sbx_qemu_setup_file() {
	sbx_setup_file
	command -v qemu-system-x86_64 >/dev/null ||
		{ echo "qemu-system-x86_64 is not installed (scripts/install-deps)" >&2; return 1; }
	sbx_qemu_guest "$BATS_FILE_TMPDIR/guest" || return 1
	export SBX_QEMU_DIR=$BATS_FILE_TMPDIR/vms
	export SBX_IMAGE_DIR=$BATS_FILE_TMPDIR/store
}
