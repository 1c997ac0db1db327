"""Loaders of trace and profile files, with errors that name file, line and field."""
