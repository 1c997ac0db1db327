"""Level-1 placement policies: pure functions over a cluster snapshot, registered by name."""
