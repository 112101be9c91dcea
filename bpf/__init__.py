"""The eBPF data plane's kernel side: the C programs (`ccattler.bpf.c`, layouts in `maps.h`), their
build against the running kernel's BTF (`build`), loading/pinning/attaching with bpftool
(`loader`), the typed map encodings (`maps`) and the bpf() map calls through ctypes (`syscall`).
The agent's side is agent/dataplane/ebpf.py."""
