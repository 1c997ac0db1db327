"""The two-level performance predictor: latency alone (level 1) and under co-location (level 2)."""
