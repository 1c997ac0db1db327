"""Domain model: GPU models, nodes, pods and the cluster state they share."""
