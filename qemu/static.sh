# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Static-analysis gates of the test suite, on the kernel the modules are
# built for: a W=1 build with no warnings, sparse (C=2) silent,
# checkpatch.pl --strict clean on every source file (taken from Debian's
# linux-source package into the cache), kernel-doc silent on the public
# header; and the harness's own console reader (ts_harness_checks). Sourced
# after lib.sh; each prints check lines and "passed failed".

TS_SOURCES="include/*.h src/*.c src/*.h selftest/*.c selftest/*.h example/edu_request.c"

# checkpatch.pl of the kernel series being built for, from linux-source.
ts_checkpatch() {
	local series dir deb tmp
	series=$(echo "$TS_KREL" | sed -n 's/^\([0-9]*\.[0-9]*\)\..*/\1/p')
	dir=$TS_CACHE/checkpatch-$series
	if [ ! -x "$dir/checkpatch.pl" ]; then
		tmp=$(mktemp -d)
		ts_log "fetching checkpatch.pl from Debian's linux-source-$series"
		(cd "$tmp" && apt-get download -qq "linux-source-$series" >&2) ||
			{ rm -rf "$tmp"; return 1; }
		deb=$(ls "$tmp"/linux-source-*.deb)
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x -C "$tmp" --wildcards './usr/src/linux-source-*.tar.xz'
		mkdir -p "$dir"
		tar -xJf "$tmp"/usr/src/linux-source-*.tar.xz -C "$tmp" \
			--wildcards '*/scripts/checkpatch.pl' \
			'*/scripts/spelling.txt' '*/scripts/const_structs.checkpatch'
		cp "$tmp"/linux-source-*/scripts/{checkpatch.pl,spelling.txt,const_structs.checkpatch} "$dir/"
		rm -rf "$tmp"
	fi
	echo "$dir/checkpatch.pl"
}

