"""The cluster as the API server shows it: the API adapter, list and watch, the snapshot."""
