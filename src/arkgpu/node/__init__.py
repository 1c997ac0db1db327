"""The node runtime: reads regions, runs the adjustment unit, writes shares."""
