"""Pure span code (no torch, no I/O): overlaps, tag schemes, the label space, alignment, windows, decoding."""
