"""Request-level discrete-event simulator of LC inference and BE training sharing GPUs."""