ts_static_checks() {
	local work log cp out kdoc
	ts_need_packages sparse xz-utils >/dev/null
	work=$(mktemp -d)
	log=$TS_RESULTS/static.log
	: >"$log"
	cp -a "$TS_ROOT"/{Kbuild,Makefile,dkms.conf,include,src,selftest,example} "$work/"
	check() { # ok name detail
		if [ "$1" = 1 ]; then
			printf '  %-9s ok   %s\n' static "$2"; pass=$((pass + 1))
		else
			printf '  %-9s FAIL %s: %s\n' static "$2" "$3"
			fail=$((fail + 1))
		fi
	}
	local pass=0 fail=0

	out=$(make -C "$work" KERNELRELEASE="$TS_KREL" W=1 C=2 2>&1 &&
		make -C "$work/example" KDIR="/lib/modules/$TS_KREL/build" \
			KBUILD_EXTRA_SYMBOLS="$work/Module.symvers" W=1 C=2 2>&1)
	printf '%s\n' "$out" >>"$log"
	if printf '%s\n' "$out" | grep -q -E 'Error [0-9]|error:'; then
		check 0 build_w1_and_sparse_silent "build failed (see $log)"
	else
		check $(( $(printf '%s\n' "$out" | grep -c 'warning:') == 0 )) \
			"build_w1_and_sparse_silent ($(printf '%s\n' "$out" | grep -c '  CHECK') files checked by sparse)" \
			"$(printf '%s\n' "$out" | grep 'warning:' | head -n 3)"
	fi

	if cp=$(ts_checkpatch); then
		out=$(cd "$TS_ROOT" && for f in $TS_SOURCES; do
			"$cp" --strict --no-tree --terse --show-types -f "$f"
		done 2>&1 | grep -v '^total: 0 errors, 0 warnings, 0 checks')
		printf '%s\n' "$out" >>"$log"
		check $(( $(printf '%s' "$out" | grep -c .) == 0 )) \
			"checkpatch_strict_clean ($(cd "$TS_ROOT" && ls $TS_SOURCES | wc -l) files)" \
			"$(printf '%s\n' "$out" | head -n 3)"
	else
		check 0 checkpatch_strict_clean "linux-source could not be fetched"
	fi

	# a consumer of every upstream name the drop-in header promises,
	# built with -Werror against this kernel and twostep's exports
	mkdir -p "$work/names"
	cat >"$work/names/names.c" <<'EOF'
#include <linux/module.h>
#include <linux/dma-mapping.h>
#include <twostep-dma.h>

static int __init names_init(void)
{
	struct dma_iova_state st;
	struct hmm_dma_map m;
	dma_addr_t a;

	if (dma_iova_try_alloc(NULL, &st, 0, PAGE_SIZE)) {
		dma_iova_link(NULL, &st, 0, 0, PAGE_SIZE, DMA_TO_DEVICE, 0);
		dma_iova_sync(NULL, &st, 0, PAGE_SIZE);
		dma_iova_unlink(NULL, &st, 0, PAGE_SIZE, DMA_TO_DEVICE, 0);
		dma_iova_destroy(NULL, &st, 0, DMA_TO_DEVICE, 0);
		dma_iova_free(NULL, &st);
	}
	if (hmm_dma_map_alloc(NULL, &m, 1, sizeof(a)))
		return -EINVAL;
	a = hmm_dma_map_pfn(NULL, &m, 0, NULL);
	hmm_dma_unmap_pfn(NULL, &m, 0);
	hmm_dma_map_free(NULL, &m);
	return dma_use_iova(&st) + dma_iova_size(&st) + !a;
}
module_init(names_init);
MODULE_LICENSE("GPL");
EOF
	echo 'obj-m := names.o' >"$work/names/Kbuild"
	out=$(make -C "/lib/modules/$TS_KREL/build" M="$work/names" \
		KCFLAGS="-Werror -I$work/include" \
		KBUILD_EXTRA_SYMBOLS="$work/Module.symvers" 2>&1)
	printf '%s\n' "$out" >>"$log"
	check $(( $(printf '%s\n' "$out" | grep -c -E 'warning|error|Error') == 0 )) \
		drop_in_header_builds_every_upstream_name \
		"$(printf '%s\n' "$out" | grep -E 'warning|error' | head -n 3)"

	# the headers package's scripts/, where Debian keeps kernel-doc
	kdoc=$(readlink -f "/lib/modules/$TS_KREL/build/scripts")/kernel-doc
	[ -x "$kdoc" ] ||
		kdoc=$(ls /usr/src/linux-headers-"${TS_KREL%-*}"-common/scripts/kernel-doc 2>/dev/null)
	out=$("$kdoc" -none "$TS_ROOT"/include/*.h 2>&1)
	printf '%s\n' "$out" >>"$log"
	check $(( $(printf '%s' "$out" | grep -c .) == 0 )) \
		kernel_doc_public_headers "$(printf '%s\n' "$out" | head -n 3)"
	rm -rf "$work"
	echo "$pass $fail"
}

# The harness's own reading of a guest console, on a made-up 7.x console
# log whose records were cut and replayed in each way seen there (a cut in
# the name, before the KTAP prefix, a whole line printed again, the replay
# note in mid-line): every case read once, by its whole name. Prints check
# lines and "passed failed".
ts_harness_checks() {
	local dir out want got
	dir=$(mktemp -d)
	printf '%s\r\n' \
		'twostep-harness: begin' \
		'[    1.0] twostep_selftest: twostep-ktap: KTAP version 1' \
		'[    1.0] twostep_selftest: twostep-ktap: 1..5' \
		'[    1.1] twostep_selftest: twostep-ktap: ok 1 whole' \
		'[    1.2] twostep_selftest: twostep-ktap: ok 2 cut_in_the_na' \
		'** replaying previous printk message **' \
		'[    1.2] twostep_selftest: twostep-ktap: ok 2 cut_in_the_name' \
		'[    1.3] twostep_se' \
		'** replaying previous printk message **' \
		'[    1.3] twostep_selftest: twostep-ktap: ok 3 cut_before_the_prefix' \
		'[    1.4] twostep_selftest: twostep-ktap: ok 4 printed_again' \
		'** replaying previous printk message **' \
		'[    1.4] twostep_selftest: twostep-ktap: ok 4 printed_again' \
		'[    1.5] twostep_selftest: twostep-ktap: ok 5 cut_** replaying previous printk message **' \
		'[    1.5] twostep_selftest: twostep-ktap: ok 5 cut_before_the_note' \
		'twostep-harness: selftest rc=0' \
		'twostep-harness: end' >"$dir/none.log"
	: >"$dir/none.qemu.log"
	out=$(TS_RESULTS=$dir TWOSTEP_CASES=any ts_parse none 0)
	rm -rf "$dir"
	want="whole cut_in_the_name cut_before_the_prefix printed_again cut_before_the_note 5 0 0"
	got=$(printf '%s\n' "$out" | awk '/ ok   / { printf "%s ", $3 }'
		printf '%s\n' "$out" | tail -n 1)
	if [ "$got" = "$want" ]; then
		printf '  %-9s ok   %s\n' harness console_replay_read_once
		echo "1 0"
	else
		printf '  %-9s FAIL %s: read %s\n' harness \
			console_replay_read_once "$got"
		echo "0 1"
	fi
}
