"""Simulation engines: the placement experiment and the co-location simulator."""
