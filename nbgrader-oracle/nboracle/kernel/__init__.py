"""What runs in the student's kernel: the wire format, the kernel's server, the probes, fresh objects."""
