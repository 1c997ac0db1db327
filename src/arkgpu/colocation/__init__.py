"""Level-2 policies: how a GPU's compute and memory are split between the pods on it."""
