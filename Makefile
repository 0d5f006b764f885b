# SPDX-License-Identifier: GPL-2.0
# Out-of-tree build of twostep.ko and twostep_selftest.ko.
#
#   make                      build against Debian's installed kernel headers
#   make KERNELRELEASE=x.y.z  build for another installed kernel
#   make KDIR=/path/to/build  build against any prepared kernel tree
#
# The running kernel is never the default: it is not the target.

KERNELRELEASE ?= $(shell dpkg-query -W -f='$${Depends}' linux-headers-amd64 \
	2>/dev/null | sed -n 's/^linux-headers-\([^ ,]*\).*/\1/p')
KDIR ?= $(firstword $(wildcard /lib/modules/$(KERNELRELEASE)/build \
	/usr/src/linux-headers-$(KERNELRELEASE)))

PWD := $(shell pwd)

# DKMS's build (TWOSTEP_DKMS=1, dkms.conf): DKMS strips the modules' debug
# info, so none is made (-g0 after the kernel's -g: a fifth of the compile
# time), unless the tree has a vmlinux: kbuild then makes the modules' BTF,
# which stays, from their debug info.
ifeq ($(TWOSTEP_DKMS)$(wildcard $(KDIR)/vmlinux),1)
NO_DEBUG_INFO := KCFLAGS="$(KCFLAGS) -g0"
endif

all: modules

modules clean:
	@test -n "$(KDIR)" || { echo "no kernel tree: install linux-headers-amd64 or pass KDIR=" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(PWD) $(NO_DEBUG_INFO) $@

.PHONY: all modules clean

# Benchmarks in QEMU guests: results/bench/{bench.csv,bench.md,*.png}.
# BENCH_KERNEL=7.3 (default: twostep beside the kernel's own dma_iova_*),
# 6.1 or 6.12. The CSV names the accelerator (KVM where it works, else
# TCG); ./qemu/bench.sh --compare OLD.csv NEW.csv compares two runs of one
# accelerator. See doc/benchmarks.md.
# BENCH_ICOUNT=1 runs the guests under TCG's -icount shift=0, where a ns of
# guest time is one instruction executed: instruction counts, which the
# emulation's cost of atomics and of the IOMMU does not distort.
# BENCH_ARCH=arm64 boots Debian's arm64 kernel behind QEMU's SMMUv3
# (strict, lazy, passthrough) instead of the Intel vIOMMU.
BENCH_KERNEL ?= 7.3
BENCH_ICOUNT ?= 0
BENCH_ARCH ?= amd64
bench:
	TS_BENCH_KERNEL=$(BENCH_KERNEL) TS_BENCH_ICOUNT=$(BENCH_ICOUNT) \
		TS_BENCH_ARCH=$(BENCH_ARCH) ./qemu/bench.sh

.PHONY: bench

# The Debian package twostep-dkms_<version>_all.deb, in results/deb/
deb:
	./qemu/deb.sh

.PHONY: deb

# Remove what the commands keep in ~/.cache/twostep, saying what it frees
clean-cache:
	./qemu/clean-cache.sh

.PHONY: clean-cache
