"""Terminal sizes for `exec -t`: the client's window size set on the pty the agent allocates, at
start and whenever the client's window changes (the kernel then signals SIGWINCH to the pty's
foreground process, `runc exec -t`, which resizes the container's own terminal to match)."""

from __future__ import annotations

import fcntl
import struct
import termios

#: A terminal size the kernel's `struct winsize` holds (unsigned short rows and columns).
MAX_CELLS = 0xFFFF


def set_window_size(fd: int, rows: int, cols: int) -> None:
    """TIOCSWINSZ on `fd` (a pty master); sizes out of range are refused with ValueError."""
    if not (0 < rows <= MAX_CELLS and 0 < cols <= MAX_CELLS):
        raise ValueError(f"terminal size {rows}x{cols} is out of range (1–{MAX_CELLS} rows and columns)")
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
