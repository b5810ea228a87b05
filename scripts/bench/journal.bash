# journal.bash: sourced by the benches' --journal option. A private ext4
# WITH a journal for their SBX_LOCAL_DIR: a sparse file on the disk the
# bench's temp directory is on, through a loop device, made and mounted
# by journal_store and unmounted and removed by journal_store_done (call
# it from the bench's cleanup trap, before removing the temp directory).
#
# Why: ext4 without a journal (this host's /) walks every inode deleted in
# the last minutes on each inode it allocates (recently_deleted in
# fs/ext4/ialloc.c), which a fleet's creates after another's kill pay; a
# typical host's ext4 has a journal. The figures on both say which is
# which. Needs root, mkfs.ext4 (e2fsprogs) and mount's loop support.

journal_img=
journal_dev=
journal_mnt=

# journal_store DIR SIZE: a new journaled ext4 of SIZE (sparse) mounted
# on DIR (made), mode 711 as a store's parent must be. The image is
# DIR.img, beside it, on a loop device with direct I/O: its pages are not
# cached twice (the host's MemAvailable, which the benches read, would
# count the backing file's cache too).
journal_store() {
	local dir=$1 size=$2
	command -v mkfs.ext4 >/dev/null 2>&1 ||
		die "--journal needs mkfs.ext4 (e2fsprogs: scripts/install-deps)"
	journal_img=$dir.img
	truncate -s "$size" "$journal_img" || die "--journal: cannot make $journal_img"
	mkfs.ext4 -q -F -O has_journal -E lazy_itable_init=1 "$journal_img" ||
		die "--journal: mkfs.ext4 failed"
	mkdir -p "$dir"
	journal_dev=$(losetup --direct-io=on -f --show "$journal_img") ||
		die "--journal: no loop device for $journal_img"
	mount "$journal_dev" "$dir" || die "--journal: cannot mount $journal_dev"
	journal_mnt=$dir
	chmod 711 "$dir"
}

# Unmount and remove what journal_store made (nothing when it made
# nothing); a mount still busy is detached lazily.
journal_store_done() {
	if [[ -n $journal_mnt ]]; then
		umount "$journal_mnt" 2>/dev/null || umount -l "$journal_mnt" 2>/dev/null ||
			note "warning: could not unmount $journal_mnt"
		rmdir "$journal_mnt" 2>/dev/null || true
		journal_mnt=
	fi
	if [[ -n $journal_dev ]]; then
		losetup -d "$journal_dev" 2>/dev/null || note "warning: could not detach $journal_dev"
		journal_dev=
	fi
	if [[ -n $journal_img ]]; then
		rm -f "$journal_img"
		journal_img=
	fi
}

# A line for the report: what the store is on.
journal_store_says() {
	if [[ -n $journal_mnt ]]; then
		echo "store: a private ext4 with a journal ($journal_dev, direct I/O, over $journal_img)"
	else
		echo "store: $(findmnt -no FSTYPE,OPTIONS -T "$SBX_LOCAL_DIR" 2>/dev/null | tr -s ' ' | cut -c1-100) (the host's; --journal: a private ext4 with a journal)"
	fi
}
